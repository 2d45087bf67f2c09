"""Owns: the parent's view of its workers — which live, which to fork, which to end, what they said.

Each worker is a forked child with one end of a SOCK_SEQPACKET pair, its channel, and a slot of the shared table
(`server/slots.py`) where it says whether it is idle or busy. Workers take their connections from the listening socket
themselves, so a call never wakes the parent. A worker speaks on its channel only when the parent must act: `S` when it
took a connection and saw no other worker idle (a spare is wanted), `E` and a reason when it retires (it exits once its
caller has the answer), `Y` when it refused a caller favoured over the server, whose own server would serve it and the
rest (`server/schedule.py`: the server then retires), `Q` and an op when a caller asks for the server's facts (`status`,
`stop`: the parent answers on the channel). The channel ends when the worker dies. One idle worker is always kept ahead
of demand (within the limit), so no call waits for a fork; idle workers beyond that one end after `IDLE_SECONDS` (the
parent closes their channel).
"""

from __future__ import annotations

import logging
import socket

from ocivendir.server.slots import BUSY, FREE, IDLE, Slots

__all__ = ["IDLE_SECONDS", "Pool", "Worker"]

IDLE_SECONDS = 60.0
_PF_EXITING = 0x4  # a task flag (include/linux/sched.h): set as a process begins to exit
_log = logging.getLogger("ocivendir.server")


class Worker:
    """One worker as the parent sees it."""

    __slots__ = ("channel", "pid", "slot")

    def __init__(self, pid: int, channel: socket.socket, slot: int) -> None:
        """A worker just forked: idle, in its slot."""
        self.pid, self.channel, self.slot = pid, channel, slot


class Pool:
    """The live workers, by their channel's descriptor, and the table they share with the parent."""

    def __init__(self, limit: int) -> None:
        """No worker yet; at most `limit` at once."""
        self.limit = limit
        self.slots = Slots(limit)
        self.workers: dict[int, Worker] = {}
        self.retired = 0
        self.last_retired = ""  # why the last worker retired
        self.ended_calls = 0  # the calls served by workers that have ended
        self.yielded = False  # a worker refused a caller favoured over the server: the server is to retire

    def add(self, worker: Worker) -> None:
        """A worker just forked."""
        self.workers[worker.channel.fileno()] = worker

    def counts(self, asking: int = -1) -> tuple[int, int]:
        """(busy, idle), as the workers last said; the worker on channel `asking` (a status query's) counts as idle."""
        states = [self.slots.read(worker.slot)[0] for fd, worker in self.workers.items() if fd != asking]
        busy = sum(1 for state in states if state == BUSY)
        return busy, len(self.workers) - busy

    def calls(self) -> int:
        """The calls every worker, live or ended, has served."""
        return self.ended_calls + sum(calls for _state, calls, _since in self.slots.given())

    def last_activity(self) -> float:
        """When a worker last took a call or finished one, or was forked (0.0 with none)."""
        return max((since for _state, _calls, since in self.slots.given()), default=0.0)

    def wants_spare(self) -> bool:
        """Whether to fork a worker now: none is idle and the limit allows one more."""
        return self.counts()[1] == 0 and len(self.workers) < self.limit

    def full(self) -> bool:
        """Whether every worker is busy at the limit, none of them on its way out (the parent then answers connections).

        A worker killed mid-call closes its caller's connection as it exits, possibly before its channel: the caller's
        next call can come before the parent hears of the death, and would be told "busy". A worker already exiting
        (PF_EXITING in its /proc stat, set before the kernel closes anything) is not counted: the parent waits for its
        channel to end and forks the spare, which takes the call.
        """
        if len(self.workers) < self.limit or self.counts()[1] != 0:
            return False
        return not any(_exiting(worker.pid) for worker in self.workers.values())

    def heard(self, fd: int) -> bytes | None:
        """Read all the worker on channel `fd` said; the op of a `Q` (the parent answers it), else None.

        All, not one message: a short call's `S` and `E` may both wait, and a question answered after this must know
        of the retirement. A `Q` is the last a worker says before it waits for the answer.
        """
        worker = self.workers.get(fd)
        if worker is None:
            return None
        while True:
            try:
                message = worker.channel.recv(8192, socket.MSG_DONTWAIT)
            except BlockingIOError:
                return None
            except OSError:
                message = b""
            if message == b"S":
                continue  # the loop forks the spare at its top
            if message == b"Y":
                self.yielded = True
                continue
            if message.startswith(b"Q"):
                return message[1:]
            self._retiring(worker, message)
            self.drop(worker)
            return None

    def ended(self, worker: Worker) -> None:
        """`worker`'s process has been reaped: what it said before it died still counts, then it is dropped.

        A worker says `E` and exits at once; the loop may reap it before it has read the channel, and the retirement
        would otherwise go uncounted (its reason unknown to `status`).
        """
        while True:
            try:
                message = worker.channel.recv(8192, socket.MSG_DONTWAIT)
            except OSError:
                break
            if not message:
                break
            self.yielded |= message == b"Y"
            self._retiring(worker, message)
        self.drop(worker)

    def _retiring(self, worker: Worker, message: bytes) -> None:
        if message.startswith(b"E"):
            self.retired += 1
            self.last_retired = message[1:].decode(errors="replace")
            _log.info("worker %d retired: %s", worker.pid, self.last_retired)

    def expire(self, now: float) -> float:
        """End idle workers beyond the one spare that have waited `IDLE_SECONDS`; seconds until the next may expire."""
        ready = [(self.slots.read(w.slot), w) for w in self.workers.values()]
        ready = sorted(((slot, w) for slot, w in ready if slot[0] == IDLE), key=lambda item: item[0][2], reverse=True)
        wait = IDLE_SECONDS
        for (_state, _calls, since), worker in ready[1:]:
            if now - since >= IDLE_SECONDS:
                _log.debug("worker %d idle for %.0f s: ended", worker.pid, now - since)
                self.drop(worker)
            else:
                wait = min(wait, since + IDLE_SECONDS - now)
        return wait

    def drop(self, worker: Worker) -> None:
        """Forget `worker` and close its channel: an idle worker exits at once, a busy one after its call.

        Its slot is taken back when its process is reaped (`release`), not before: it may still be serving.
        """
        self.workers.pop(worker.channel.fileno(), None)
        worker.channel.close()

    def release(self, slot: int) -> None:
        """The slot of a reaped worker is free again; its calls are counted as ended."""
        if self.slots.read(slot)[0] != FREE:
            self.ended_calls += self.slots.free(slot)

    def drop_all(self) -> None:
        """Close every channel (the server retires)."""
        for worker in list(self.workers.values()):
            self.drop(worker)


def _exiting(pid: int) -> bool:
    """Whether process `pid` has begun to exit (or has, unreaped); False where /proc cannot tell."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            fields = stat.read().rpartition(b")")[2].split()
        return bool(int(fields[6]) & _PF_EXITING)  # field 9 of the stat line, the flags
    except (OSError, ValueError, IndexError):
        return False
