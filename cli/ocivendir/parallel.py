"""Owns: running one function over a few items on a few daemon threads, results in the items' order.

What `ThreadPoolExecutor` with `cancel_futures=True` and its results read in order would give — after a failure no
further item is started, those already started finish, and the earliest item's failure is raised — but on daemon
threads: `concurrent.futures` joins its workers at interpreter exit, so an interrupted run would wait for its
downloads to end, and its public API has no way to make them daemons.
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
