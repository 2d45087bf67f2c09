"""Owns: advisory file locks on `fcntl.flock`; nothing else in ocivendir touches fcntl.

A lock file that cannot be opened for writing (a read-only mount, a full filesystem, a shared cache this user may not
write) is locked through a read-only descriptor: flock does not care how the file was opened. On a read-only
filesystem a lock file that is not there cannot be made, and is not needed: nothing can change what it guards.
"""

from __future__ import annotations

import errno
import fcntl
import hashlib
import os
import stat
import time
from contextlib import contextmanager

from ocivendir.fs.paths import pure, split
from ocivendir.fs.remove import remove_file

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterator

__all__ = [
    "LockBusy",
    "file_lock",
    "hold_lock",
    "is_held",
    "lock_open_file",
    "release_removed",
    "removable_lock",
    "take_existing",
    "target_lock",
]

_POLL_SECONDS = 0.02
_RETAKES = 8  # a held lock file found removed each time is taken again at most so often (each removal needs a holder)
_FLAGS = os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC


_UNWRITABLE = frozenset({errno.EROFS, errno.EACCES, errno.EPERM, errno.ENOSPC, errno.EDQUOT})
_NOTHING = -1  # no lock file, and none needed (a read-only filesystem)


def _open(path: str, *, make_directory: bool = False) -> int:
    """Open (or create) a lock file; a symlink planted in its place is removed, never followed.

    With `make_directory`, a missing directory is made first (only then: a lock's directory is there on every call
    but the first). One that cannot be written is opened read-only; `_NOTHING` when it is absent from a read-only
    filesystem.
    """
    try:
        return os.open(path, _FLAGS, 0o600)
    except FileNotFoundError:
        if not make_directory:
            raise
        os.makedirs(split(path)[0], exist_ok=True)
        return _open(path)
    except OSError as exc:
        if exc.errno in _UNWRITABLE:
            return _open_read_only(path, exc)
        if exc.errno != errno.ELOOP:
            raise
    remove_file(path)
    return os.open(path, _FLAGS, 0o600)


def _open_read_only(path: str, refused: OSError) -> int:
    try:
        return os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except FileNotFoundError:
        if refused.errno == errno.EROFS:
            return _NOTHING
    except OSError:
        pass
    raise refused


class LockBusy(Exception):
    """The lock is held elsewhere and the timeout passed."""


@contextmanager
def file_lock(path: str | os.PathLike[str], *, shared: bool = False, timeout: float | None = None) -> Iterator[None]:
    """Hold a shared or exclusive flock on `path` (created if absent).

    `timeout=None` waits as long as it takes; `0` tries once; otherwise it polls until the timeout and raises
    LockBusy.
    """
    path = os.fspath(path)
    fd = _open(path, make_directory=True)
    if fd == _NOTHING:
        yield
        return
    try:
        _flock(fd, fcntl.LOCK_SH if shared else fcntl.LOCK_EX, timeout, path)
        yield
    finally:
        os.close(fd)  # closing the descriptor releases the lock


def _flock(fd: int, kind: int, timeout: float | None, name: str) -> None:
    """Take `kind` on `fd`: waited for (`timeout=None`), or polled until `timeout` passes (LockBusy naming `name`)."""
    if timeout is None:
        fcntl.flock(fd, kind)
        return
    deadline = time.monotonic() + timeout
    while True:
        try:
            fcntl.flock(fd, kind | fcntl.LOCK_NB)
        except BlockingIOError:
            if time.monotonic() >= deadline:
                raise LockBusy(name) from None
            time.sleep(min(_POLL_SECONDS, timeout))
        else:
            return


