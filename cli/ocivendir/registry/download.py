"""Owns: one blob download's file — the bytes kept from an earlier attempt, hashing every byte, and Range answers.

A download that breaks off (a dropped connection, a killed run, the run's deadline) leaves the bytes it received in
its file. The next attempt — a retry in the same run, or the next run — hashes the kept bytes again from the file (and
shows them to the chunk callback, as if they had just arrived), then asks for the rest with `Range: bytes=<kept>-`.
Only the digest of every byte, checked at the end, says the blob is good: kept bytes are never trusted on their own.
A large blob is written and hashed on a thread of its own (`ocivendir/serial.py`), so the thread reading the network
only reads and hands each chunk on, to that thread and to the chunk callback (the tee): on two cores, receiving,
hashing and writing the cache's copy, and the tee's inflating and writing the tree, overlap.
How the registry answered the Range is read here: a 206 whose `Content-Range` starts at the kept size continues the
file; a 200 (Range ignored: the whole body) starts it over; anything else means starting over without a Range.
"""

from __future__ import annotations

import errno
import hashlib
import os
import stat

from ocivendir.errors import DigestMismatch
from ocivendir.fs.dropbehind import DropBehind
from ocivendir.oci.reference import Digest

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Self

    from ocivendir.serial import Serial

__all__ = ["BlobFile", "NotAFile", "range_start"]

_CHUNK = 1 << 20
_BEHIND_FROM = 8 << 20  # blobs at least this large are written and hashed on a thread of their own
_DEPTH = 2  # chunks queued for that thread: the network reads ahead of the disk by at most this many
_FLAGS = os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC  # never through a link or a FIFO


class NotAFile(OSError):
    """What is at a download's path is not a regular file (it was replaced while this run was not looking).

    Its errno is ELOOP, as for the link O_NOFOLLOW refuses: callers treat both alike (the cache: tampering).
    """

    def __init__(self, path: str) -> None:
        """Name the path."""
        super().__init__(errno.ELOOP, f"{path} is not a regular file")


