"""Owns: the table the parent and its workers share — each worker's state (idle or busy), since when, calls served.

One anonymous shared mapping, made by the parent before it forks any worker, so every worker writes into the very
pages the parent reads. A slot is the parent's to give and to take back (`claim` before the fork, `free` once the
worker is reaped); while it is given, only its worker writes it. A worker says here, without waking its parent,
that it is idle or busy and that it served a call: the parent reads the table when it wakes for its own reasons
(a spare wanted, a retirement, `status`, its timers). A torn read can only misstate a figure of `status` for one
answer; the state is one byte.
"""

from __future__ import annotations

import mmap
import struct

__all__ = ["BUSY", "FREE", "IDLE", "Slots"]

FREE, IDLE, BUSY = 0, 1, 2
_SLOT = struct.Struct("=B7xQd")  # state, calls served, monotonic seconds since the state began
_CALLS = struct.Struct("=Q")
_SINCE = struct.Struct("=d")


class Slots:
    """`count` slots, all free, in a mapping every process forked from now on shares."""

    def __init__(self, count: int) -> None:
        """The table (zeroed by the kernel: every slot free)."""
        self.count = count
        self._map = mmap.mmap(-1, max(1, count) * _SLOT.size)  # MAP_SHARED | MAP_ANONYMOUS

    def claim(self, now: float) -> int | None:
        """The parent: a free slot for a worker about to be forked (idle, no call yet), or None when all are given."""
        for index in range(self.count):
            if self._map[index * _SLOT.size] == FREE:
                _SLOT.pack_into(self._map, index * _SLOT.size, IDLE, 0, now)
                return index
        return None

    def free(self, index: int) -> int:
        """The parent: take back the slot of a worker that ended; the calls it served."""
        _state, calls, _since = _SLOT.unpack_from(self._map, index * _SLOT.size)
        _SLOT.pack_into(self._map, index * _SLOT.size, FREE, 0, 0.0)
        return int(calls)

    def read(self, index: int) -> tuple[int, int, float]:
        """(state, calls served, since) of one slot."""
        state, calls, since = _SLOT.unpack_from(self._map, index * _SLOT.size)
        return int(state), int(calls), float(since)

    def mark(self, index: int, state: int, now: float) -> None:
        """A worker: its state from `now` on (the time first, so a reader that sees the state sees its time)."""
        offset = index * _SLOT.size
        _SINCE.pack_into(self._map, offset + 16, now)
        self._map[offset] = state

    def served(self, index: int) -> None:
        """A worker: one more call served (a connection taken, whatever it asks), counted before it is answered."""
        offset = index * _SLOT.size + 8
        _CALLS.pack_into(self._map, offset, _CALLS.unpack_from(self._map, offset)[0] + 1)

    def given(self) -> list[tuple[int, int, float]]:
        """(state, calls served, since) of every slot given to a worker (ended or not, until it is reaped)."""
        return [slot for slot in map(self.read, range(self.count)) if slot[0] != FREE]

    def any_idle(self, but: int = -1) -> bool:
        """Whether a slot other than `but` is idle."""
        return any(self._map[index * _SLOT.size] == IDLE for index in range(self.count) if index != but)
