"""Owns: the bytes between a client and a worker — the request, its four descriptors, and the frames after it.

Request: `OVD1`, the body's length (u32 big-endian), sent with SCM_RIGHTS carrying the caller's stdin, stdout, stderr
and a descriptor of its working directory; then the body, NUL-terminated strings: op (`call`, `status`, `stop`), build
id, umask in octal, working directory path, argc, argv..., envc, `KEY=VALUE`... Frames after it: one type byte, a u32
big-endian payload length, the payload. Worker to client: `R` refused (the call was not started: the client runs it
in-process), `Y` refused as `R` and the server retires for one the client starts (its caller is favoured over the
server: `server/schedule.py`), `P` started (the worker's pid), `X` finished (the exit status; the worker has closed its
copies of the caller's stdio first), `I` information (JSON, for status and stop). Client to worker: `S`, one byte, a
signal to deliver. The native client (`client/`) speaks the same; `client/README.md` restates it for C.
"""

from __future__ import annotations

import os
import socket
import sys
import time

__all__ = [
    "FRAME_HEADER",
    "MAGIC",
    "MAX_BODY",
    "MAX_FRAME",
    "Request",
    "WireError",
    "decode_body",
    "encode_request",
    "frame",
    "read_exact",
    "read_frame",
    "receive_request",
    "send_request",
    "split_frames",
]

MAGIC = b"OVD1"
MAX_BODY = 4 << 20
MAX_FRAME = 1 << 16
# headers are packed with int.to_bytes, not `struct`: the Python client would pay its extension module's load (0.4 ms)
FRAME_HEADER = 5  # the type byte and the u32 length
_HEADER = len(MAGIC) + 4  # the magic and the body's u32 length
OPS = ("call", "status", "stop")
_DESCRIPTORS = 4  # stdin, stdout, stderr and the working directory
_UMASK_MAX = 0o777


class Request:
    """One call as the client made it (a plain class: the Python client's path imports no dataclasses)."""

    __slots__ = ("argv", "build", "cwd", "env", "op", "umask")

    def __init__(self, *, op: str, build: str, umask: int, cwd: str, argv: list[str], env: dict[str, str]) -> None:
        """Keep the call's parts."""
        self.op, self.build, self.umask, self.cwd, self.argv, self.env = op, build, umask, cwd, argv, env


class WireError(Exception):
    """The peer broke the protocol or went away; the message says how."""


def encode_request(request: Request) -> bytes:
    """The request's header and body (the descriptors travel with the header)."""
    parts = [request.op, request.build, f"{request.umask:o}", request.cwd, str(len(request.argv)), *request.argv]
    parts += [str(len(request.env)), *(f"{key}={value}" for key, value in request.env.items())]
    body = b"".join(os.fsencode(part) + b"\0" for part in parts)
    return MAGIC + len(body).to_bytes(4, "big") + body


def send_request(sock: socket.socket, data: bytes, fds: list[int]) -> None:
    """Send the header with the descriptors, then the rest of the request."""
    sent = socket.send_fds(sock, [data[:_HEADER]], fds)
    sock.sendall(data[sent:])


def receive_request(sock: socket.socket, deadline: float | None = None) -> tuple[Request, list[int]]:
    """Read one request and its descriptors (closed again when the request is not well formed).

    With a `deadline` (time.monotonic()), the whole request must have come by then, however it trickles in
    (TimeoutError): each read waits at most what is left of it, as the socket's own timeout.
    """
    try:
        _left(sock, deadline)
        header, fds, _flags, _addr = socket.recv_fds(sock, _HEADER, 4)
        try:
            header += read_exact(sock, _HEADER - len(header), deadline)
            length = _body_length(header, fds)
            return decode_body(read_exact(sock, length, deadline)), fds
        except BaseException:
            for fd in fds:
                os.close(fd)
            raise
    finally:
        if deadline is not None:
            sock.settimeout(None)


