"""Owns: a worker's own /proc status, read through one descriptor — its signal masks, threads and resident size.

A worker's checks after each call need the kernel's masks of its ignored and caught signals (`server/world.py`), its
thread count and its resident size (`server/leaks.py`): all three are lines of /proc/self/status. One descriptor of it,
opened once, is read with pread(2) from offset 0 for each look (the kernel writes the file afresh on each read from
its start): one system call where opening /proc/self/status, /proc/self/statm and listing /proc/self/task cost 14.

/proc/self resolves when it is opened, so the descriptor describes the process that opened it: one inherited across a
fork describes the parent. It is opened on first use in each process and let go in a child of a fork
(`os.register_at_fork`), so a worker forked from the server opens its own. Where /proc is not mounted (the sidecar's
chroot), `field` says None and each caller falls back to what it reads without /proc.
"""

from __future__ import annotations

import os

__all__ = ["field", "fields", "forget", "open_status"]

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


def _text() -> bytes | None:
    if not open_status():
        return None
    size = _BUFFER
    while True:
        try:
            text = os.pread(_fd, size, 0)
        except OSError:
            return None
        if len(text) < size:
            return text
        size *= 4  # a longer file than the buffer: read it whole again, never a truncated one


def fields(*names: bytes) -> list[bytes | None] | None:
    """The values of `names` (`b"SigIgn"`…) from one read of this process's status; None without /proc.

    A name the status has no line for is None in the list.
    """
    text = _text()
    if text is None:
        return None
    found: list[bytes | None] = []
    for name in names:
        start = text.find(b"\n" + name + b":")
        if start < 0:
            found.append(None)
            continue
        start += len(name) + 2
        end = text.find(b"\n", start)
        found.append(text[start : end if end >= 0 else len(text)].strip())
    return found


def field(name: bytes) -> bytes | None:
    """One value of this process's status (`b"Threads"`), None where it has none or /proc is not mounted."""
    got = fields(name)
    return got[0] if got is not None else None


os.register_at_fork(after_in_child=forget)
