"""Test support: a TCP proxy on 127.0.0.1 that resets a connection once it has carried a given number of bytes.

Bytes are passed through as they come (nothing is parsed or held, so a 1 GiB blob streams through in constant
memory); the first connection whose server-to-client bytes reach `cut_at` is reset (RST, as a dropped link or a
middlebox does) on both sides, once. It counts the bytes it sent to clients, per connection and in all.

A reset drops what is still queued for the client (and what arrived but is unread, on some stacks), so the proxy
first waits (up to `_DRAIN_SECONDS`) until nothing it sent is unacknowledged and the client's socket holds nothing
unread (both queues in /proc/net/tcp): the client has then read exactly `cut_at` bytes of the cut connection, however
loaded the machine. Without that wait, a client slow to read lost what was still queued and, in CI, asked again from byte zero.
"""

from __future__ import annotations

import contextlib
import socket
import struct
import threading
import time
from pathlib import Path
from typing import Self

__all__ = ["CuttingProxy"]

_BUFFER = 1 << 20
_DRAIN_SECONDS = 30.0


class CuttingProxy:
    """Listen on a free 127.0.0.1 port and forward to `upstream` (`host:port`); cut once at `cut_at` bytes."""

    def __init__(self, upstream: str, cut_at: int) -> None:
        """Ready to `start`; nothing is cut when `cut_at` is 0."""
        host, _, port = upstream.rpartition(":")
        self.upstream = (host, int(port))
        self.cut_at = cut_at
        self.cut = False
        self.sent: list[int] = []  # bytes sent to the client, per connection in the order they were accepted
        self._lock = threading.Lock()
        self._open: list[socket.socket] = []  # each connection's two ends, while it lasts
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.host = f"127.0.0.1:{self._listener.getsockname()[1]}"
        self._thread = threading.Thread(target=self._accept, daemon=True)

    @property
    def total(self) -> int:
        """Bytes sent to clients over every connection."""
        with self._lock:
            return sum(self.sent)

    def start(self) -> Self:
        """Begin accepting."""
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop accepting (open connections end when either side closes)."""
        with contextlib.suppress(OSError):
            self._listener.shutdown(socket.SHUT_RDWR)
        self._listener.close()
        self._thread.join(timeout=5)

    def hang_up(self) -> None:
        """Close every connection open now, as a registry drops its idle connections (a FIN to each client)."""
        with self._lock:
            ends, self._open = self._open, []
        for end in ends:
            with contextlib.suppress(OSError):
                end.shutdown(socket.SHUT_RDWR)

    def __enter__(self) -> Self:
        """Started."""
        return self.start()

    def __exit__(self, *_exc: object) -> None:
        """Stopped."""
        self.stop()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            server = socket.create_connection(self.upstream)
            with self._lock:
                self.sent.append(0)
                number = len(self.sent) - 1
                self._open += [client, server]
            upward = threading.Thread(target=self._pump, args=(client, server), daemon=True)
            upward.start()
            threading.Thread(target=self._down, args=(server, client, number, upward), daemon=True).start()

    @staticmethod
    def _pump(source: socket.socket, sink: socket.socket) -> None:
        """Client to server, as it comes."""
        buffer = bytearray(_BUFFER)
        with contextlib.suppress(OSError):
            while count := source.recv_into(buffer):
                sink.sendall(memoryview(buffer)[:count])
        with contextlib.suppress(OSError):
            sink.shutdown(socket.SHUT_WR)

    def _down(self, server: socket.socket, client: socket.socket, number: int, upward: threading.Thread) -> None:
        """Server to client, counted; reset both once this connection has carried `cut_at` bytes (the first time)."""
        buffer = bytearray(_BUFFER)
        try:
            while count := server.recv_into(buffer):
                with self._lock:
                    room = self.cut_at - self.sent[number] if self.cut_at and not self.cut else count
                    count = min(count, max(room, 0))
                    self.sent[number] += count
                    cutting = self.cut_at and not self.cut and self.sent[number] >= self.cut_at
                    if cutting:
                        self.cut = True
                client.sendall(memoryview(buffer)[:count])
                if cutting:
                    _wait_read(client)
                    _reset(client, upward)
                    server.close()
                    return
        except OSError:
            pass
        for end in (client, server):
            with contextlib.suppress(OSError):
                end.close()


def _wait_read(end: socket.socket) -> None:
    """Wait until the peer of `end` (on this host) has read all that was sent to it, or `_DRAIN_SECONDS` have passed.

    Both queues are read from /proc/net/tcp: this side's send queue (what the peer has not acknowledged: a reset
    drops it) and the peer's receive queue (what it has not read).
    """
    here, there = _proc_address(end.getsockname()), _proc_address(end.getpeername())
    deadline = time.monotonic() + _DRAIN_SECONDS
    while time.monotonic() < deadline:
        try:
            rows = [line.split() for line in Path("/proc/net/tcp").read_text().splitlines()[1:]]
        except OSError:
            return
        unsent = [int(row[4].split(":")[0], 16) for row in rows if row[1] == here and row[2] == there]
        unread = [int(row[4].split(":")[1], 16) for row in rows if row[1] == there and row[2] == here]
        if not any(unsent) and not any(unread):
            return
        time.sleep(0.01)


def _proc_address(address: tuple[str, int]) -> str:
    """An IPv4 address and port as /proc/net/tcp writes them (the address's bytes in host order, hex)."""
    return f"{socket.inet_aton(address[0])[::-1].hex().upper()}:{address[1]:04X}"


def _reset(end: socket.socket, reader: threading.Thread) -> None:
    """Close with an RST (linger 0), not a FIN: the peer sees `connection reset by peer`.

    The thread blocked reading `end` is woken first (SHUT_RD sends nothing): while a read holds the socket, closing it
    would send nothing at all.
    """
    with contextlib.suppress(OSError):
        end.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        end.shutdown(socket.SHUT_RD)
    reader.join(timeout=5)
    end.close()
