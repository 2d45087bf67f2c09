"""Owns: the parent's view of its workers — which are busy, which idle, which to hand a connection, which to end.

Each worker is a forked child with one end of a SOCK_SEQPACKET pair, its channel. The parent hands it an accepted
connection (the descriptor by SCM_RIGHTS, with the server's facts as JSON) and marks it busy; the worker answers `D`
when it is ready again, or `E` and a reason when it retires (it exits once its caller has the answer), and the
channel ends when it dies. One idle worker is always kept ahead of demand (within the limit), so no call waits for
a fork; idle workers beyond that one end after `IDLE_SECONDS` (the parent closes their channel).
"""

from __future__ import annotations

import logging
import socket

__all__ = ["IDLE_SECONDS", "Pool", "Worker"]

IDLE_SECONDS = 60.0
_log = logging.getLogger("ocivendir.server")


class Worker:
    """One worker as the parent sees it."""

    __slots__ = ("busy", "channel", "idle_since", "pid")

    def __init__(self, pid: int, channel: socket.socket, now: float) -> None:
        """A worker just forked: idle."""
        self.pid, self.channel, self.busy, self.idle_since = pid, channel, False, now


class Pool:
    """The live workers, by their channel's descriptor."""

    def __init__(self, limit: int) -> None:
        """No worker yet; at most `limit` at once."""
        self.limit = limit
        self.workers: dict[int, Worker] = {}
        self.retired = 0
        self.last_retired = ""  # why the last worker retired

    def add(self, worker: Worker) -> None:
        """A worker just forked."""
        self.workers[worker.channel.fileno()] = worker

    def counts(self) -> tuple[int, int]:
        """(busy, idle)."""
        busy = sum(1 for worker in self.workers.values() if worker.busy)
        return busy, len(self.workers) - busy

    def idle(self) -> Worker | None:
        """The idle worker that has waited least (the others may then expire), or None."""
        ready = [worker for worker in self.workers.values() if not worker.busy]
        return max(ready, key=lambda worker: worker.idle_since) if ready else None

    def wants_spare(self) -> bool:
        """Whether to fork a worker now: none is idle and the limit allows one more."""
        return self.counts()[1] == 0 and len(self.workers) < self.limit

    def hand(self, worker: Worker, conn: socket.socket, facts: bytes) -> bool:
        """Pass `conn` to `worker` with the server's facts (JSON); False (and the worker dropped) when it is gone."""
        try:
            socket.send_fds(worker.channel, [facts], [conn.fileno()])
        except OSError:
            self.drop(worker)
            return False
        worker.busy = True
        return True

    def heard(self, fd: int, now: float) -> None:
        """Read what the worker on channel `fd` said: ready again, retiring, or gone."""
        worker = self.workers.get(fd)
        if worker is None:
            return
        try:
            message = worker.channel.recv(8192)
        except BlockingIOError:
            return
        except OSError:
            message = b""
        if message == b"D":
            worker.busy, worker.idle_since = False, now
            return
        self._retiring(worker, message)
        self.drop(worker)

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
            self._retiring(worker, message)
        self.drop(worker)

    def _retiring(self, worker: Worker, message: bytes) -> None:
        if message.startswith(b"E"):
            self.retired += 1
            self.last_retired = message[1:].decode(errors="replace")
            _log.info("worker %d retired: %s", worker.pid, self.last_retired)

    def expire(self, now: float) -> float:
        """End idle workers beyond the one spare that have waited `IDLE_SECONDS`; seconds until the next may expire."""
        ready = sorted((w for w in self.workers.values() if not w.busy), key=lambda w: w.idle_since, reverse=True)
        wait = IDLE_SECONDS
        for worker in ready[1:]:
            if now - worker.idle_since >= IDLE_SECONDS:
                self.drop(worker)
            else:
                wait = min(wait, worker.idle_since + IDLE_SECONDS - now)
        return wait

    def drop(self, worker: Worker) -> None:
        """Forget `worker` and close its channel: an idle worker exits at once, a busy one after its call."""
        self.workers.pop(worker.channel.fileno(), None)
        worker.channel.close()

    def drop_all(self) -> None:
        """Close every channel (the server retires)."""
        for worker in list(self.workers.values()):
            self.drop(worker)