def _left(sock: socket.socket, deadline: float | None) -> None:
    """The socket's timeout set to what is left of `deadline` (TimeoutError when nothing is)."""
    if deadline is None:
        return
    if (left := deadline - time.monotonic()) <= 0:
        raise TimeoutError("no whole request in time")
    sock.settimeout(left)


def _body_length(header: bytes, fds: list[int]) -> int:
    magic, length = header[: len(MAGIC)], int.from_bytes(header[len(MAGIC) :], "big")
    if magic != MAGIC or length > MAX_BODY:
        raise WireError("not an ocivendir request")
    if len(fds) != _DESCRIPTORS:
        raise WireError(f"expected {_DESCRIPTORS} descriptors, got {len(fds)}")
    return length


def decode_body(body: bytes) -> Request:
    """The request a body describes, or raise WireError."""
    if not body.endswith(b"\0"):
        raise WireError("the request body is not NUL-terminated")
    # as os.fsdecode() of each part: a NUL byte is never part of another character in an ASCII-compatible encoding
    parts = body[:-1].decode(sys.getfilesystemencoding(), sys.getfilesystemencodeerrors()).split("\0")
    try:
        request = _parts(parts)
    except (ValueError, IndexError) as exc:
        raise WireError("a malformed request body") from exc
    if request.op not in OPS or not 0 <= request.umask <= _UMASK_MAX:
        raise WireError("a malformed request body")
    return request


def _parts(parts: list[str]) -> Request:
    op, build, umask, cwd, argc = parts[:5]
    count = int(argc)
    argv = parts[5 : 5 + count]
    envc = int(parts[5 + count])
    env_parts = parts[6 + count :]
    if len(argv) != count or len(env_parts) != envc:
        raise ValueError(argc)
    env: dict[str, str] = {}
    for item in env_parts:
        key, sep, value = item.partition("=")
        if sep:
            env.setdefault(key, value)  # getenv() finds the first of a name given twice
    return Request(op=op, build=build, umask=int(umask, 8), cwd=cwd, argv=argv, env=env)


def frame(kind: bytes, payload: bytes = b"") -> bytes:
    """One frame's bytes."""
    return kind + len(payload).to_bytes(4, "big") + payload


def read_exact(sock: socket.socket, size: int, deadline: float | None = None) -> bytes:
    """Exactly `size` bytes, or raise WireError at EOF (TimeoutError past a `deadline`, as `receive_request`)."""
    chunks = []
    while size > 0:
        _left(sock, deadline)
        chunk = sock.recv(min(size, 1 << 16))
        if not chunk:
            raise WireError("the peer closed the connection")
        chunks.append(chunk)
        size -= len(chunk)
    return b"".join(chunks)


def read_frame(sock: socket.socket) -> tuple[bytes, bytes] | None:
    """The next frame (type, payload), None at a clean EOF; WireError for a truncated or oversized one."""
    first = sock.recv(FRAME_HEADER)
    if not first:
        return None
    kind, length = _frame_head(first + read_exact(sock, FRAME_HEADER - len(first)))
    return kind, read_exact(sock, length)


def split_frames(data: bytes) -> tuple[list[tuple[bytes, bytes]], bytes]:
    """The whole frames (type, payload) at the start of `data`, and the rest (a frame not whole yet).

    WireError for an oversized one. For a reader that takes what a socket has without waiting (`server/watch.py`).
    """
    frames = []
    while len(data) >= FRAME_HEADER:
        kind, length = _frame_head(data[:FRAME_HEADER])
        if len(data) < FRAME_HEADER + length:
            break
        frames.append((kind, data[FRAME_HEADER : FRAME_HEADER + length]))
        data = data[FRAME_HEADER + length :]
    return frames, data


def _frame_head(head: bytes) -> tuple[bytes, int]:
    kind, length = head[:1], int.from_bytes(head[1:FRAME_HEADER], "big")
    if length > MAX_FRAME:
        raise WireError("an oversized frame")
    return kind, length
