"""Owns: telling a cache that cannot be written now from a broken one, and the error that says which and what to do.

A cache cannot be written when its filesystem is mounted read-only, is full (or over quota), or does not let this user
write. That is no damage: a warm call needs no write, so the index opens read-only (`cache/connection.py`), locks are
taken on descriptors opened read-only (`fs/locks.py`) and the writes that only keep books (a ref's last use, the read
memo) are skipped. A call that must write (new content, a prune, a repair) fails with `CacheUnwritable`, naming the path
and the filesystem, and never with the advice to rebuild or remove the index: that would destroy verdicts and grants for
nothing.
"""

from __future__ import annotations

import errno
import os

from ocivendir import diag
from ocivendir.errors import CacheUnwritable, os_reason

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = ["NO_SPACE", "READ_ONLY", "best_effort", "low_on_space", "mounted_read_only", "unwritable"]

NO_SPACE = frozenset({errno.ENOSPC, errno.EDQUOT})
READ_ONLY = frozenset({errno.EROFS, errno.EACCES, errno.EPERM})
_log = diag.logger("ocivendir.cache")
_LOW = 1 << 20  # SQLite reports a shared-memory or WAL file it cannot extend as an I/O error, not as ENOSPC


def low_on_space(path: str) -> bool:
    """Whether the filesystem holding `path` has (almost) no space left for this user."""
    try:
        info = os.statvfs(path)
    except OSError:
        return False
    return info.f_bavail * info.f_frsize < _LOW or (info.f_files > 0 and info.f_favail == 0)


def mounted_read_only(path: str) -> bool:
    """Whether the filesystem holding `path` is mounted read-only."""
    try:
        return bool(os.statvfs(path).f_flag & os.ST_RDONLY)
    except OSError:
        return False


def unwritable(exc: OSError, what: str, root: str) -> CacheUnwritable | None:
    """The error for an OSError that means the cache at `root` cannot be written now; None for any other.

    `what` says what was being written (`Cannot write cache index '…'`); the reason names the path and, for a full
    filesystem, where it is mounted.
    """
    if exc.errno in NO_SPACE:
        hint = (
            f"free space on that filesystem: 'ocivendir cache prune --max-size SIZE --cache-dir {root}' removes "
            "partial downloads, then the least recently used entries"
        )
    elif exc.errno in READ_ONLY:
        hint = f"make '{root}' writable by this user; read-only, it serves only the content already cached"
    else:
        return None
    return CacheUnwritable(f"{what}: {os_reason(exc)}", hint=hint)


def best_effort(write: Callable[[], None], what: str) -> None:
    """A write that only keeps books (a tag's answer, a verdict, a grant): skipped when the cache cannot be written.

    What it records is learned again by a later call; the content this call serves does not depend on it.
    """
    try:
        write()
    except CacheUnwritable as exc:
        _log.debug("not recording %s: %s", what, exc)
