"""Owns: the connections the parent answers itself, when every worker is busy at the limit.

A worker is never kept waiting for them, and neither is the parent: each is read without blocking, bounded in time
(`worker.REQUEST_SECONDS`) and in number. The parent reads only the request's header and its first field, the op
(the caller's descriptors, sent with the header, are discarded by the kernel unseen: a plain `recv` takes no
ancillary data). `status` and `stop` get the server's facts (`stop` then retires the server); a `call` gets `R`
("busy"), so the client runs it in-process at once. What the client sends after the op is read and dropped until it
closes the connection, so its writes never fail.
"""

from __future__ import annotations

import json
import socket
import struct

from ocivendir.server.wire import MAGIC, MAX_BODY, frame

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

__all__ = ["Desk"]

_HEADER = struct.Struct(">4sI")
_OP_MAX = len("status") + 1
_DRAIN = 1 << 16
MAX_WAITING = 64  # beyond this many, the oldest is closed unanswered


class _Waiting:
    __slots__ = ("answered", "conn", "deadline", "head", "read")

    def __init__(self, conn: socket.socket, deadline: float) -> None:
        self.conn, self.deadline, self.head, self.answered, self.read = conn, deadline, b"", False, 0


class Desk:
    """Connections the parent is answering, by descriptor."""

    def __init__(self, seconds: float) -> None:
        """None yet; each gets `seconds` to send its op and close."""
        self.seconds = seconds
        self.waiting: dict[int, _Waiting] = {}

    def take(self, conn: socket.socket, now: float) -> None:
        """A connection to answer (non-blocking from now on)."""
        conn.setblocking(False)  # noqa: FBT003 - the socket API
        if len(self.waiting) >= MAX_WAITING:
            oldest = min(self.waiting.values(), key=lambda waiting: waiting.deadline)
            self._close(oldest)
        self.waiting[conn.fileno()] = _Waiting(conn, now + self.seconds)

    def readable(self, fd: int, facts: Callable[[], Mapping[str, object]], busy: str) -> str | None:
        """Read what arrived on `fd`; answer once the op is known. Returns the op answered, if it was just answered."""
        waiting = self.waiting.get(fd)
        if waiting is None:
            return None
        data = _receive(waiting.conn)
        if not data:
            if data is not None:  # EOF or an error: the client is done
                self._close(waiting)
            return None
        waiting.read += len(data)
        if waiting.answered:
            if waiting.read > MAX_BODY + _HEADER.size:
                self._close(waiting)
            return None
        waiting.head = (waiting.head + data)[: _HEADER.size + _OP_MAX]
        op = _op(waiting.head)
        if op is None:
            return None
        if op in ("status", "stop"):
            answer = frame(b"I", json.dumps(dict(facts()), sort_keys=True).encode())
        else:
            answer = frame(b"R", busy.encode()) if op == "call" else b""
        try:
            if not answer:
                raise ConnectionError(op)
            waiting.conn.send(answer)
        except OSError:
            self._close(waiting)
            return None
        waiting.answered = True
        return op

    def expire(self, now: float) -> float:
        """Close the connections past their deadline; seconds until the next deadline (infinite with none waiting)."""
        wait = self.seconds if self.waiting else float("inf")
        for waiting in list(self.waiting.values()):
            if waiting.deadline <= now:
                self._close(waiting)
            else:
                wait = min(wait, waiting.deadline - now)
        return wait

    def close_all(self) -> None:
        """Close every connection (the server ends)."""
        for waiting in list(self.waiting.values()):
            self._close(waiting)

    def _close(self, waiting: _Waiting) -> None:
        self.waiting.pop(waiting.conn.fileno(), None)
        waiting.conn.close()


def _receive(conn: socket.socket) -> bytes | None:
    """What arrived (b"" at EOF or on an error), None when nothing has."""
    try:
        return conn.recv(_DRAIN)
    except BlockingIOError:
        return None
    except OSError:
        return b""


def _op(head: bytes) -> str | None:
    """The op once the header and the first field are in: "" for anything that is not a request."""
    if len(head) < _HEADER.size:
        return None
    magic, _length = _HEADER.unpack(head[: _HEADER.size])
    if magic != MAGIC:
        return ""
    body = head[_HEADER.size :]
    op, sep, _rest = body.partition(b"\0")
    if not sep:
        return None if len(body) < _OP_MAX else ""
    return op.decode(errors="replace")
