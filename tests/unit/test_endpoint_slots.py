"""registry/endpoints.py's slots: at most `size` holders at once, a freed slot handed to the longest waiter."""

from __future__ import annotations

import threading
import time

from ocivendir.registry.endpoints import Slots


def test_at_most_size_hold_a_slot_and_waiters_are_served_in_arrival_order() -> None:
    slots, order, holding, peak, lock = Slots(2), [], [0], [0], threading.Lock()

    def hold(name: int) -> None:
        with slots:
            with lock:
                order.append(name)
                holding[0] += 1
                peak[0] = max(peak[0], holding[0])
            time.sleep(0.02)
            with lock:
                holding[0] -= 1

    threads = []
    for name in range(6):
        threads.append(threading.Thread(target=hold, args=(name,)))
        threads[-1].start()
        time.sleep(0.005)  # arrive in order
    for thread in threads:
        thread.join()
    assert (peak[0], sorted(order)) == (2, list(range(6)))
    assert order[2:] == [2, 3, 4, 5]  # the waiters, in the order they came


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
