"""Owns: one daemon thread doing a piece of work on items in the order queued, its first failure raised to the queuer.

A large download hashes and writes its chunks on one (registry/download.py), so the thread reading the network only
reads; a large file written with O_DIRECT has its blocks written on one while the next block fills (fs/dropbehind.py).
After a failure no later item is worked on (the queue is only drained), so what was written before it is a prefix.
"""

from __future__ import annotations

import queue
import threading

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = ["Serial"]


class Serial:
    """`work(*item)` for each item `put`, in order, on a daemon thread; at most `depth` items wait (0: no bound)."""

    def __init__(self, work: Callable[..., None], depth: int = 0, last: Callable[[], None] | None = None) -> None:
        """Start the thread; `last()` is its last act, once it is stopped (what it owns, it releases itself)."""
        self._work = work
        self._last = last
        self._queue: queue.Queue[tuple[object, ...] | None] = queue.Queue(maxsize=depth)
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            while True:
                item = self._queue.get()
                try:
                    if item is None:
                        return
                    if self._error is None:  # after a failure, the rest is only drained
                        self._work(*item)
                except BaseException as exc:  # noqa: BLE001 - raised in the queueing thread by put/drain
                    self._error = exc
                finally:
                    self._queue.task_done()
        finally:
            if self._last is not None:
                self._last()

    def check(self) -> None:
        """The first failure, again on every later call: nothing after it is worked on."""
        if self._error is not None:
            raise self._error

    def put(self, *item: object) -> None:
        """Queue an item (waiting while `depth` items wait)."""
        self.check()
        self._queue.put(item)

    def drain(self) -> None:
        """Wait until every queued item is done."""
        self._queue.join()
        self.check()

    def close(self) -> None:
        """Do what is queued, then stop the thread (a failure was raised to `put` or `drain` already, or is moot)."""
        self._queue.put(None)
        self._thread.join()
