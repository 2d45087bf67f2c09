"""Owns: a reused worker's one resident thread that listens to the client of the call it is running.

While a call runs, its client may forward a signal (an `S` frame: SIGTERM, SIGINT or SIGHUP, raised in the worker as
the in-process program would receive it) or go away (killed): then the worker ends with SIGTERM, which, as for the
in-process program, leaves target and cache intact at any moment. The thread is started once per worker, before the
worker takes its baseline (so it is part of what every call must leave as it found it): a thread per call cost a start
and a join on every call (0.16 ms of the warm call's 3 ms).

The thread sleeps in epoll_wait(2) on an epoll set of its own. `watch` adds the call's connection to the set and `stop`
takes it out again: the thread wakes only when the client sends something or goes away, never merely because a call
began or ended (a hand-over to a thread and back cost two wake-ups and GIL hand-offs on every call). It reads what
is there without waiting, under the same lock that ends the call: a frame read as the call ends is raised before the
end (and belongs to the call) or not at all (never into the worker's own world between calls), and once `stop` has
returned the thread never touches the connection again, so the worker may close it at once.

The thread also watches the server's parent process, when it is given a pidfd of it: once the parent has ended (killed,
with no retirement of its own), it runs the action it was given, once, even in the middle of a call.
"""

from __future__ import annotations

import os
import select
import signal
import socket
import threading

from ocivendir.server.wire import WireError, split_frames

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = ["FORWARDED", "THREAD_NAME", "Watcher"]

FORWARDED = frozenset({signal.SIGTERM, signal.SIGINT, signal.SIGHUP})
THREAD_NAME = "ocivendir-client"
_READ = 1 << 12


class Watcher:
    """The resident listener: `watch(conn)` before a call runs, `stop()` once it has ended."""

    def __init__(self, parent: tuple[int, Callable[[], object]] | None = None) -> None:
        """Start the thread (asleep until a watched connection has something to say, or the `parent` pidfd ends)."""
        self._state = threading.Lock()  # held to read and raise, and to end the call: never both at once
        self._poll = select.epoll()  # the thread's own: it holds at most the running call's connection (and `parent`)
        self._parent = parent
        if parent is not None:
            self._poll.register(parent[0], select.EPOLLIN)  # readable once that process has ended
        self._conn: socket.socket | None = None  # the call being watched; None between calls
        self._fd = -1  # its descriptor in the epoll set
        self._pending = b""  # a frame's first bytes, read before the rest came
        threading.Thread(target=self._loop, name=THREAD_NAME, daemon=True).start()

    def watch(self, conn: socket.socket) -> None:
        """Listen to `conn`'s client from now until `stop`."""
        with self._state:
            self._conn, self._fd, self._pending = conn, conn.fileno(), b""
            self._poll.register(self._fd, select.EPOLLIN)

    def stop(self) -> None:
        """The call has ended: raise nothing more for it, and let go of its connection (safe when not watching)."""
        with self._state:
            self._forget()

    def _forget(self) -> None:
        """Take the connection out of the epoll set (under the lock)."""
        if self._conn is not None:
            self._conn = None
            try:
                self._poll.unregister(self._fd)
            except OSError:
                pass  # closed under us (the kernel dropped it from the set with it)
            self._fd = -1

    def _loop(self) -> None:
        while True:
            try:
                events = self._poll.poll()
            except InterruptedError:
                continue
            if self._parent is not None and any(fd == self._parent[0] for fd, _event in events):
                pidfd, action = self._parent
                self._parent = None
                self._poll.unregister(pidfd)  # once: the pidfd stays readable (and open: it is the worker's own)
                action()
            with self._state:
                if self._conn is not None:
                    self._read(self._conn)

    def _read(self, conn: socket.socket) -> None:
        """What the client sent (under the lock): forwarded signals raised, its end (or a broken stream) SIGTERM."""
        try:
            data = conn.recv(_READ, socket.MSG_DONTWAIT)
        except BlockingIOError:
            return
        except Exception:  # noqa: BLE001 - the stream broke (OSError, MemoryError…): as a client gone
            data = b""
        if not data:
            self._forget()  # once: an end stays readable, and the thread must not wake for it again
            os.kill(os.getpid(), signal.SIGTERM)
            return
        try:
            frames, self._pending = split_frames(self._pending + data)
        except WireError:  # an oversized frame: as a client gone
            self._forget()
            os.kill(os.getpid(), signal.SIGTERM)
            return
        for kind, payload in frames:
            if kind == b"S" and len(payload) == 1 and payload[0] in FORWARDED:
                os.kill(os.getpid(), payload[0])
