"""Owns: a worker's own /proc status, read through one descriptor — its signal masks, threads and resident size.

A worker's checks after each call need the kernel's masks of its ignored and caught signals (`server/world.py`), its
thread count and its resident size (`server/leaks.py`): all three are lines of /proc/self/status. One descriptor of it,
opened once, is read with pread(2) from offset 0 for each look (the kernel writes the file afresh on each read from
its start): one system call where opening /proc/self/status, /proc/self/statm and listing /proc/self/task cost 14.

/proc/self resolves when it is opened, so the descriptor describes the process that opened it: one inherited across a
fork describes the parent. It is opened on first use in each process and let go in a child of a fork
(`os.register_at_fork`), so a worker forked from the server opens its own. Where /proc is not mounted (the sidecar's
chroot), a `Status` has no text and each caller falls back to what it reads without /proc. A worker reads it once
after each call (`server/worker.py`) and hands that one read to every check that needs it.
"""

from __future__ import annotations

import os

__all__ = ["Status", "field", "forget", "open_status", "read", "whole"]

_BUFFER = 8192  # the file is ~1.4 KB; its Groups line grows with the groups (at most 256 for a served caller)
_UNOPENED = -2
_NO_PROC = -1
_fd = _UNOPENED


def open_status() -> bool:
    """Open this process's status now (before a baseline of its descriptors is taken); False without /proc."""
    global _fd  # noqa: PLW0603 - one descriptor per process
    if _fd == _UNOPENED:
        try:
            _fd = os.open("/proc/self/status", os.O_RDONLY | os.O_CLOEXEC)
        except OSError:
            _fd = _NO_PROC
    return _fd != _NO_PROC


def forget() -> None:
    """Let go of the descriptor: in a forked child it describes the parent (the child opens its own on first use)."""
    global _fd  # noqa: PLW0603 - one descriptor per process
    if _fd >= 0:
        try:
            os.close(_fd)
        except OSError:
            pass
    _fd = _UNOPENED


def whole(fd: int) -> bytes:
    """A whole /proc file through descriptor `fd`, read from its start.

    A /proc file says no size: one that fills the buffer is read again with a larger one, never returned truncated.
    """
    size = _BUFFER
    while len(text := os.pread(fd, size, 0)) == size:
        size *= 4
    return text


def field(text: bytes, name: bytes) -> bytes | None:
    """The value of the line `name:` in a /proc status text (`b"Threads"`), stripped; None where there is none."""
    start = text.find(b"\n" + name + b":")
    if start < 0:
        return None
    start += len(name) + 2
    end = text.find(b"\n", start)
    return text[start : end if end >= 0 else len(text)].strip()


def _text() -> bytes | None:
    if not open_status():
        return None
    try:
        return whole(_fd)
    except OSError:
        return None


class Status:
    """One read of this process's status; its `text` is None where /proc is not mounted."""

    __slots__ = ("text",)

    def __init__(self, text: bytes | None) -> None:
        """Keep one read's bytes."""
        self.text = text

    def get(self, name: bytes) -> bytes | None:
        """The value of the line `name` (`b"Threads"`), stripped; None where there is none (or no /proc)."""
        return None if self.text is None else field(self.text, name)


def read() -> Status:
    """This process's status as it is now: one pread(2)."""
    return Status(_text())


os.register_at_fork(after_in_child=forget)
