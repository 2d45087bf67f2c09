"""Owns: the deadline watchdog — a socket still in use when its deadline passes is shut down from outside.

A per-read timeout bounds each wait, not their sum: a server that sends one byte just before every timeout keeps a
reader going for ever. urllib3 and `http.client` offer only per-read timeouts, so the connections arm an `Alarm` with
the time by which a response head (or everything left of a run) must be done. At that time one daemon thread shuts the
socket down (`SHUT_RDWR` on its descriptor, under any TLS layer): the blocked read returns at once with the end of the
stream, and the reader, seeing `Alarm.fired`, reports a timeout rather than a broken connection.
"""

from __future__ import annotations

import heapq
import itertools
import os
import socket
import threading
from time import monotonic

__all__ = ["WATCHDOG", "Alarm", "Watchdog"]


class Alarm:
    """One armed deadline: the socket it guards, and whether the watchdog shut it down."""

    __slots__ = ("_lock", "fired", "sock")

    def __init__(self, sock: socket.socket, lock: threading.Condition) -> None:
        """Guard `sock`; `lock` is the watchdog's, under which it fires."""
        self.sock: socket.socket | None = sock
        self.fired = False
        self._lock = lock

    def cancel(self) -> bool:
        """Disarm (the socket is no longer held); returns whether the alarm had already fired."""
        with self._lock:
            self.sock = None
            return self.fired


class Watchdog:
    """Alarms in deadline order, served by one daemon thread started on the first alarm."""

    def __init__(self) -> None:
        """No alarms, no thread yet."""
        self.forget()

    def forget(self) -> None:
        """No alarms, no thread (also in a forked child: the parent's thread and alarms are not this process's)."""
        self._ready = threading.Condition(threading.Lock())
        self._alarms: list[tuple[float, int, Alarm]] = []
        self._order = itertools.count()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        """Start the thread now rather than on the first alarm: a server worker's, before its first call.

        A thread is born with the scheduling of the thread that starts it, and a call runs with its caller's
        (`server/schedule.py`): started in a call under `chrt -i 0` or `taskset`, the watchdog would keep that for the
        worker's life, and enforce every later call's deadlines late or on one CPU.
        """
        with self._ready:
            self._start()

    def arm(self, sock: socket.socket, when: float) -> Alarm:
        """Shut `sock` down at `when` unless the returned alarm is cancelled first."""
        alarm = Alarm(sock, self._ready)
        with self._ready:
            heapq.heappush(self._alarms, (when, next(self._order), alarm))
            self._start()
            self._ready.notify()
        return alarm

    def _start(self) -> None:
        """The thread, unless it runs (under `_ready`)."""
        if self._thread is None:
            self._thread = threading.Thread(target=self._serve, name="ocivendir-watchdog", daemon=True)
            self._thread.start()

    def _serve(self) -> None:
        with self._ready:
            while True:
                while self._alarms and self._alarms[0][2].sock is None:
                    heapq.heappop(self._alarms)  # cancelled
                if not self._alarms:
                    self._ready.wait()
                    continue
                left = self._alarms[0][0] - monotonic()
                if left > 0:
                    self._ready.wait(left)
                    continue
                _, _, alarm = heapq.heappop(self._alarms)
                sock, alarm.sock = alarm.sock, None
                if sock is not None:
                    alarm.fired = True
                    _shut(sock)


def _shut(sock: socket.socket) -> None:
    """Both directions of the descriptor shut down, beneath TLS (an `ssl.SSLSocket` would drop its TLS state first)."""
    try:
        socket.socket.shutdown(sock, socket.SHUT_RDWR)
    except OSError:  # closed meanwhile, or never connected
        pass


WATCHDOG = Watchdog()
os.register_at_fork(after_in_child=WATCHDOG.forget)  # a forked server worker starts its own on its first alarm
