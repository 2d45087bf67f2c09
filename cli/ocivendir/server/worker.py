"""Owns: one call in a forked worker — the caller's world put in place, the entry point run, the status sent back.

The caller's descriptors, directory, umask, environment and argv replace the server's before anything runs.

Before the `P` frame nothing of the call has run, so a client that sees the connection end earlier runs it
in-process; after it, the call is the worker's. The worker closes its copies of the caller's stdio before it sends
the exit status, so a reader of the caller's stdout sees EOF as soon as the client exits. A thread listens to the
client: a forwarded signal is raised in the worker, and a client that goes away (killed) ends the worker with
SIGTERM — which, as for the in-process program, a kill at any moment leaves target and cache intact.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import struct
import sys
import threading
import time

from ocivendir.server.identity import mismatch
from ocivendir.server.wire import Request, WireError, frame, read_frame, receive_request

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import NoReturn

__all__ = ["serve_connection"]

FORWARDED = frozenset({signal.SIGTERM, signal.SIGINT, signal.SIGHUP})
_finished = threading.Event()


def serve_connection(conn: socket.socket, build: str, facts: Mapping[str, object]) -> NoReturn:
    """Serve one connection in a freshly forked worker; never returns."""
    try:
        request, fds = receive_request(conn)
    except (WireError, OSError):
        os._exit(0)
    if request.build != build:
        _refuse(conn, fds, f"build {request.build} asked of a server of build {build}")
    if request.op != "call":
        _answer(conn, fds, request.op, facts)
    if (reason := mismatch(conn, request.env)) is not None:  # the caller's rights and start-up settings are ours
        _refuse(conn, fds, reason)
    try:
        os.fchdir(fds[3])
    except OSError as exc:
        _refuse(conn, fds, f"cannot enter the caller's working directory: {exc.strerror}")
    _adopt(request, fds)
    conn.sendall(frame(b"P", struct.pack(">I", os.getpid())))
    threading.Thread(target=_listen, args=(conn,), name="ocivendir-client", daemon=True).start()
    _finish(conn, _run())


def _refuse(conn: socket.socket, fds: list[int], reason: str) -> NoReturn:
    for fd in fds:
        os.close(fd)
    try:
        conn.sendall(frame(b"R", reason.encode()))
    finally:
        os._exit(0)


def _answer(conn: socket.socket, fds: list[int], op: str, facts: Mapping[str, object]) -> NoReturn:
    """`status` and `stop`: the server's facts as the parent had them at the fork; `stop` retires the parent."""
    for fd in fds:
        os.close(fd)
    if op == "stop":
        os.kill(os.getppid(), signal.SIGTERM)
    try:
        conn.sendall(frame(b"I", json.dumps(dict(facts), sort_keys=True).encode()))
    finally:
        os._exit(0)


def _adopt(request: Request, fds: list[int]) -> None:
    """The caller's stdio on 0-2, umask, exact environment and argv; the server's signal handling undone."""
    for target, fd in enumerate(fds[:3]):
        os.dup2(fd, target)
    for fd in fds:
        if fd > 2:  # noqa: PLR2004 - a received descriptor never lands on 0-2 while those are open
            os.close(fd)
    os.umask(request.umask)
    os.environ.clear()
    os.environ.update(request.env)
    time.tzset()
    sys.argv = list(request.argv) or ["ocivendir"]
    signal.set_wakeup_fd(-1)
    for signo in (signal.SIGTERM, signal.SIGHUP, signal.SIGCHLD):
        signal.signal(signo, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    from ocivendir.output import rebind_stdio  # noqa: PLC0415 - the output layer owns the streams

    rebind_stdio()


def _run() -> int:
    """The ordinary entry point; its exit status as Python reports it."""
    from ocivendir.commands import main  # noqa: PLC0415 - loaded by the server already

    try:
        main()
    except SystemExit as exc:
        return _status(exc.code)
    except BaseException:  # noqa: BLE001 - main() maps every failure; what escapes it is reported as Python would
        import traceback  # noqa: PLC0415

        traceback.print_exc()
        return 1
    return 0


def _status(code: object) -> int:
    if code is None:
        return 0
    if isinstance(code, int):
        return code & 0xFF
    from ocivendir.output import write_stderr  # noqa: PLC0415

    write_stderr(f"{code}\n")
    return 1


def _finish(conn: socket.socket, code: int) -> NoReturn:
    """Flush, let go of the caller's stdio, then report the status and end (no finalization: nothing is left to do)."""
    from ocivendir.output import flush_streams  # noqa: PLC0415

    if not flush_streams() and code == 0:
        code = 120  # what the interpreter returns when flushing stdout fails at exit
    _finished.set()
    null = os.open(os.devnull, os.O_RDWR)
    for target in (0, 1, 2):
        os.dup2(null, target)
    try:
        conn.sendall(frame(b"X", struct.pack(">I", code)))
    except OSError:
        pass
    os._exit(code)


def _listen(conn: socket.socket) -> None:
    """Signals the client forwards; the client gone before the end stops the worker."""
    try:
        while (got := read_frame(conn)) is not None:
            kind, payload = got
            if kind == b"S" and len(payload) == 1 and payload[0] in FORWARDED:
                os.kill(os.getpid(), payload[0])
    except (WireError, OSError):
        pass
    if not _finished.is_set():
        os.kill(os.getpid(), signal.SIGTERM)
