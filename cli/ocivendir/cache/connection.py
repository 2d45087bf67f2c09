"""Owns: the connection to `index.db` — opening it (read-only if it cannot be written), schema, busy waits, errors.

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

A connection this process left open on an earlier call is taken back (`cache/opened.py`) only while the file is the
one it was left on; a replaced or removed index is opened anew. The rows themselves are `cache/index.py`'s.
"""

from __future__ import annotations

import errno
import os
import time
from threading import RLock

from ocivendir.cache import opened
from ocivendir.cache.unwritable import low_on_space, mounted_read_only, unwritable
from ocivendir.errors import CacheError, CacheUnwritable, os_reason
from ocivendir.fs.paths import split

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from types import ModuleType
    from typing import Any, TypeVar

    _T = TypeVar("_T")

__all__ = ["SCHEMA_VERSION", "IndexConnection", "repair_hint"]

# 2: the file carries it as `PRAGMA user_version` too, so that opening a current index skips the schema script
SCHEMA_VERSION = 3
_BUSY_RETRIES = 20
_SQLITE_FULL, _SQLITE_IOERR = 13, 10  # primary result codes: no space, and an I/O error (a -shm it cannot extend)
_REFUSED = frozenset({8, 10, 14})  # SQLITE_READONLY, SQLITE_IOERR, SQLITE_CANTOPEN: what a read-only mount gives
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


def repair_hint(path: str | os.PathLike[str]) -> str:
    """How to repair an unusable index: rebuild it from the blobs, which are the truth."""
    return (
        f"run 'ocivendir cache verify --repair --cache-dir {split(path)[0]}' to rebuild it from the cached blobs, "
        "or remove the cache directory"
    )


class IndexConnection:
    """One connection to `index.db`, shared by the run's threads under `lock`; busy waits never reach users.

    SQLite is imported and the file opened on first use (`connection`), not before: a warm run answered by the read
    memo never opens it.
    """

    def __init__(self, path: str, *, fresh: Callable[[], None]) -> None:
        """The connection to the index at `path` (a pure path), not opened yet; one that is not a file is a CacheError.

        `fresh` is called before a new index's schema is written, or an old one's migrated (no memo answer holds then).
        """
        if os.path.exists(path) and not os.path.isfile(path):
            raise CacheError(f"Cannot use cache index '{path}': it is not a regular file", hint=repair_hint(path))
        self.path = path
        self.root = split(path)[0]
        self.lock = RLock()
        self._fresh = fresh
        self._sqlite3: ModuleType | None = None
        self._db: Any = None  # the sqlite3 Connection, once opened
        self._unwritable: CacheUnwritable | None = None  # why the index was opened read-only

    @property
    def connected(self) -> bool:
        """Whether SQLite has been opened (and not closed since)."""
        return self._db is not None

    def connection(self) -> Any:  # noqa: ANN401 - a sqlite3.Connection (self._db stays Any: it is None until opened)
        """The SQLite connection, opened (and the schema created or migrated) on first use."""
        with self.lock:
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
        assert sqlite3 is not None  # noqa: S101 - imported by connection
        try:
            self._db = sqlite3.connect(target, timeout=5.0, check_same_thread=False, isolation_level=None, uri=uri)
        except sqlite3.DatabaseError as exc:
            raise self._unusable(exc) from None
        try:
            self.retry(self._prepare)
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

        assert self._unwritable is not None  # noqa: S101 - set by connection
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
        if mounted_read_only(self.root):
            raise self._unwritable
        with self.lock:
            if self._db is not None:
                self._db.close()
                self._db = None
            self._unwritable = None
            self.connection()
        if self._unwritable is not None:
            raise self._unwritable

    def _unusable(self, exc: Exception) -> CacheError:
        reason = os_reason(exc) if isinstance(exc, OSError) else str(exc)
        code = getattr(exc, "sqlite_errorcode", 0) & 0xFF
        if code == _SQLITE_FULL or (code == _SQLITE_IOERR and low_on_space(self.root)):
            full = OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), self.path)
            return unwritable(full, "Cannot write cache index", self.root) or CacheError(reason)
        refused = "readonly" in reason.replace(" ", "") or "unable to open" in reason
        if (refused or code in _REFUSED) and mounted_read_only(self.root):
            read_only = OSError(errno.EROFS, os.strerror(errno.EROFS), self.path)
            return unwritable(read_only, "Cannot write cache index", self.root) or CacheError(reason)
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
        if self._db.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION:  # self._db: set by _open
            return
        self._fresh()  # a new or migrated index: no memo answer read before holds
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
        """Leave the connection to `cache/opened.py`, open for this process's next call on the same file.

        Not one opened read-only or immutable because the cache could not be written then: a later call, the cache
        writable again (remounted, space freed), would be handed a connection that cannot write, or one that reads a
        changed file as if it never changed. It is closed, and the next call opens the file as it finds it.
        """
        with self.lock:
            if self._db is not None:
                if self._unwritable is None:
                    opened.keep(self.path, self._db)
                else:
                    self._db.close()
                self._db = None

    def retry(self, action: Callable[[], _T]) -> _T:
        """Run an action, waiting out busy locks; any other database error is a CacheError naming the file."""
        for attempt in range(_BUSY_RETRIES + 1):
            try:
                with self.lock:
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

    def rows(self, sql: str, params: tuple[object, ...] = ()) -> list[tuple[object, ...]]:
        """The rows a query returns."""
        return self.retry(lambda: self.connection().execute(sql, params).fetchall())

    def commit(
        self, items: list[tuple[str, tuple[object, ...]]], *, begin: Callable[[], None], end: Callable[[], None]
    ) -> None:
        """The statements in one transaction, reopening an index opened read-only for it first.

        `begin` runs once connected, before the transaction; `end` after it, whether it committed or not.
        """
        if self._unwritable is not None:
            self._reopen()

        def run() -> None:
            db = self.connection()
            begin()
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
                end()

        self.retry(run)


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