class BlobFile:
    """A blob being written to `path`: bytes kept there are hashed first, new ones appended and hashed."""

    def __init__(
        self,
        path: str,
        digest: Digest,
        size: int,
        on_chunk: Callable[[int, bytes], None] | None = None,
        progress: Callable[[int], None] | None = None,
    ) -> None:
        """Open (or create) the file; nothing is read until `prepare`."""
        self.digest = digest
        self.size = size
        self._on_chunk = on_chunk
        self._progress = progress
        self._fd = os.open(path, _FLAGS, 0o600)
        info = os.fstat(self._fd)
        if not stat.S_ISREG(info.st_mode):
            os.close(self._fd)
            raise NotAFile(path)
        os.set_blocking(self._fd, True)
        self._hash = hashlib.sha256()
        self.written = 0  # bytes kept or appended (a large blob's last ones may still be on their way to the file)
        self._pages = DropBehind(self._fd)  # replaced once the kept bytes are known (`prepare`)
        self._prepared = False
        self._behind: Serial | None = None
        if size >= _BEHIND_FROM:
            from ocivendir.serial import Serial  # noqa: PLC0415 - only a large download starts a thread

            self._behind = Serial(self._store_behind, _DEPTH)

    def __enter__(self) -> Self:
        """The file, open."""
        return self

    def __exit__(self, *_exc: object) -> None:
        """Close it once every appended byte is written (what it holds stays on disk)."""
        try:
            if self._behind is not None:
                self._behind.close()
            self._pages.flush()  # what was received stays for the next attempt
        finally:
            try:
                self._pages.close()  # no thread of the file's is left writing
            finally:
                os.close(self._fd)

    def _drained(self) -> None:
        """Every appended chunk written to the file and hashed (a write's failure raised here)."""
        if self._behind is not None:
            self._behind.drain()
        self._pages.flush()

    def prepare(self) -> int:
        """The bytes kept so far: on first use, hashed again from the file (and shown to the chunk callback).

        A file longer than the blob cannot be a prefix of it and is emptied.
        """
        if self._prepared:
            return self.written
        self._prepared = True
        os.lseek(self._fd, 0, os.SEEK_SET)
        while chunk := os.read(self._fd, _CHUNK):
            if self.written + len(chunk) > self.size:
                self.restart()
                return 0
            self._hashed(chunk)
        self._pages = DropBehind(self._fd, self.written, self.size)  # not read again in this run: kept out of memory
        return self.written

    def _hashed(self, chunk: bytes) -> None:
        offset = self.written
        self.written += len(chunk)
        self._seen(offset, chunk)

    def _seen(self, offset: int, chunk: bytes) -> None:
        """Hash a chunk that is in the file, and show it to the callbacks."""
        self._hash.update(chunk)
        if self._on_chunk is not None:
            self._on_chunk(offset, chunk)
        if self._progress is not None:
            self._progress(offset + len(chunk))

    def _store(self, offset: int, chunk: bytes) -> None:
        """Write a chunk after the bytes there (all of it: a short write is continued), then hash it."""
        self._pages.write(chunk)  # and the cache's fsync has little left to wait for
        self._seen(offset, chunk)

    def _store_behind(self, offset: int, chunk: bytes) -> None:
        """`_store` on the blob's own thread, for a chunk the chunk callback has seen already (`append`)."""
        self._pages.write(chunk)
        self._hash.update(chunk)
        if self._progress is not None:
            self._progress(offset + len(chunk))

    def append(self, chunk: bytes) -> None:
        """Add a chunk: written and hashed now, or for a large blob queued for its thread to do so.

        A large blob's chunk is shown to the chunk callback here, before it is queued: the tee's extractor then works
        on it while the blob's thread writes and hashes it, rather than after (on two cores, one hand-over less between
        the network and the tree, and the end of the download waits for the slower of the two, not for both in turn).
        The callback sees unverified bytes either way; only the digest at the end says the blob is good.
        """
        offset = self.written
        self.written += len(chunk)
        if self._behind is not None:
            if self._on_chunk is not None:
                self._on_chunk(offset, chunk)
            self._behind.put(offset, chunk)
        else:
            self._store(offset, chunk)

    def restart(self) -> None:
        """Drop every byte: the file is emptied and the hash begins again (the chunk callback sees offset 0 next)."""
        self._drained()
        os.ftruncate(self._fd, 0)
        os.lseek(self._fd, 0, os.SEEK_SET)
        self._hash = hashlib.sha256()
        self.written = 0
        self._pages = DropBehind(self._fd, 0, self.size)
        self._prepared = True

    @property
    def matches(self) -> bool:
        """Whether the bytes so far are the whole blob."""
        self._drained()
        return self.written == self.size and Digest(self._hash.hexdigest()) == self.digest

    def verify(self, what: str) -> None:
        """Raise DigestMismatch unless the bytes so far have the blob's size and sha256."""
        self._drained()
        if self.written != self.size:
            raise DigestMismatch(f"{what}: expected {self.size} bytes, got {self.written}")
        actual = Digest(self._hash.hexdigest())
        if actual != self.digest:
            raise DigestMismatch(f"{what}: expected digest {self.digest}, got {actual}")


def range_start(content_range: str, size: int) -> int | None:
    """Where a 206's `Content-Range: bytes <first>-<last>/<total>` starts, if it is a range of this blob; else None.

    The total must be the blob's size (or `*`, unknown) and the range must lie within it.
    """
    unit, _, spec = content_range.strip().partition(" ")
    span, _, total = spec.partition("/")
    first, _, last = span.partition("-")
    numbers = (first, last) if total.strip() == "*" else (first, last, total)
    if unit.lower() != "bytes" or not all(n.strip().isascii() and n.strip().isdigit() for n in numbers):
        return None
    start, end = int(first), int(last)
    if total.strip() != "*" and int(total) != size:
        return None
    return start if start <= end < size else None
