"""Owns: the cache's SQLite index — refs, blobs, edges, possession, grants, verdicts, schemes, tag answers, last use.

`possession` says which (registry/repository, digest) pairs were fetched from that repository and verified: the only
content a shared cache serves to a request naming that repository (`engine/content.py`). An index written before the
table existed has no rows in it, so its content is fetched again once per repository (the old index cannot tell bytes
fetched from a repository from bytes another repository's manifest was served from the cache).

The connection to the file (opening it, read-only when it cannot be written, its schema, busy waits, what a power
loss may roll back) is `cache/connection.py`'s.
"""

from __future__ import annotations

import json
import time
from contextlib import contextmanager
from threading import local

from ocivendir.cache.connection import IndexConnection, repair_hint
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
from ocivendir.cache.unwritable import unwritable
from ocivendir.errors import CacheError, CacheUnwritable, os_reason
from ocivendir.fs.paths import pure
from ocivendir.oci.reference import Digest

TYPE_CHECKING = False
if TYPE_CHECKING:
    import os
    from collections.abc import Callable, Iterable, Iterator

    _Rows = list[tuple[object, ...]]

__all__ = ["BlobRow", "CacheIndex", "RefRow", "Verdict"]

# a ref's last_used is written again only once it is this old: a warm run (kapp-controller syncs every App every
# 30 s or more) writes nothing, and least-recently-used order keeps a ten-minute grain
TOUCH_INTERVAL = 600.0
# a tag's answer is written again only when it changed or is this old: a warm tag run writes nothing, and
# --stale-if-error's age of an unchanged answer is at most this much more than the time of its last HEAD
TAG_REFRESH = 60.0
_BATCH = 500
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


