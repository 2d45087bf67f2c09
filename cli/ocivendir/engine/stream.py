"""Owns: applying a layer while it downloads.

The bytes go to the cache's temp file and, through a bounded queue, to an extractor thread, so a cold pull writes and
hashes each byte once instead of reading it back.

The layer is verified when the download ends; until then the stage holds unverified files, and the caller discards
the stage on any failure. A retry that starts the download over, or a download done by another process, makes the
tee step aside: the caller then extracts from the verified blob as usual.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    import queue
    from collections.abc import Callable

__all__ = ["ChunkPipe", "TeeExtractor"]

_DEPTH = 2


class ChunkPipe:
    """A read()-able stream fed with chunks from another thread; None marks the end."""

    def __init__(self) -> None:
        """An empty pipe."""
        import queue  # noqa: PLC0415 - only a cold download tees into a pipe (queue pulls in threading)

        self._queue: queue.Queue[bytes | None] = queue.Queue(maxsize=_DEPTH)
        self._current = b""
        self._offset = 0
        self._ended = False

    def put(self, chunk: bytes | None, timeout: float | None = None) -> None:
        """Feed a chunk (or the end), waiting while the reader is behind (queue.Full after `timeout`)."""
        self._queue.put(chunk, timeout=timeout)

    def readable(self) -> bool:
        """Streams are readable."""
        return True

    def read(self, size: int = -1) -> bytes:
        """Up to `size` bytes (everything left for -1), blocking until data or the end arrives.

        Only the bytes returned are copied: the current chunk is consumed through an offset.
        """
        parts: list[bytes] = []
        wanted = size
        while wanted != 0:
            if self._offset >= len(self._current):
                if self._ended:
                    break
                chunk = self._queue.get()
                if chunk is None:
                    self._ended = True
                    break
                if not chunk:
                    continue  # b"" from read() means the end to every reader (tar, gunzip): never before it
                self._current, self._offset = chunk, 0
            end = len(self._current) if wanted < 0 else min(len(self._current), self._offset + wanted)
            parts.append(self._current[self._offset : end])
            if wanted > 0:
                wanted -= end - self._offset
            self._offset = end
            if wanted > 0 and parts:
                break  # return what is here; callers loop
        return b"".join(parts)


class TeeExtractor:
    """Runs `apply(stream)` in a thread on the chunks a download feeds it."""

    def __init__(self, apply: Callable[[ChunkPipe], None], dest: str) -> None:
        """`apply` is called with a ChunkPipe; `dest` is where it writes (for the caller's fallback)."""
        import threading  # noqa: PLC0415 - only where a thread is started (a cold download)

        self.dest = dest
        self.pipe = ChunkPipe()
        self.error: BaseException | None = None
        self.fed = 0
        self.broken = False
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(apply,), daemon=True)
        self._thread.start()

    def _run(self, apply: Callable[[ChunkPipe], None]) -> None:
        try:
            apply(self.pipe)
            self.pipe.read()  # consume what the extractor left (tar padding), so the feeder never blocks
        except BaseException as exc:  # noqa: BLE001 - reported by finish()
            self.error = exc
        finally:
            self._done.set()

    def feed(self, offset: int, chunk: bytes) -> None:
        """The download's chunk callback."""
        if self.broken:
            return
        if offset != self.fed:  # a retry started over: stop teeing, the caller extracts from the blob
            self.broken = True
            self._put(None)
            return
        self._put(chunk)
        self.fed += len(chunk)

    def _put(self, item: bytes | None) -> None:
        """Queue an item unless the extractor has stopped (then the download just goes on to its end)."""
        import queue  # noqa: PLC0415 - loaded already by the pipe

        while not self._done.is_set():
            try:
                self.pipe.put(item, timeout=0.05)
            except queue.Full:
                continue
            return

    def finish(self, *, complete: bool) -> bool:
        """End the stream; True if the layer was applied from the tee, False if the caller must extract it."""
        if not self.broken:
            self._put(None)
        self._thread.join()
        if self.broken or not complete or self.fed == 0:
            return False
        if self.error is not None:
            raise self.error
        return True
