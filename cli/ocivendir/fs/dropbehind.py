"""Owns: writing a file through its descriptor, every byte, and keeping a large one out of the page cache behind it.

A blob written to the cache and a large file written into a tree are, as a rule, not read again by the run that writes
them (a layer applied again after a restream reads its blob back, from the disk then). Left in the page cache, a GiB of
them takes a GiB of fresh pages. On this project's CI machines (virtual machines whose memory the host backs lazily)
that costs more system time than the write itself: writing 1 GiB took from 0.23 to 4.2 s of system time from one run
to the next, and 0.40 to 0.45 s every time with its pages dropped behind the writer (README "Where a cold pull's time
goes"). Pages the kernel has just freed are then used again for the next window.

Every `WINDOW` bytes, POSIX_FADV_DONTNEED over everything written so far starts the write-back of the new window and
drops every page written back by then. The kernel skips pages still dirty or under write-back, so a window is asked
again at each call until it is gone: asking once, a window later, left 30 to 60 % of a 1 GiB file cached in half the
runs where the writer outpaced the disk. Nothing here waits for the disk: durability is the caller's business (the
cache's fsync before its rename). Where the C library has no posix_fadvise (macOS), nothing is dropped.
"""

from __future__ import annotations

import os

__all__ = ["WINDOW", "DropBehind"]

WINDOW = 32 << 20
_ADVISE = getattr(os, "posix_fadvise", None)


class DropBehind:
    """The page-cache footprint of one file being written through descriptor `fd` from offset `start` on."""

    def __init__(self, fd: int, start: int = 0) -> None:
        """Nothing is asked until a window's worth has been written after `start`."""
        self._fd = fd
        self._start = start  # pages are dropped from here
        self._asked = start  # write-back asked for up to here

    def write(self, data: bytes, end: int) -> None:
        """Write all of `data` where the descriptor is (a short write is continued); the file then ends at `end`."""
        view = memoryview(data)
        while view:
            view = view[os.write(self._fd, view) :]
        self.wrote(end)

    def wrote(self, end: int) -> None:
        """The file holds bytes up to `end`: once a full new window is there, drop what is written back of it all."""
        if end - self._asked < WINDOW or _ADVISE is None:
            return
        _ADVISE(self._fd, self._start, end - self._start, os.POSIX_FADV_DONTNEED)
        self._asked = end
