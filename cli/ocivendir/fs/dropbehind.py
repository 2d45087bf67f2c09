"""Owns: keeping a large file being written out of the page cache — its write-back started, its pages dropped behind.

A blob written to the cache and a large file written into a tree are not read again by the run that writes them. Left
in the page cache, a GiB of them takes a GiB of fresh pages. On this project's CI machines (virtual machines whose
memory the host backs lazily) that costs more system time than the write itself: writing 1 GiB took from 0.23 to 4.2 s
of system time from one run to the next, and 0.40 to 0.45 s every time with its pages dropped behind the writer
(`bench/` "Where a cold pull's time goes"). The file then holds at most two windows of the page cache, and pages the
kernel has just freed are used again for the next window.

Every `WINDOW` bytes, POSIX_FADV_DONTNEED over the new window starts its write-back (pages being written are not
dropped), and over the window before it, written back by then, drops its pages. Nothing here waits for the disk:
durability is the caller's business (the cache's fsync before its rename).
"""

from __future__ import annotations

import os

__all__ = ["WINDOW", "DropBehind"]

WINDOW = 32 << 20


class DropBehind:
    """The page-cache window of one file being written through descriptor `fd` from offset `start` on."""

    def __init__(self, fd: int, start: int = 0) -> None:
        """Nothing is dropped until a window's worth has been written after `start`."""
        self._fd = fd
        self._started = start  # write-back asked for up to here
        self._dropped = start  # pages dropped up to here

    def wrote(self, end: int) -> None:
        """The file holds bytes up to `end`: start the write-back of a full new window, drop the one before it."""
        if end - self._started < WINDOW:
            return
        os.posix_fadvise(self._fd, self._dropped, end - self._dropped, os.POSIX_FADV_DONTNEED)
        self._dropped, self._started = self._started, end
