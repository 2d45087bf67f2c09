"""What a call leaves behind in a reused worker: a descriptor it still holds retires the worker; garbage does not.

A descriptor held only by a reference cycle (an answer's socket, say) is closed when CPython collects the cycle: the
next call can neither see nor use it, so it is no reason to pay for a fork and a warm-up. Automatic collection is
off in these tests, so what the check sees is what the call left.
"""

from __future__ import annotations

import gc
import socket
from collections.abc import Iterator

import pytest

from ocivendir.server.leaks import Baseline


@pytest.fixture
def no_automatic_gc() -> Iterator[None]:
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def _plant_garbage() -> int:
    """A socket only a reference cycle holds; its descriptor number."""
    cycle: list[object] = [socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)]
    cycle.append(cycle)
    held = cycle[0]
    assert isinstance(held, socket.socket)
    return held.fileno()


@pytest.mark.usefixtures("no_automatic_gc")
def test_a_descriptor_only_garbage_holds_is_collected_and_is_no_reason_to_retire() -> None:
    baseline = Baseline()
    fd = _plant_garbage()
    assert baseline.left_behind(-1) is None
    with pytest.raises(OSError):  # collected: the descriptor is closed
        socket.socket(fileno=fd).close()


@pytest.mark.usefixtures("no_automatic_gc")
def test_a_descriptor_still_held_is_left_behind() -> None:
    baseline = Baseline()
    kept = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        reason = baseline.left_behind(-1)
        assert reason is not None
        assert reason.startswith(f"descriptors left open: {kept.fileno()} ")
    finally:
        kept.close()
    assert baseline.left_behind(-1) is None
