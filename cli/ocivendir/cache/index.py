"""Owns: the cache's SQLite index — refs, blobs, edges, possession, grants, verdicts, schemes, tag answers, last use.

`possession` says which (registry/repository, digest) pairs were fetched from that repository and verified: the only
content a shared cache serves to a request naming that repository (`engine/content.py`). An index written before the
table existed has no rows in it, so its content is fetched again once per repository (the old index cannot tell bytes
fetched from a repository from bytes another repository's manifest was served from the cache).

The index is in WAL mode with `synchronous = NORMAL`: a commit writes to the WAL without an fsync, and the WAL is
synced when it is checkpointed into the file. A process killed at any moment loses nothing committed (it is in the
kernel's page cache); a power loss or kernel crash may roll back the last commits, never tear the file. A new index is
made without a sync (`_prepare`): a power loss may leave it empty, which is what it was. The index
records only what the blobs on disk already are (a blob is synced and renamed into place before its row is written),
so a rolled-back commit costs a fetch again, and a blob that a rolled-back removal still names is missing on disk,
which every use checks before it trusts a row; the read memo's tokens carry the boot id, so no answer read before the
crash is used after it.

An index that cannot be written (a read-only mount, a full filesystem: `cache/unwritable.py`) is opened read-only, so
warm calls are served; each write then fails with the reason it cannot be written.
"""

from __future__ import annotations

import errno
import json
import os
import time
from contextlib import contextmanager
from threading import RLock, local

from ocivendir.cache import opened
from ocivendir.cache.grants import is_principal
from ocivendir.cache.memo import Memo, bump, generation, state
from ocivendir.cache.rows import (
    BlobRow,
    RefRow,
    Verdict,
    blob_row,
    decoded,
    digest_value,
    ref_row,
    scheme_value,
    size_value,
    time_value,
    verdict_row,
)
from ocivendir.cache.store import LayoutEntry
from ocivendir.cache.unwritable import low_on_space, mounted_read_only, unwritable
from ocivendir.errors import CacheError, CacheUnwritable, os_reason
from ocivendir.fs.paths import pure, split
from ocivendir.oci.reference import Digest

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Iterator
    from types import ModuleType
    from typing import Any, TypeVar

    _T = TypeVar("_T")
    _Rows = list[tuple[object, ...]]

__all__ = ["BlobRow", "CacheIndex", "RefRow", "Verdict", "repair_hint"]

