"""Owns: writing a file through its descriptor, every byte, and keeping a large one out of the page cache behind it.

A blob written to the cache and a large file written into a tree are, as a rule, not read again by the run that writes
them (a layer applied again after a restream reads its blob back, from the disk then). Left in the page cache, a GiB of
them takes a GiB of fresh pages. On this project's CI machines (virtual machines whose memory the host backs lazily)
that costs more system time than the write itself: writing 1 GiB took from 0.23 to 4.2 s of system time from one run
to the next (docs/performance.md "Where a cold pull's time goes").

A file that is to grow by `DIRECT_FROM` bytes or more is written with O_DIRECT where the file system takes it: the
bytes are copied into one of two page-aligned buffers, and a thread of the writer's (`ocivendir/serial.py`) writes each
full buffer straight to the disk while the other one fills. No page cache is taken, nothing is copied into it, no
write-back is left to start: 0.09 to 0.19 s of CPU per GiB here, against 0.33 to 0.37 s through the page cache with its
pages dropped, and the disk's time overlaps the pull's hashing and inflating. The bytes before the first aligned offset
and the last partial block go through the page cache, and O_DIRECT is off again once `flush` returns. A file system
that refuses O_DIRECT (some overlay, FUSE and network ones), or a direct write it refuses or cuts short, makes the
writer go through the page cache for the rest of the file, in order.

Otherwise, every `WINDOW` bytes, POSIX_FADV_DONTNEED over everything written so far starts the write-back of the new
window and drops every page written back by then. The kernel skips pages still dirty or under write-back, so a window
is asked again at each call until it is gone: asking once, a window later, left 30 to 60 % of a 1 GiB file cached in
half the runs where the writer outpaced the disk. Nothing here waits for the disk beyond a direct write: durability is
the caller's business (the cache's fsync before its rename). Where the C library has no posix_fadvise or O_DIRECT
(macOS), nothing is dropped and every write goes through the page cache.

Bytes given to `write` in direct mode may still be in a buffer until `flush`: the caller flushes before it reads the
file or hands it on, and calls `close` before it closes the descriptor, whatever happened (the thread stops; it writes
through a duplicate of the descriptor that it closes itself, so no write of it can reach a number given to another
file). A failed write is raised to `write` or `flush` — the writer records it before that write's buffer goes back to
the pool, so the filling side never waits for a buffer that will not come — and nothing after it is written: the file
holds a prefix of the bytes given. A killed run loses at most the buffers' worth (4 MiB) of them.
"""

from __future__ import annotations

import errno
import fcntl
import mmap
import os

TYPE_CHECKING = False
if TYPE_CHECKING:
    import queue

    from ocivendir.serial import Serial

__all__ = ["DIRECT_FROM", "WINDOW", "DropBehind"]

WINDOW = 32 << 20
DIRECT_FROM = 8 << 20  # bytes still to come for a file to be written with O_DIRECT
_ADVISE = getattr(os, "posix_fadvise", None)
_O_DIRECT = getattr(os, "O_DIRECT", 0)
_ALIGN = 4096  # offsets and lengths of direct writes: the largest logical block size in common use
_BUFFER = 2 << 20  # one direct write: 1 MiB ones cost a 1 GiB pull 10 % more CPU, 4 MiB ones 8 MiB more memory
_BUFFERS = 2  # one being written while the next fills


