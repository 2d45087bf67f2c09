"""Owns: running one function over a few items on a few threads — what the engine asked `concurrent.futures` for.

`concurrent.futures` imports `logging` (with traceback, tokenize, textwrap and string) for a logger it never uses
here: ~45M instructions, a sixth of a cold sync, before the first blob is fetched in parallel. This is the part the
engine used. Results come back in the items' order. After a failure no further item is started; those already
started finish, and the failure of the earliest item is raised (as `ThreadPoolExecutor` with `cancel_futures=True`
and its results read in order). The threads are daemons: an interrupted run does not wait for its downloads.
"""

from __future__ import annotations

import threading

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Sequence
    from typing import TypeVar

    _Item = TypeVar("_Item")
    _Result = TypeVar("_Result")

__all__ = ["map_parallel"]


def map_parallel(function: Callable[[_Item], _Result], items: Sequence[_Item], workers: int) -> list[_Result]:
    """`[function(item) for item in items]` on at most `workers` threads; the earliest failure is raised."""
    results: list[_Result | None] = [None] * len(items)
    failures: dict[int, BaseException] = {}
    lock = threading.Lock()
    taken = [0]

    def work() -> None:
        while True:
            with lock:
                index = taken[0]
                if failures or index >= len(items):
                    return
                taken[0] = index + 1
            try:
                results[index] = function(items[index])
            except BaseException as exc:  # noqa: BLE001 - handed to the caller's thread below
                with lock:
                    failures[index] = exc

    threads = [threading.Thread(target=work, daemon=True) for _ in range(max(1, min(workers, len(items))))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if failures:
        raise failures[min(failures)]
    return results  # type: ignore[return-value] # every slot was filled: no failure, every item taken
