"""Owns: small whole files read and rewritten through bare descriptors.

Python's `open()` wraps a descriptor in a file object: an fstat, an ioctl (is it a terminal?) and two lseeks for
each file, and a buffer; a warm sync reads and rewrites a few small files per call. These read and write through the
descriptor itself, with the same results: every byte, whatever the file's size when it was opened.
"""

from __future__ import annotations

import os

__all__ = ["read_all", "read_file", "rewrite_file"]

_CHUNK = 1 << 20


def read_all(fd: int, length: int) -> bytes:
    """Every byte left in `fd`, `length` long when it was opened (a file grown meanwhile is read on to its end)."""
    chunks: list[bytes] = []
    while chunk := os.read(fd, max(length, _CHUNK) if chunks else length + 1):
        chunks.append(chunk)
    return b"".join(chunks)


def read_file(path: str) -> bytes:
    """The bytes of the file at `path` (links followed, as `open(path, "rb")` follows them).

    A failure names `path`, as `open()`'s does: a directory opens, and only its read fails, naming nothing.
    """
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        return read_all(fd, os.fstat(fd).st_size)
    except OSError as exc:
        raise _named(exc, path) from None
    finally:
        os.close(fd)


def rewrite_file(path: str, data: bytes) -> None:
    """Write `data` over the existing file at `path` and cut it there: its inode and mode stay (`open(path, "r+b")`)."""
    fd = os.open(path, os.O_WRONLY | os.O_CLOEXEC)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        os.ftruncate(fd, len(data))
    except OSError as exc:  # a write through the descriptor names no path (a full filesystem)
        raise _named(exc, path) from None
    finally:
        os.close(fd)


def _named(exc: OSError, path: str) -> OSError:
    """`exc` naming `path` when it names none (OSError picks the subclass for the errno)."""
    return exc if exc.filename is not None else OSError(exc.errno, exc.strerror, path)