class DropBehind:
    """The page-cache footprint of one file being written through descriptor `fd` from offset `start` on.

    Its first failure is final: every later `write` and `flush` raises it again and writes nothing, so the file stays a
    prefix of the bytes given whatever the caller does next.
    """

    def __init__(self, fd: int, start: int = 0, expected: int = 0) -> None:
        """Nothing is asked until a window's worth has been written after `start`; `expected`: the file's end to be."""
        self._fd = fd
        self._start = start  # pages are dropped from here
        self._asked = start  # write-back asked for up to here
        self._end = start  # the bytes given so far end here (some may still be in a buffer)
        self._direct = bool(_O_DIRECT) and expected - start >= DIRECT_FROM  # O_DIRECT wanted (and not refused)
        self._on = False  # O_DIRECT is set on the descriptor (by this thread)
        self._refused = False  # a direct write was refused: the rest goes through the page cache
        self._free: queue.Queue[mmap.mmap] | None = None  # buffers not being written
        self._writer: Serial | None = None
        self._writer_fd = -1  # the writer thread's own duplicate of `fd`: a number no later open can be given
        self._filling: mmap.mmap | None = None
        self._held = 0  # bytes in the buffer filling: the last ones given
        self._failed: BaseException | None = None
        self._writer_failed: BaseException | None = None  # set by the writer thread

    def write(self, data: bytes | memoryview) -> None:
        """Write all of `data` after the bytes given before (a short write is continued)."""
        if self._failed is not None:
            raise self._failed
        view = memoryview(data)
        try:
            while view and self._direct:
                view = self._direct_part(view)
            if view:
                self._plain(self._fd, view)
                self._end += len(view)
                self.wrote(self._end)
        except BaseException as exc:
            self._fail(exc)
            raise

    def _fail(self, exc: BaseException) -> None:
        """The first failure: what is held is dropped, and nothing more is written."""
        if self._failed is None:
            self._failed = exc
        self._filling, self._held = None, 0

    def _direct_part(self, view: memoryview) -> memoryview:
        """Take what of `view` fits now: through the page cache up to an aligned offset, then into a buffer."""
        if not self._on:
            head = min(len(view), -self._end % _ALIGN)
            if head:
                self._plain(self._fd, view[:head])
                self._end += head
                return view[head:]
            if not self._set_direct(on=True):
                self._direct = False
                return view
        if self._filling is None:
            self._filling = self._buffer()
        take = min(len(view), _BUFFER - self._held)
        self._filling[self._held : self._held + take] = view[:take]
        self._held += take
        self._end += take
        if self._held == _BUFFER:
            assert self._writer is not None  # noqa: S101 - started with the buffers
            self._check_writer()
            self._writer.put(self._writer_fd, self._filling, _BUFFER, self._end - _BUFFER)
            self._filling, self._held = None, 0
        return view[take:]

    def _buffer(self) -> mmap.mmap:
        """A buffer to fill (page-aligned, as O_DIRECT wants), once the writer is done with it."""
        if self._free is None:
            import queue  # noqa: PLC0415 - only a large file written directly starts a thread

            self._free = queue.Queue()
            for _ in range(_BUFFERS):
                self._free.put(mmap.mmap(-1, _BUFFER))
        if self._writer is None:
            from ocivendir.serial import Serial  # noqa: PLC0415 - loads threading

            self._writer_fd = own = os.dup(self._fd)
            self._writer = Serial(self._emit, last=lambda: os.close(own))  # the thread closes its descriptor itself
        self._check_writer()
        buffer = self._free.get()
        self._check_writer()  # the buffer a failed write gave back: nothing more is queued
        return buffer

    def _check_writer(self) -> None:
        """The writer's first failure, raised here (it is recorded before that write's buffer is given back)."""
        if self._writer_failed is not None:
            raise self._writer_failed

    def _emit(self, fd: int, buffer: mmap.mmap, length: int, offset: int) -> None:
        """Write a buffer's first `length` bytes (whole blocks) at file offset `offset`, directly.

        Once a direct write is refused or cut short, through the page cache instead, its pages dropped behind.
        """
        window = memoryview(buffer)
        try:
            done = 0
            if not self._refused:
                try:
                    done = os.write(fd, window[:length])
                except OSError as exc:
                    if exc.errno != errno.EINVAL:
                        raise
            if done < length:  # refused or short: this rest, and every later byte, through the page cache
                if not self._refused:
                    self._refused = True
                    fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) & ~_O_DIRECT)
                self._plain(fd, window[done:length])
                self._drop(fd, offset + length)
        except BaseException as exc:
            self._writer_failed = self._writer_failed or exc  # before the buffer is given back (`_buffer`)
            raise
        finally:
            window.release()
            if self._free is not None:
                self._free.put(buffer)

    def flush(self) -> None:
        """Write every byte given: whole blocks directly, the last partial one through the page cache; O_DIRECT off."""
        if self._failed is not None:
            raise self._failed
        try:
            self._stop_writer(drain=True)
            filling, held = self._filling, self._held
            self._filling, self._held = None, 0
            if filling is not None:
                whole = held - held % _ALIGN
                self._emit(self._fd, filling, whole, self._end - held)
                if self._on:
                    self._set_direct(on=False)
                self._plain(self._fd, memoryview(filling)[whole:held])
        except BaseException as exc:
            self._fail(exc)
            raise
        finally:
            if self._on:
                self._set_direct(on=False)
        self._direct = self._direct and not self._refused

    def close(self) -> None:
        """Stop the writer thread once what it was given is written; bytes not flushed are dropped.

        Call it before the descriptor is closed, whatever happened: a file's thread is never left behind.
        """
        self._stop_writer(drain=False)

    def _stop_writer(self, *, drain: bool) -> None:
        """Join the writer thread (after everything queued is written, raising its failure with `drain`)."""
        if self._writer is None:
            return
        writer, self._writer = self._writer, None
        self._writer_fd = -1  # the thread closes it when it stops, even if this join is interrupted
        try:
            if drain:
                writer.drain()
                self._check_writer()
        finally:
            writer.close()

    def _set_direct(self, *, on: bool) -> bool:
        """Turn O_DIRECT on or off for the descriptor; False if the file system refuses it."""
        flags = fcntl.fcntl(self._fd, fcntl.F_GETFL)
        try:
            fcntl.fcntl(self._fd, fcntl.F_SETFL, flags | _O_DIRECT if on else flags & ~_O_DIRECT)
        except OSError:
            return False
        self._on = on
        return True

    @staticmethod
    def _plain(fd: int, view: memoryview) -> None:
        """Write all of `view` through the page cache."""
        while view:
            view = view[os.write(fd, view) :]

    def wrote(self, end: int) -> None:
        """The file holds bytes up to `end`: once a full new window is there, drop what is written back of it all."""
        self._drop(self._fd, end)

    def _drop(self, fd: int, end: int) -> None:
        """`wrote`, through descriptor `fd` (the writer thread's own)."""
        if end - self._asked < WINDOW or _ADVISE is None:
            return
        _ADVISE(fd, self._start, end - self._start, os.POSIX_FADV_DONTNEED)
        self._asked = end
