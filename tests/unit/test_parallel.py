"""ocivendir/parallel.py: results in order, at most `workers` at once, the earliest failure, nothing started after it."""

from __future__ import annotations

import threading

import pytest

from ocivendir.parallel import map_parallel
from tests.support.fresh import fresh_python


def test_results_come_back_in_order_with_at_most_the_workers_running_at_once() -> None:
    running, peak, lock = [0], [0], threading.Lock()
    gate = threading.Barrier(3)

    def square(n: int) -> int:
        with lock:
            running[0] += 1
            peak[0] = max(peak[0], running[0])
        if n < 3:
            gate.wait(timeout=10)
        with lock:
            running[0] -= 1
        return n * n

    assert map_parallel(square, list(range(20)), 3) == [n * n for n in range(20)]
    assert peak[0] == 3


def test_the_earliest_failure_is_raised_and_no_item_starts_after_a_failure() -> None:
    started: list[int] = []
    second_failed = threading.Event()

    def work(n: int) -> int:
        started.append(n)
        if n == 0:
            second_failed.wait(timeout=10)
            raise ValueError("zero")  # fails last in time, but comes first in order
        second_failed.set()
        raise KeyError(n)

    with pytest.raises(ValueError, match="zero"):
        map_parallel(work, list(range(10)), 2)
    assert sorted(started) == [0, 1]  # the thread whose item failed took no other


def test_no_items_and_one_worker_are_fine_and_no_concurrent_futures_is_loaded() -> None:
    code = (
        "import sys\nfrom ocivendir.parallel import map_parallel\n"
        "print(map_parallel(str, [], 4), map_parallel(str, [1, 2], 1), 'concurrent' in sys.modules,"
        " 'logging' in sys.modules)"
    )
    done = fresh_python(code)
    assert done.stdout == "[] ['1', '2'] False False\n"
