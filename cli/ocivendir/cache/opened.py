"""Owns: the index connections a process keeps open between calls — one per cache directory, checked on every use.

A reused worker of the resident server serves call after call; opening SQLite for each would cost the connection's
set-up, the schema stamp's read and the WAL's `-shm` mapping every time. So `IndexConnection.close` leaves its
connection here (`cache/connection.py`), keyed by the index file's path, and the next one on that path takes it back
only while the file and its directory are the ones it was left on: the file's (st_dev, st_ino) — a cache removed,
replaced or rebuilt by `cache verify --repair` is a new file —, its size and mtime (a file written over in place), its
mode and the directory's owner and mode (a cache made read-only by chmod is opened anew, read-only: a connection opened
for writing before must not write to it). Anything else closes it, and the caller opens the file anew. At most KEPT
connections stay open, the least recently used closed first (kapp-controller gives every App a cache of its own).

A connection is kept only from the second close of an index on its path in this process: a process that makes one
call (the CLI, a worker forked per call) closes its connection as it always did, so a file another process rewrites
in place — same inode, and within the file system's timestamp grain the same size and mtime — is read afresh by the
next process. What a process serving calls keeps open reads such a file through SQLite's page cache; rows are data,
decoded and checked on every read, and the blobs are verified before use, so it is served nothing unchecked.

A connection taken is no longer kept, so it is never used by two `CacheIndex` objects at once: a second one opened on
the same path while the first is in use opens its own, and whichever is kept last stays.
"""

from __future__ import annotations

import os
from collections import OrderedDict
from stat import S_ISREG
from threading import RLock

from ocivendir.fs.fileid import device_inode

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

__all__ = ["KEPT", "close_all", "discard", "keep", "kept_files", "take"]

KEPT = 8
_SEEN = 256
_LOCK = RLock()  # per-process: guards _kept (threads of one call may open and close indexes)
_Identity = tuple[int, int, int, int, int, int, int]
# used again only while the file's identity (st_dev, st_ino, size, mtime, mode, directory owner and mode) is unchanged
_kept: OrderedDict[str, tuple[_Identity, Any]] = OrderedDict()  # per-process: keyed by the index file's path
_closed: OrderedDict[str, None] = OrderedDict()  # per-process: keyed by index path; paths closed before (at most _SEEN)


def _identity(path: str) -> _Identity | None:
    """(st_dev, st_ino, size, mtime, mode) of the index file, its directory's owner and mode; None unless a file."""
    try:
        info = os.stat(path)
        directory = os.stat(os.path.dirname(path) or ".")
    except OSError:
        return None
    if not S_ISREG(info.st_mode):
        return None
    return (info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns, info.st_mode, directory.st_uid,
            directory.st_mode)  # fmt: skip


def _close(db: Any) -> None:  # noqa: ANN401 - a sqlite3.Connection
    try:
        db.close()
    except Exception:  # noqa: BLE001, S110 - closing a connection to a file gone or damaged: nothing left to do
        pass


def take(path: str) -> Any:  # noqa: ANN401 - a sqlite3.Connection, or None
    """The connection kept for `path` when the file is still the one it was kept on (out of any transaction)."""
    with _LOCK:
        kept = _kept.pop(path, None)
        if kept is None:
            return None
        identity, db = kept
        if _identity(path) != identity:
            _close(db)
            return None
        try:
            if db.in_transaction:  # a call that ended inside one (it is rolled back on every error path)
                db.execute("ROLLBACK")
        except Exception:  # noqa: BLE001 - unusable: the caller opens the file anew
            _close(db)
            return None
        return db


def keep(path: str, db: Any) -> None:  # noqa: ANN401 - a sqlite3.Connection
    """Keep `db` open for the next call on `path`; closed at once on its path's first close, or when unidentified."""
    with _LOCK:
        first = path not in _closed
        _closed[path] = None
        _closed.move_to_end(path)
        while len(_closed) > _SEEN:
            _closed.popitem(last=False)
        identity = None if first else _identity(path)
        old = _kept.pop(path, None)
        if old is not None and old[1] is not db:
            _close(old[1])
        if identity is None:
            _close(db)
            return
        _kept[path] = (identity, db)
        while len(_kept) > KEPT:
            _close(_kept.popitem(last=False)[1][1])


def discard(path: str) -> None:
    """Close the connection kept for `path`, if any (its files are about to be removed)."""
    with _LOCK:
        kept = _kept.pop(path, None)
        if kept is not None:
            _close(kept[1])


def kept_files() -> frozenset[str]:
    """The files the kept connections hold open (each index, its WAL and shared memory), as `device:inode`.

    A reused worker keeps these between calls on purpose: its check for descriptors a call left behind skips them.
    """
    with _LOCK:
        paths = list(_kept)
    found = set()
    for path in paths:
        for suffix in ("", "-wal", "-shm", "-journal"):
            try:
                info = os.stat(f"{path}{suffix}")
            except OSError:
                continue
            found.add(device_inode(info))
    return frozenset(found)


def close_all() -> None:
    """Close every kept connection."""
    with _LOCK:
        while _kept:
            _close(_kept.popitem()[1][1])