def hold_lock(path: str) -> int:
    """An exclusive flock on `path` taken at once, as a descriptor the caller closes to release it; else LockBusy.

    For a lock held for a process's life (the resident server's): a forked child must close the descriptor, or the
    lock lives on in it. A lock file may be removed by whoever holds it (a server sweeping another build's,
    `server/sweep.py`), so the lock counts only once the locked file is still the one at `path`, as
    `removable_lock` checks; otherwise it is taken again, on the file there now.
    """
    for _ in range(_RETAKES):
        fd = _open(path)
        if fd == _NOTHING:
            raise OSError(errno.EROFS, os.strerror(errno.EROFS), path)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise LockBusy(path) from None
        if _still_at(fd, path):
            return fd
        os.close(fd)
    raise LockBusy(path)


def take_existing(path: str) -> int | None:
    """An exclusive flock taken at once on the lock file already at `path`, as a descriptor; None when there is none.

    Nothing is made. LockBusy when another process holds it, when what is there is not a regular file this process
    can open (a link is not followed), or when the file locked is no longer the one at `path` (another process removed
    it meanwhile: the lock excludes no one).
    """
    try:
        fd = os.open(path, os.O_RDWR | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    except OSError:
        raise LockBusy(path) from None
    try:
        regular = stat.S_ISREG(os.fstat(fd).st_mode)
        if regular:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            regular = _still_at(fd, path)
    except OSError:  # held elsewhere (EWOULDBLOCK), or a lock the filesystem cannot take
        regular = False
    if not regular:
        os.close(fd)
        raise LockBusy(path)
    return fd


def release_removed(fd: int, path: str) -> bool:
    """Remove the lock file at `path` if it is still the one held as `fd`, then let the lock go; whether it went."""
    try:
        if _still_at(fd, path):
            remove_file(path)
            return True
    except OSError:
        pass
    finally:
        os.close(fd)
    return False


def _still_at(fd: int, path: str) -> bool:
    """Whether the file open as `fd` is the one at `path` now (same device and inode; a removed one is not)."""
    held = os.fstat(fd)
    try:
        current = os.lstat(path)
    except FileNotFoundError:
        return False
    return (current.st_dev, current.st_ino) == (held.st_dev, held.st_ino)


def lock_open_file(fd: int, *, timeout: float | None = None) -> None:
    """An exclusive flock on a file already open as `fd`, as `file_lock` takes one (LockBusy after `timeout`).

    It goes when the descriptor is closed.
    """
    _flock(fd, fcntl.LOCK_EX, timeout, f"descriptor {fd}")


def is_held(path: str) -> bool:
    """Whether a process holds an exclusive lock on `path` now (a shared one is asked for and let go at once).

    Opened without blocking: a FIFO found at `path` is never waited on for a writer.
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return False  # no lock file (or none that may be one): nobody holds it
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    except OSError:
        return False
    finally:
        os.close(fd)  # the shared lock goes with it
    return False


@contextmanager
def removable_lock(path: str | os.PathLike[str]) -> Iterator[None]:
    """Hold an exclusive flock on `path` and remove the file on release, so one-off lock names do not pile up.

    Unlinking a lock file races with a waiter that opened it before the unlink and locks it after: that waiter holds a
    lock on a file no longer at `path`, while a newcomer creates and locks a new one. So the lock counts only once the
    locked file is still the one at `path` (same device and inode); otherwise it is let go and taken again.
    """
    path = os.fspath(path)
    while True:
        fd = _open(path, make_directory=True)
        if fd == _NOTHING:
            yield
            return
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            if not _still_at(fd, path):
                continue
            try:
                yield
            finally:
                remove_file(path)  # still locked: a waiter will see it gone and retry
            return
        finally:
            os.close(fd)


@contextmanager
def target_lock(lock_dir: str | os.PathLike[str], target: str | os.PathLike[str]) -> Iterator[None]:
    """The exclusive lock of one output directory, `target-<sha256 of its path>` in `lock_dir`, removed on release.

    kapp-controller syncs into a fresh directory on every reconcile, so a lock file kept per target would grow the
    cache by one file per reconcile.
    """
    name = f"target-{hashlib.sha256(pure(target).encode()).hexdigest()}"  # as `str(Path(target))` spells it
    with removable_lock(os.path.join(lock_dir, name)):
        yield
