"""Owns: the server's log file (`OCIVENDIR_SERVER_LOG`) — where a daemon, whose stdio is /dev/null, says what it did.

Each record is appended whole (one `write` on an O_APPEND descriptor: the parent's and every worker's lines never
interleave) and the file is opened for that record only, so the server holds no descriptor of it between records
and a log rotated or removed by hand is simply made again. The file is made 0600 and never followed through a
symbolic link (O_NOFOLLOW), never waited on (O_NONBLOCK: a FIFO there is refused), and written only when it is a
regular file of this user: a log path in a shared directory cannot be turned into a write elsewhere, a hang, or lines
handed to another user who made the file first. A record that cannot be written (a full disk, a directory gone, a
full log that cannot be rotated) is dropped: the log never fails a call. A busy server logs a few
lines a call at debug level, so the log is bounded: once it holds `MAX_LOG_BYTES` it is renamed `<path>.1` (replacing
the one before) and a new one begun.

Not `logging.handlers.RotatingFileHandler`: it keeps its file open (a descriptor in the parent and, inherited, in
every worker), follows a symbolic link, and rotates from each process on its own (the logging documentation: one file
written by several processes is not supported), so two writers that found the log full at once would each rename it.

With a log, the server also records each connection's path through it at debug level (taken, asked, answered,
refused), with the pid of the process that says it, and a Python client that runs a call in-process notes why: what a
user needs to tell a server that hangs from a client that never reached it.
"""

from __future__ import annotations

import logging
import os
import stat
import time

__all__ = ["MAX_LOG_BYTES", "ROTATE_WAIT", "AppendHandler", "append"]

_FLAGS = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
_CONTROLS = dict.fromkeys((*range(0x20), 0x7F), " ")  # str.translate: every control character a space
_MAX_RECORD = 1 << 16  # a record is cut there: one write, whatever a reason or a path holds
MAX_LOG_BYTES = 8 << 20  # a log this size is renamed `<path>.1` and a new one begun: at most twice this on disk
ROTATE_WAIT = 0.05  # seconds a writer that found the log full waits for another writer's rotation


class AppendHandler(logging.Handler):
    """Append each record to `path`, one line, stamped with the wall time and the pid that wrote it."""

    def __init__(self, path: str) -> None:
        """A handler for the log at `path` (made on the first record)."""
        super().__init__(logging.DEBUG)
        self.path = path

    def emit(self, record: logging.LogRecord) -> None:
        """Write one line; a failure drops it."""
        try:
            message = f"{record.levelname.lower()}: {record.getMessage()}"
        except (ValueError, TypeError):
            return
        append(self.path, message, record.created)


def append(path: str, message: str, created: float | None = None) -> None:
    """Append `message` to the log at `path` as one line (wall time, pid); a failure, or a relative path, drops it.

    Control characters (a reason may hold a caller's path) become spaces: one record is one line, and nothing in it
    moves a terminal's cursor when the log is read.
    """
    if not os.path.isabs(path):
        return
    created = time.time() if created is None else created
    stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(created))
    line = f"{stamp}.{int(created * 1000) % 1000:03d}Z {os.getpid()} {message}".translate(_CONTROLS)
    data = (line[:_MAX_RECORD] + "\n").encode(errors="replace")
    fd = _open(path)
    if fd < 0:
        return
    try:
        if os.fstat(fd).st_size >= MAX_LOG_BYTES:
            full, fd = fd, -1  # `_rotate` closes it, whatever happens: never closed twice here
            fd = _rotate(path, full)
            if fd < 0 or os.fstat(fd).st_size >= MAX_LOG_BYTES:
                return  # not rotated (`<path>.1` cannot be made): the log stays bounded, the record is dropped
        os.write(fd, data)
    except OSError:
        pass
    finally:
        if fd >= 0:
            os.close(fd)


def _open(path: str) -> int:
    """The log opened for appending, or -1 unless it is a regular file of this user.

    Never blocks (a FIFO planted there is refused, not waited on) and never follows a link; a file another user
    made at the path first is not written to.
    """
    try:
        fd = os.open(path, _FLAGS, 0o600)
    except OSError:
        return -1
    try:
        info = os.fstat(fd)
    except OSError:
        info = None
    if info is None or not stat.S_ISREG(info.st_mode) or info.st_uid != os.geteuid():
        os.close(fd)
        return -1
    return fd


def _rotate(path: str, fd: int) -> int:
    """The full log open on `fd` becomes `<path>.1` (an older one goes); a descriptor of the log at `path` now.

    Under an exclusive lock of the full file, and only while it is still the one at `path`: of the processes that
    found it full at once, one renames it and the others find a new file there and write to it (a second rename
    would put the new, nearly empty log over the full one). The lock is only tried: a process holding it is
    rotating, which takes microseconds: it is tried for at most ROTATE_WAIT seconds, and a lock held longer (by
    anyone who can read the file) leaves the log as it is. `fd` is closed, whatever happens.
    """
    from ocivendir.fs.locks import LockBusy, lock_open_file  # noqa: PLC0415 - only once a log is full

    try:
        lock_open_file(fd, timeout=ROTATE_WAIT)
        held, now = os.fstat(fd), os.stat(path, follow_symlinks=False)
        if (held.st_dev, held.st_ino) == (now.st_dev, now.st_ino) and held.st_size >= MAX_LOG_BYTES:
            os.replace(path, f"{path}.1")
    except (OSError, LockBusy):
        pass
    finally:
        os.close(fd)  # the lock goes with it
    return _open(path)