# 2: the file carries it as `PRAGMA user_version` too, so that opening a current index skips the schema script
SCHEMA_VERSION = 3
# a ref's last_used is written again only once it is this old: a warm run (kapp-controller syncs every App every
# 30 s or more) writes nothing, and least-recently-used order keeps a ten-minute grain
TOUCH_INTERVAL = 600.0
# a tag's answer is written again only when it changed or is this old: a warm tag run writes nothing, and
# --stale-if-error's age of an unchanged answer is at most this much more than the time of its last HEAD
TAG_REFRESH = 60.0
_BUSY_RETRIES = 20
_SQLITE_FULL, _SQLITE_IOERR = 13, 10  # primary result codes: no space, and an I/O error (a -shm it cannot extend)
_REFUSED = frozenset({8, 10, 14})  # SQLITE_READONLY, SQLITE_IOERR, SQLITE_CANTOPEN: what a read-only mount gives
_BATCH = 500
_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta(schema_version INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS blobs(digest TEXT PRIMARY KEY, size INTEGER NOT NULL, media_type TEXT NOT NULL,
    created REAL NOT NULL, last_used REAL NOT NULL);
CREATE TABLE IF NOT EXISTS refs(ref TEXT PRIMARY KEY, manifest_digest TEXT NOT NULL, kind TEXT NOT NULL,
    media_type TEXT NOT NULL DEFAULT '', size INTEGER NOT NULL DEFAULT 0, created REAL NOT NULL,
    last_used REAL NOT NULL);
CREATE TABLE IF NOT EXISTS edges(manifest_digest TEXT NOT NULL, blob_digest TEXT NOT NULL,
    PRIMARY KEY(manifest_digest, blob_digest));
CREATE INDEX IF NOT EXISTS edges_blob ON edges(blob_digest);
CREATE TABLE IF NOT EXISTS verdicts(bundle_ref TEXT PRIMARY KEY, relocated INTEGER NOT NULL, method TEXT NOT NULL,
    locations_digest TEXT, missing_json TEXT NOT NULL, checked_at REAL NOT NULL);
CREATE TABLE IF NOT EXISTS schemes(host TEXT PRIMARY KEY, scheme TEXT NOT NULL, checked_at REAL NOT NULL);
CREATE TABLE IF NOT EXISTS tags(ref TEXT PRIMARY KEY, digest TEXT NOT NULL, resolved_at REAL NOT NULL);
CREATE TABLE IF NOT EXISTS grants(manifest_digest TEXT NOT NULL, repository TEXT NOT NULL, principal TEXT NOT NULL,
    granted_at REAL NOT NULL, PRIMARY KEY(manifest_digest, repository, principal));
CREATE TABLE IF NOT EXISTS signatures(ref TEXT NOT NULL, policy TEXT NOT NULL, root TEXT NOT NULL,
    verdict TEXT NOT NULL, checked_at REAL NOT NULL, PRIMARY KEY(ref, policy, root));
CREATE TABLE IF NOT EXISTS possession(repository TEXT NOT NULL, digest TEXT NOT NULL, fetched_at REAL NOT NULL,
    PRIMARY KEY(repository, digest));
"""
_UPSERT_BLOB = (
    "INSERT INTO blobs(digest, size, media_type, created, last_used) VALUES (?,?,?,?,?) "
    "ON CONFLICT(digest) DO UPDATE SET last_used = excluded.last_used"
)
_UPSERT_REF = (
    "INSERT INTO refs(ref, manifest_digest, kind, media_type, size, created, last_used) VALUES (?,?,?,?,?,?,?) "
    "ON CONFLICT(ref) DO UPDATE SET manifest_digest = excluded.manifest_digest, kind = excluded.kind, "
    "media_type = excluded.media_type, size = excluded.size, last_used = excluded.last_used"
)
_PUT_VERDICT = (
    "INSERT OR REPLACE INTO verdicts(bundle_ref, relocated, method, locations_digest, missing_json, checked_at) "
    "VALUES (?,?,?,?,?,?)"
)
_FORGET_SIGNATURES = "DELETE FROM signatures WHERE ref = ?"
_REF_COLUMNS = "SELECT ref, manifest_digest, kind, media_type, size, created, last_used FROM refs"
_LISTING = (
    "SELECT r.ref, r.manifest_digest, r.kind, r.media_type, r.size, r.created, r.last_used, "
    "COALESCE((SELECT SUM(b.size) FROM edges e JOIN blobs b ON b.digest = e.blob_digest "
    "WHERE e.manifest_digest = r.manifest_digest), 0), v.relocated "
    "FROM refs r LEFT JOIN verdicts v ON v.bundle_ref = r.ref ORDER BY r.last_used DESC, r.ref"
)


def repair_hint(path: str | os.PathLike[str]) -> str:
    """How to repair an unusable index: rebuild it from the blobs, which are the truth."""
    return (
        f"run 'ocivendir cache verify --repair --cache-dir {split(path)[0]}' to rebuild it from the cached blobs, "
        "or remove the cache directory"
    )


class CacheIndex:
    """One connection to `index.db`, shared by the run's threads under a lock; busy waits never reach users.

    Every value read back is decoded by `cache/rows.py`; a row that does not decode counts as absent.
    """

    def __init__(self, path: str | os.PathLike[str], clock: Callable[[], float] = time.time) -> None:
        """Open (and create or migrate) the index; an unusable file is a CacheError naming it and the repair.

        While the read memo (`cache/memo.py`) can be trusted, SQLite is opened only when the memo cannot answer.
        """
        self.path = path = pure(path)
        self._clock = clock
        self._lock = RLock()
        self._batches = local()  # this thread's batch of writes (`batch`)
        self._sqlite3: ModuleType | None = None
        self._db: Any = None  # the sqlite3 Connection, once opened
        self._wrote = False
        self._unwritable: CacheUnwritable | None = None  # why the index was opened read-only
        if os.path.exists(path) and not os.path.isfile(path):
            raise CacheError(f"Cannot use cache index '{path}': it is not a regular file", hint=repair_hint(path))
        self._root = split(path)[0]
        self._memo = Memo(path)
        if state(path) is None:  # no memo to read: open now (an unusable index fails here, as it always did)
            if not generation(self._root):
                try:  # an index without a generation (from before the memo, or a torn token) starts one
                    self._bump(None)
                except CacheUnwritable:  # unless it cannot be written: then the memo is not used
                    pass
            self._connection()

    def _bump(self, repository: str | None) -> None:
        """A new generation for a repository's memo answers (None: every repository's); see `cache/memo.py`."""
        try:
            bump(self._root, repository)
        except OSError as exc:
            raise unwritable(exc, "Cannot write cache index", self._root) or CacheError(
                f"Cannot write cache index '{self.path}': {os_reason(exc)}", hint=repair_hint(self.path)
            ) from None

    def _connection(self) -> Any:  # noqa: ANN401 - a sqlite3.Connection (self._db stays Any: it is None until opened)
        """The SQLite connection, opened (and the schema created or migrated) on first use."""
        with self._lock:
            if self._db is None:
                import sqlite3  # noqa: PLC0415 - only when the read memo cannot answer

                self._sqlite3 = sqlite3
                self._db = opened.take(self.path)  # this process's connection from an earlier call, still valid
                try:
                    if self._db is None:
                        self._open(self.path)
                except CacheUnwritable as exc:
                    self._unwritable = exc
                    self._open_read_only()
            return self._db

    def _open(self, target: str, *, uri: bool = False) -> None:
        """Connect to `target` and prepare it (`self._db`); an unusable index is a CacheError, with no connection."""
        sqlite3 = self._sqlite3
        assert sqlite3 is not None  # noqa: S101 - imported by _connection
        try:
            self._db = sqlite3.connect(target, timeout=5.0, check_same_thread=False, isolation_level=None, uri=uri)
        except sqlite3.DatabaseError as exc:
            raise self._unusable(exc) from None
        try:
            self._retry(self._prepare)
        except BaseException:
            self._db.close()
            self._db = None
            raise

    def _open_read_only(self) -> None:
        """An index that cannot be written, opened to be read: as SQLite's reader, else as an unchanging file.

        A full filesystem may not let SQLite make the WAL's shared-memory file that a reader needs. Then the file is
        read as immutable, but only when no WAL holds commits it lacks; otherwise the reason it cannot be written
        stands.
        """
        from urllib.parse import quote  # noqa: PLC0415 - only for a cache that cannot be written

        assert self._unwritable is not None  # noqa: S101 - set by _connection
        name = f"file:{quote(os.path.abspath(self.path))}"
        try:
            self._open(f"{name}?mode=ro", uri=True)
        except CacheError:
            if _pending_commits(self.path):
                raise self._unwritable from None
            try:
                self._open(f"{name}?immutable=1", uri=True)
            except CacheError:
                raise self._unwritable from None

    def _reopen(self) -> None:
        """Open an index opened read-only for writing again, or raise why it cannot be written.

        Space may have been freed since it was opened (a prune removes partial downloads first); a read-only mount
        stays read-only.
        """
        assert self._unwritable is not None  # noqa: S101 - called only then
        if mounted_read_only(self._root):
            raise self._unwritable
        with self._lock:
            if self._db is not None:
                self._db.close()
                self._db = None
            self._unwritable = None
            self._connection()
        if self._unwritable is not None:
            raise self._unwritable

    def _unusable(self, exc: Exception) -> CacheError:
        reason = os_reason(exc) if isinstance(exc, OSError) else str(exc)
        code = getattr(exc, "sqlite_errorcode", 0) & 0xFF
        if code == _SQLITE_FULL or (code == _SQLITE_IOERR and low_on_space(self._root)):
            full = OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), self.path)
            return unwritable(full, "Cannot write cache index", self._root) or CacheError(reason)
        refused = "readonly" in reason.replace(" ", "") or "unable to open" in reason
        if (refused or code in _REFUSED) and mounted_read_only(self._root):
            read_only = OSError(errno.EROFS, os.strerror(errno.EROFS), self.path)
            return unwritable(read_only, "Cannot write cache index", self._root) or CacheError(reason)
        if refused:
            hint = f"make '{self.path}' and its directory writable by this user"
            return CacheUnwritable(f"Cannot write cache index '{self.path}': {reason}", hint=hint)
        return CacheError(f"Cannot use cache index '{self.path}': {reason}", hint=repair_hint(self.path))

    def _prepare(self) -> None:
        """Create or migrate the tables, unless the file says it is already at this schema (one read on a warm run).

        `PRAGMA user_version` is the file's own stamp: 0 for a new file and for an index written before the stamp
        (whose `meta` says 1 and which may lack `possession`); the script is idempotent, so those run it once. WAL mode
        is a property of the file, kept across connections; the busy timeout is the connection's (`timeout=`).

        An empty file (a new index) is made with `synchronous = OFF`, then the connection goes back to NORMAL: with
        NORMAL, making it cost five syncs on the first call's path (the rollback journal's, its directory's, the file's
        for the switch to WAL, then the new WAL's header and its directory's), each waiting for the file system's
        journal (1-8 ms on a busy disk). Nothing can tear: the switch to WAL writes the first page into an empty file
        (a power loss leaves no page, or the new one; a journal left behind rolls the file back to empty), and the
        schema goes into the WAL, whose frames are checksummed (a power loss loses the commit, never part of it). No
        checkpoint runs before NORMAL is back. At worst a power loss leaves an empty index, which is made again.
        """
        self._db.execute("PRAGMA synchronous = NORMAL")  # the connection's: a WAL commit is not synced
        if self._db.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION:  # self._db: set by _connection
            return
        self._bump(None)  # a new or migrated index: no memo answer read before holds
        new = self._db.execute("PRAGMA page_count").fetchone()[0] == 0
        if new:  # an empty file holds nothing to lose: made without a sync (the docstring says why that is safe)
            self._db.execute("PRAGMA synchronous = OFF")
        try:
            self._db.execute("PRAGMA journal_mode = WAL")
            try:  # one transaction: a new index costs one commit, not one per table
                self._db.executescript(
                    f"BEGIN IMMEDIATE;{_SCHEMA}"  # noqa: S608 - constants only
                    f"INSERT INTO meta(schema_version) SELECT {SCHEMA_VERSION:d} WHERE NOT EXISTS (SELECT 1 FROM meta);"
                    f"UPDATE meta SET schema_version = {SCHEMA_VERSION:d};"
                    f"PRAGMA user_version = {SCHEMA_VERSION:d};"
                    "COMMIT;"
                )
            except BaseException:
                if self._db.in_transaction:
                    self._db.execute("ROLLBACK")
                raise
        finally:
            if new:
                self._db.execute("PRAGMA synchronous = NORMAL")

    def close(self) -> None:
        """Leave the connection to `cache/opened.py`, then keep what this run read from SQLite in the memo."""
        with self._lock:
            if self._db is not None:
                opened.keep(self.path, self._db)  # open for this process's next call on the same file
                self._db = None
            self._memo.save(wrote=self._wrote)

    def _retry(self, action: Callable[[], _T]) -> _T:
        """Run an action, waiting out busy locks; any other database error is a CacheError naming the file."""
        for attempt in range(_BUSY_RETRIES + 1):
            try:
                with self._lock:
                    return action()
            except Exception as exc:
                sqlite3 = self._sqlite3
                if sqlite3 is None or not isinstance(exc, sqlite3.DatabaseError):
                    raise
                busy = isinstance(exc, sqlite3.OperationalError) and ("locked" in str(exc) or "busy" in str(exc))
                if not busy or attempt == _BUSY_RETRIES:
                    raise self._unusable(exc) from None
                time.sleep(min(0.05 * (attempt + 1), 0.5))
        raise AssertionError  # pragma: no cover - the loop returns or raises

    @property
    def now(self) -> float:
        """The index's clock."""
        return self._clock()

    def touched_recently(self, row: RefRow) -> bool:
        """Whether a ref's last use was recorded less than TOUCH_INTERVAL ago (then recording it again is skipped)."""
        return 0.0 <= self.now - row.last_used < TOUCH_INTERVAL

    @contextmanager
    def batch(self) -> Iterator[None]:
        """The writes this thread makes inside the block are committed together at its end, in one transaction.

        For what one step of a call records at once (a manifest's possession and grant, a tag's answer); reads inside
        the block do not see them yet. What was queued is committed when the block raises too, as it would have been
        write by write. A batch inside a batch is part of the outer one.
        """
        if getattr(self._batches, "pending", None) is not None:
            yield
            return
        pending: list[tuple[list[tuple[str, tuple[object, ...]]], str | None]] = []
        self._batches.pending = pending
        try:
            yield
        finally:
            self._batches.pending = None
            if pending:
                repositories = {repository for _, repository in pending}
                self._commit([item for items, _ in pending for item in items],
                             repository=repositories.pop() if len(repositories) == 1 else None)  # fmt: skip

    def _write(self, statements: Iterable[tuple[str, tuple[object, ...]]], *, repository: str | None) -> None:
        """One transaction (or a part of this thread's batch), see `_commit`."""
        items = list(statements)
        pending = getattr(self._batches, "pending", None)
        if pending is not None:
            pending.append((items, repository))
            return
        self._commit(items, repository=repository)

    def _commit(self, items: list[tuple[str, tuple[object, ...]]], *, repository: str | None) -> None:
        """One transaction, the memo's generation changed before it begins and after it ends (`cache/memo.py`).

        `repository`: the one whose answers the transaction changes; None when it may change any repository's.
        """
        if self._unwritable is not None:
            self._reopen()

        def run() -> None:
            db = self._connection()
            self._wrote = True
            self._memo.disable()  # from here on this run reads SQLite only
            self._bump(repository)
            try:
                db.execute("BEGIN IMMEDIATE")
                try:
                    for sql, params in items:
                        db.execute(sql, params)
                    db.execute("COMMIT")
                except BaseException:
                    if db.in_transaction:
                        db.execute("ROLLBACK")
                    raise
            finally:
                self._bump(repository)

        self._retry(run)

    def _rows(self, sql: str, params: tuple[object, ...] = ()) -> list[tuple[object, ...]]:
        return self._retry(lambda: self._connection().execute(sql, params).fetchall())

    def _asked(self, repository: str, key: str, width: int, query: Callable[[], _Rows]) -> _Rows:
        """The rows of a question a warm run asks: from the memo when it holds them, else from SQLite (and learned).

        A memo answer is used only when it is rows of the question's `width` (what SQLite would return).
        """
        with self._lock:
            found, value = self._memo.answer(repository, key)
        if found and isinstance(value, list) and all(isinstance(row, list) and len(row) == width for row in value):
            return [tuple(row) for row in value]
        rows = query()
        with self._lock:
            self._memo.learn(repository, key, [list(row) for row in rows])
        return rows

    # --- blobs and refs -------------------------------------------------------------------------------------

    def record_ref(self, ref: str, manifest: BlobRow, kind: str, blobs: Iterable[BlobRow]) -> None:
        """Record a ref whose manifest and blobs are all present, with the blobs it needs."""
        now = self.now
        rows = [manifest, *blobs]
        statements: list[tuple[str, tuple[object, ...]]] = [
            (_UPSERT_BLOB, (str(b.digest), b.size, b.media_type, now, now)) for b in rows
        ]
        statements += [
            (
                "INSERT OR IGNORE INTO edges(manifest_digest, blob_digest) VALUES (?,?)",
                (str(manifest.digest), str(b.digest)),
            )
            for b in rows
        ]
        statements.append(
            (_UPSERT_REF, (ref, str(manifest.digest), kind, manifest.media_type, manifest.size, now, now))
        )
        self._write(statements, repository=_repository(ref))

    def ref(self, ref: str) -> RefRow | None:
        """A cached ref, if recorded (and well-formed)."""
        rows = self._asked(
            _repository(ref), f"ref {ref}", 7, lambda: self._rows(f"{_REF_COLUMNS} WHERE ref = ?", (ref,))
        )
        return decoded("refs", ref, ref_row, rows[0]) if rows else None

    def refs(self) -> list[RefRow]:
        """Every well-formed cached ref, most recently used first."""
        rows = self._rows(f"{_REF_COLUMNS} ORDER BY last_used DESC, ref")
        return [r for row in rows if (r := decoded("refs", row[0], ref_row, row))]

    def layout_entries(self) -> list[LayoutEntry]:
        """What index.json lists: one descriptor per cached ref."""
        return [
            LayoutEntry(ref=r.ref, digest=r.manifest_digest, media_type=r.media_type, size=r.size) for r in self.refs()
        ]

    def blob(self, digest: Digest) -> BlobRow | None:
        """A recorded blob."""
        rows = self._rows("SELECT digest, size, media_type FROM blobs WHERE digest = ?", (str(digest),))
        return decoded("blobs", str(digest), blob_row, rows[0]) if rows else None

    def iter_blobs(self) -> Iterator[BlobRow]:
        """Every well-formed recorded blob."""
        for row in self._rows("SELECT digest, size, media_type FROM blobs ORDER BY digest"):
            blob = decoded("blobs", row[0], blob_row, row)
            if blob is not None:
                yield blob

    def edges(self, manifest_digest: Digest) -> list[Digest]:
        """The blobs a manifest needs (itself included)."""
        rows = self._rows("SELECT blob_digest FROM edges WHERE manifest_digest = ?", (str(manifest_digest),))
        return [d for r in rows if (d := decoded("edges", r[0], digest_value, r[0]))]

    def listing(self) -> list[tuple[RefRow, int, bool | None]]:
        """Every ref with the bytes of the blobs it needs and its verdict, in one query (fast for 10,000 refs)."""
        listed = []
        for row in self._rows(_LISTING):
            ref = decoded("refs", row[0], ref_row, row[:7])
            size = decoded("blobs", row[0], size_value, row[7])
            if ref is not None and size is not None:
                listed.append((ref, size, None if row[8] is None else row[8] == 1))
        return listed

    def graph(self) -> tuple[dict[str, set[str]], dict[str, int]]:
        """All edges (manifest digest → blob digests) and all blob sizes, for planning prunes in memory."""
        edges: dict[str, set[str]] = {}
        for manifest, blob in self._rows("SELECT manifest_digest, blob_digest FROM edges"):
            edges.setdefault(str(manifest), set()).add(str(blob))
        return edges, self._sizes()

    def _sizes(self) -> dict[str, int]:
        sizes: dict[str, int] = {}
        for row in self._rows("SELECT digest, size FROM blobs"):
            if (checked := decoded("blobs", row[0], _sized, row)) is not None:
                sizes[str(checked[0])] = checked[1]
        return sizes

    def unique_bytes(self) -> int:
        """Bytes of all recorded (well-formed) blobs, each counted once."""
        return sum(self._sizes().values())

    def remove_refs(self, refs: Iterable[str]) -> list[Digest]:
        """Drop refs (and their verdicts); return the blobs no remaining ref needs, whose rows are deleted too."""
        refs = list(refs)
        removals = [(sql, (r,)) for r in refs for sql in ("DELETE FROM refs WHERE ref = ?", _FORGET_SIGNATURES)]
        self._write(removals, repository=None)
        orphans = self._rows(
            "SELECT digest FROM blobs WHERE digest NOT IN ("
            " SELECT e.blob_digest FROM edges e JOIN refs r ON r.manifest_digest = e.manifest_digest)"
        )
        statements: list[tuple[str, tuple[object, ...]]] = []
        for (raw,) in orphans:
            statements.append(("DELETE FROM blobs WHERE digest = ?", (raw,)))
            statements.append(("DELETE FROM edges WHERE manifest_digest = ?", (raw,)))
            statements.append(("DELETE FROM grants WHERE manifest_digest = ?", (raw,)))
            statements.append(("DELETE FROM possession WHERE digest = ?", (raw,)))
        self._write(statements, repository=None)
        self._memo.forget({_repository(r) for r in refs})
        return [d for (raw,) in orphans if (d := decoded("blobs", raw, digest_value, raw))]

    def needed(self, digest: Digest) -> bool:
        """True if a ref or a repository's possession record needs the blob now (SQLite itself, never the memo)."""
        sql = "SELECT 1 FROM blobs WHERE digest = ? UNION ALL SELECT 1 FROM possession WHERE digest = ? LIMIT 1"
        return bool(self._rows(sql, (str(digest), str(digest))))

    def forget_blob(self, digest: Digest) -> list[str]:
        """A blob is gone: drop its row and every ref that needs it; return those refs."""
        rows = self._rows(
            "SELECT r.ref FROM refs r JOIN edges e ON e.manifest_digest = r.manifest_digest WHERE e.blob_digest = ?",
            (str(digest),),
        )
        refs = sorted({str(r[0]) for r in rows})
        statements: list[tuple[str, tuple[object, ...]]] = [("DELETE FROM refs WHERE ref = ?", (r,)) for r in refs]
        statements.append(("DELETE FROM blobs WHERE digest = ?", (str(digest),)))
        statements.append(("DELETE FROM possession WHERE digest = ?", (str(digest),)))
        self._write(statements, repository=None)
        self._memo.forget({_repository(r) for r in refs})
        return refs

    # --- verdicts, schemes, tags ----------------------------------------------------------------------------

    def verdict(self, bundle_ref: str) -> Verdict | None:
        """The last recorded relocation verdict for a fully qualified bundle ref (None if absent or malformed)."""
        sql = "SELECT relocated, method, missing_json, checked_at, locations_digest FROM verdicts WHERE bundle_ref = ?"
        rows = self._asked(_repository(bundle_ref), f"verdict {bundle_ref}", 5, lambda: self._rows(sql, (bundle_ref,)))
        return decoded("verdicts", bundle_ref, lambda row: verdict_row(bundle_ref, row), rows[0]) if rows else None

    def put_verdict(self, bundle_ref: str, *, relocated: bool, method: str, missing: Iterable[str]) -> None:
        """Record a verdict reached now; nothing is written when a positive one is recorded the same already.

        A positive verdict is trusted whatever its age, so rewriting it changes nothing; a negative one is rewritten,
        as its time starts the recheck period again.
        """
        missing = list(missing)
        known = self.verdict(bundle_ref)
        if (
            relocated
            and known is not None
            and (known.relocated, known.method, known.missing) == (relocated, method, tuple(missing))
        ):
            return
        params = (bundle_ref, int(relocated), method, None, json.dumps(missing), self.now)
        self._write([(_PUT_VERDICT, params)], repository=_repository(bundle_ref))

    def put_locations(self, bundle_ref: str, digest: Digest) -> None:
        """Record the digest of the locations image behind a bundle's verdict (its nested-bundle hints, offline)."""
        sql = "UPDATE verdicts SET locations_digest = ? WHERE bundle_ref = ?"
        self._write([(sql, (str(digest), bundle_ref))], repository=_repository(bundle_ref))

    def verdicts(self) -> dict[str, Verdict]:
        """Every recorded, well-formed verdict by bundle ref."""
        return {
            ref: v
            for ref in (str(r[0]) for r in self._rows("SELECT bundle_ref FROM verdicts"))
            if (v := self.verdict(ref))
        }

    def scheme_for(self, host: str) -> str | None:
        """The scheme that last worked for a host: `https` or `http`, anything else is ignored (and overwritten)."""
        sql = "SELECT scheme FROM schemes WHERE host = ?"
        rows = self._asked(host, f"scheme {host}", 1, lambda: self._rows(sql, (host,)))
        return decoded("schemes", host, scheme_value, rows[0][0]) if rows else None

    def remember_scheme(self, host: str, scheme: str) -> None:
        """Record the scheme that worked for a host (nothing is written when it is recorded already)."""
        if self.scheme_for(host) == scheme:
            return
        sql = "INSERT OR REPLACE INTO schemes(host, scheme, checked_at) VALUES (?,?,?)"
        self._write([(sql, (host, scheme, self.now))], repository=None)  # rare: once per host

    def grants(self, manifest_digest: Digest, repository: str) -> frozenset[str]:
        """The principals recorded as able to read a manifest in a repository (malformed rows are ignored)."""
        sql = "SELECT principal FROM grants WHERE manifest_digest = ? AND repository = ?"
        params = (str(manifest_digest), repository)
        rows = self._asked(repository, f"grants {manifest_digest}", 1, lambda: self._rows(sql, params))
        return frozenset(str(r[0]) for r in rows if is_principal(r[0]))

    def grant(self, manifest_digest: Digest, repository: str, principal: str) -> None:
        """Record that `principal` could read a manifest in a repository (nothing is written when it is recorded)."""
        if principal in self.grants(manifest_digest, repository):
            return  # a tag's warm run proves access with each HEAD: rewriting the row would end every run's memo
        sql = "INSERT OR REPLACE INTO grants(manifest_digest, repository, principal, granted_at) VALUES (?,?,?,?)"
        self._write([(sql, (str(manifest_digest), repository, principal, self.now))], repository=repository)

    def held(self, repository: str, digests: Iterable[Digest]) -> frozenset[Digest]:
        """Those of `digests` that were fetched from `repository` and verified (one query, or the memo's answers)."""
        wanted = {str(d): d for d in digests}
        with self._lock:
            answers = [self._memo.answer(repository, f"held {name}") for name in wanted]
        if all(found and isinstance(value, bool) for found, value in answers):
            return frozenset(d for d, (_, value) in zip(wanted.values(), answers, strict=True) if value)
        found = self._held(repository, list(wanted), wanted)
        with self._lock:
            for name, digest in wanted.items():
                self._memo.learn(repository, f"held {name}", digest in found)
        return found

    def _held(self, repository: str, names: list[str], wanted: dict[str, Digest]) -> frozenset[Digest]:
        found: set[Digest] = set()
        for start in range(0, len(names), _BATCH):  # SQLite before 3.32 takes at most 999 parameters
            batch = names[start : start + _BATCH]
            marks = ",".join("?" * len(batch))
            sql = f"SELECT digest FROM possession WHERE repository = ? AND digest IN ({marks})"  # noqa: S608 - marks
            found.update(wanted[str(r[0])] for r in self._rows(sql, (repository, *batch)) if str(r[0]) in wanted)
        return frozenset(found)

    def possess(self, repository: str, digests: Iterable[Digest]) -> None:
        """Record that `repository` served these digests' bytes and they verified (those not recorded yet)."""
        wanted = list(dict.fromkeys(digests))
        new = [d for d in wanted if d not in self.held(repository, wanted)] if wanted else []
        if not new:
            return
        now = self.now
        sql = "INSERT OR REPLACE INTO possession(repository, digest, fetched_at) VALUES (?,?,?)"
        self._write(((sql, (repository, str(d), now)) for d in new), repository=repository)

    def put_tag(self, ref: str, digest: Digest) -> None:
        """Record a tag's answer (used only by --stale-if-error, whose age limit is measured from it).

        The same answer recorded less than TAG_REFRESH ago is not written again.
        """
        known = self.tag(ref)
        if known is not None and known[0] == digest and 0.0 <= self.now - known[1] < TAG_REFRESH:
            return
        sql = "INSERT OR REPLACE INTO tags(ref, digest, resolved_at) VALUES (?,?,?)"
        self._write([(sql, (ref, str(digest), self.now))], repository=_repository(ref))

    def signature_verdict(self, ref: str, policy: str, root: str) -> str | None:
        """The signature verdict remembered for a digest ref under a policy digest and a trusted root's digest."""
        sql = "SELECT verdict FROM signatures WHERE ref = ? AND policy = ? AND root = ?"
        rows = self._asked(
            _repository(ref), f"signature {ref} {policy} {root}", 1, lambda: self._rows(sql, (ref, policy, root))
        )
        return str(rows[0][0]) if rows and isinstance(rows[0][0], str) else None

    def signature_verdicts(self) -> dict[str, str]:
        """The latest signature verdict remembered for each ref (for `cache ls`)."""
        rows = self._rows("SELECT ref, verdict FROM signatures ORDER BY checked_at")
        return {str(ref): str(verdict) for ref, verdict in rows}

    def put_signature_verdict(self, ref: str, policy: str, root: str, verdict: str) -> None:
        """Remember a signature verdict reached now."""
        sql = "INSERT OR REPLACE INTO signatures(ref, policy, root, verdict, checked_at) VALUES (?,?,?,?,?)"
        self._write([(sql, (ref, policy, root, verdict, self.now))], repository=_repository(ref))

    def tag(self, ref: str) -> tuple[Digest, float] | None:
        """The last recorded answer for a tag and when it was given."""
        sql = "SELECT digest, resolved_at FROM tags WHERE ref = ?"
        rows = self._asked(_repository(ref), f"tag {ref}", 2, lambda: self._rows(sql, (ref,)))
        return decoded("tags", ref, _tag_row, rows[0]) if rows else None


def _repository(ref: str) -> str:
    """The repository of a digest or tag ref (`host[:port]/path@sha256:…`, `…/path:tag`): the memo's shard."""
    if "@" in ref:
        return ref.rpartition("@")[0]
    head, slash, last = ref.rpartition("/")
    return f"{head}{slash}{last.partition(':')[0]}"


def _tag_row(row: tuple[object, ...]) -> tuple[Digest, float]:
    return digest_value(row[0]), time_value(row[1])


def _sized(row: tuple[object, ...]) -> tuple[Digest, int]:
    return digest_value(row[0]), size_value(row[1])


def _pending_commits(path: str) -> bool:
    """Whether a WAL or rollback journal holds what the main file lacks: beside `path` and beside the file it links to.

    SQLite keeps them beside the file a symlink names; a file read as immutable would be read without them.
    """
    for base in {path, os.path.realpath(path)}:
        for suffix in ("-wal", "-journal"):
            try:
                if os.path.getsize(base + suffix) > 0:
                    return True
            except FileNotFoundError:
                continue
    return False
