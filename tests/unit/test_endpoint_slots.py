"""registry/endpoints.py's slots: at most `size` holders at once, a freed slot handed to the longest waiter."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from ocivendir.registry.endpoints import Slots


def _arrive_in_order(slots: Slots, count: int, held: Callable[[int], None]) -> None:
    """`count` threads take `slots` one after another, then run `held(name)` while they hold one; back when all are done.

    Each thread has a slot or is queued before the next starts, and no holder goes on until every thread has arrived.
    """
    go, lock, taken = threading.Event(), threading.Lock(), [0]

    def hold(name: int) -> None:
        with slots:
            with lock:
                taken[0] += 1
            go.wait(timeout=10)
            held(name)

    def arrived() -> int:  # holding or queued: each thread counts once from its arrival on
        with lock, slots._mutex:
            return taken[0] + len(slots._waiting)

    threads = []
    for name in range(count):
        threads.append(threading.Thread(target=hold, args=(name,)))
        threads[-1].start()
        deadline = time.monotonic() + 10
        while arrived() <= name and time.monotonic() < deadline:
            time.sleep(0.001)
        assert arrived() > name, f"thread {name} neither holds a slot nor waits for one"
    go.set()
    for thread in threads:
        thread.join()


def test_at_most_size_hold_a_slot_at_once() -> None:
    slots, holding, peak, lock, both = Slots(2), [0], [0], threading.Lock(), threading.Barrier(2, timeout=10)

    def held(name: int) -> None:
        with lock:
            holding[0] += 1
            peak[0] = max(peak[0], holding[0])
        if name < 2:  # the first two meet while both hold: two at once, whatever the scheduling
            both.wait()
        time.sleep(0.005)
        with lock:
            holding[0] -= 1

    _arrive_in_order(slots, 6, held)
    assert peak[0] == 2


def test_waiters_are_served_in_arrival_order() -> None:
    slots, order = Slots(1), []  # one slot: each holder hands it to the next waiter, so the order is the handover's
    _arrive_in_order(slots, 6, order.append)
    assert order == [0, 1, 2, 3, 4, 5]


def test_a_released_slot_is_free_again() -> None:
    slots = Slots(1)
    for _ in range(3):
        with slots:
            pass
    done = threading.Event()

    def take() -> None:
        with slots:
            done.set()

    threading.Thread(target=take).start()
    assert done.wait(timeout=5)