class CacheIndex:
    """The index's rows, read through the read memo when it can answer and else through SQLite (`cache/connection.py`).

    Every value read back is decoded by `cache/rows.py`; a row that does not decode counts as absent.
    """

    def __init__(self, path: str | os.PathLike[str], clock: Callable[[], float] = time.time) -> None:
        """Open (and create or migrate) the index; an unusable file is a CacheError naming it and the repair.

        While the read memo (`cache/memo.py`) can be trusted, SQLite is opened only when the memo cannot answer.
        """
        self.path = path = pure(path)
        self._clock = clock
        self._sql = IndexConnection(path, fresh=lambda: self._bump(None))
        self._lock = self._sql.lock  # the memo's answers are read and learned under the connection's lock
        self._batches = local()  # this thread's batch of writes (`batch`)
        self._wrote = False
        self._root = self._sql.root
        self._memo = Memo(path)
        if state(path) is None:  # no memo to read: open now (an unusable index fails here, as it always did)
            if not generation(self._root):
                try:  # an index without a generation (from before the memo, or a torn token) starts one
                    self._bump(None)
                except CacheUnwritable:  # unless it cannot be written: then the memo is not used
                    pass
            self._sql.connection()

    def _bump(self, repository: str | None) -> None:
        """A new generation for a repository's memo answers (None: every repository's); see `cache/memo.py`."""
        try:
            bump(self._root, repository)
        except OSError as exc:
            raise unwritable(exc, "Cannot write cache index", self._root) or CacheError(
                f"Cannot write cache index '{self.path}': {os_reason(exc)}", hint=repair_hint(self.path)
            ) from None

    def close(self) -> None:
        """Leave the connection to `cache/opened.py`, then keep what this run read from SQLite in the memo."""
        with self._lock:
            self._sql.close()
            self._memo.save(wrote=self._wrote)

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

        def begin() -> None:
            self._wrote = True
            self._memo.disable()  # from here on this run reads SQLite only
            self._bump(repository)

        self._sql.commit(items, begin=begin, end=lambda: self._bump(repository))

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
            _repository(ref), f"ref {ref}", 7, lambda: self._sql.rows(f"{_REF_COLUMNS} WHERE ref = ?", (ref,))
        )
        return decoded("refs", ref, ref_row, rows[0]) if rows else None

    def refs(self) -> list[RefRow]:
        """Every well-formed cached ref, most recently used first."""
        rows = self._sql.rows(f"{_REF_COLUMNS} ORDER BY last_used DESC, ref")
        return [r for row in rows if (r := decoded("refs", row[0], ref_row, row))]

    def layout_entries(self) -> list[LayoutEntry]:
        """What index.json lists: one descriptor per cached ref."""
        return [
            LayoutEntry(ref=r.ref, digest=r.manifest_digest, media_type=r.media_type, size=r.size) for r in self.refs()
        ]

    def blob(self, digest: Digest) -> BlobRow | None:
        """A recorded blob."""
        rows = self._sql.rows("SELECT digest, size, media_type FROM blobs WHERE digest = ?", (str(digest),))
        return decoded("blobs", str(digest), blob_row, rows[0]) if rows else None

    def iter_blobs(self) -> Iterator[BlobRow]:
        """Every well-formed recorded blob."""
        for row in self._sql.rows("SELECT digest, size, media_type FROM blobs ORDER BY digest"):
            blob = decoded("blobs", row[0], blob_row, row)
            if blob is not None:
                yield blob

    def edges(self, manifest_digest: Digest) -> list[Digest]:
        """The blobs a manifest needs (itself included)."""
        rows = self._sql.rows("SELECT blob_digest FROM edges WHERE manifest_digest = ?", (str(manifest_digest),))
        return [d for r in rows if (d := decoded("edges", r[0], digest_value, r[0]))]

    def listing(self) -> list[tuple[RefRow, int, bool | None]]:
        """Every ref with the bytes of the blobs it needs and its verdict, in one query (fast for 10,000 refs)."""
        listed = []
        for row in self._sql.rows(_LISTING):
            ref = decoded("refs", row[0], ref_row, row[:7])
            size = decoded("blobs", row[0], size_value, row[7])
            if ref is not None and size is not None:
                listed.append((ref, size, None if row[8] is None else row[8] == 1))
        return listed

    def graph(self) -> tuple[dict[str, set[str]], dict[str, int]]:
        """All edges (manifest digest → blob digests) and all blob sizes, for planning prunes in memory."""
        edges: dict[str, set[str]] = {}
        for manifest, blob in self._sql.rows("SELECT manifest_digest, blob_digest FROM edges"):
            edges.setdefault(str(manifest), set()).add(str(blob))
        return edges, self._sizes()

    def _sizes(self) -> dict[str, int]:
        sizes: dict[str, int] = {}
        for row in self._sql.rows("SELECT digest, size FROM blobs"):
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
        orphans = self._sql.rows(
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
        return bool(self._sql.rows(sql, (str(digest), str(digest))))

    def forget_blob(self, digest: Digest) -> list[str]:
        """A blob is gone: drop its row and every ref that needs it; return those refs."""
        rows = self._sql.rows(
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
        rows = self._asked(
            _repository(bundle_ref), f"verdict {bundle_ref}", 5, lambda: self._sql.rows(sql, (bundle_ref,))
        )
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
            for ref in (str(r[0]) for r in self._sql.rows("SELECT bundle_ref FROM verdicts"))
            if (v := self.verdict(ref))
        }

    def scheme_for(self, host: str) -> str | None:
        """The scheme that last worked for a host: `https` or `http`, anything else is ignored (and overwritten)."""
        sql = "SELECT scheme FROM schemes WHERE host = ?"
        rows = self._asked(host, f"scheme {host}", 1, lambda: self._sql.rows(sql, (host,)))
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
        rows = self._asked(repository, f"grants {manifest_digest}", 1, lambda: self._sql.rows(sql, params))
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
            found.update(wanted[str(r[0])] for r in self._sql.rows(sql, (repository, *batch)) if str(r[0]) in wanted)
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
            _repository(ref), f"signature {ref} {policy} {root}", 1, lambda: self._sql.rows(sql, (ref, policy, root))
        )
        return str(rows[0][0]) if rows and isinstance(rows[0][0], str) else None

    def signature_verdicts(self) -> dict[str, str]:
        """The latest signature verdict remembered for each ref (for `cache ls`)."""
        rows = self._sql.rows("SELECT ref, verdict FROM signatures ORDER BY checked_at")
        return {str(ref): str(verdict) for ref, verdict in rows}

    def put_signature_verdict(self, ref: str, policy: str, root: str, verdict: str) -> None:
        """Remember a signature verdict reached now."""
        sql = "INSERT OR REPLACE INTO signatures(ref, policy, root, verdict, checked_at) VALUES (?,?,?,?,?)"
        self._write([(sql, (ref, policy, root, verdict, self.now))], repository=_repository(ref))

    def tag(self, ref: str) -> tuple[Digest, float] | None:
        """The last recorded answer for a tag and when it was given."""
        sql = "SELECT digest, resolved_at FROM tags WHERE ref = ?"
        rows = self._asked(_repository(ref), f"tag {ref}", 2, lambda: self._sql.rows(sql, (ref,)))
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
