"""Owns: a reused worker — it serves the connections its parent hands it, one after another, each in its caller's world.

The parent hands a worker an accepted connection over the worker's own channel (a SOCK_SEQPACKET pair: the
connection's descriptor by SCM_RIGHTS, the server's facts as JSON). The worker reads the request within
`REQUEST_SECONDS` (a connection that sends nothing frees the worker again), puts the caller's world in place
(`server/world.py`), sends `P`, runs the entry point it was handed (the CLI's `main`: the worker never imports the
command layer), flushes, puts its own world back, sends `X` and tells its parent `D` (ready again). After each call it
checks what the call may have left behind (`server/leaks.py`); with a reason to retire it tells its parent `E` and
the reason instead, and exits once the caller has its answer.

Before the `P` frame nothing of the call has run, so a client that sees the connection end earlier runs it
in-process; after it, the call is the worker's. The worker closes its copies of the caller's stdio before it sends
the exit status, so a reader of the caller's stdout sees EOF as soon as the client exits. The worker's resident
listener (`server/watch.py`) listens to the client during the call: a forwarded signal is raised in the worker, and a
client that goes away (killed) ends the worker with SIGTERM.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import struct
import threading
import time

from ocivendir.server import ownstatus
from ocivendir.server.identity import mismatch
from ocivendir.server.leaks import Baseline
from ocivendir.server.watch import Watcher
from ocivendir.server.wire import Request, WireError, frame, receive_request
from ocivendir.server.world import World

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import NoReturn

__all__ = ["REQUEST_SECONDS", "TEST_LEAK", "Entry", "work"]

REQUEST_SECONDS = 5.0  # a connection that has not sent its whole request by then is closed unanswered
TEST_LEAK = "OCIVENDIR_SERVER_TEST_LEAK"  # the suite's hook: `thread`, `descriptor`, `environ` left, or `raise`
_CHANNEL_MESSAGE = 1 << 16

if TYPE_CHECKING:
    Entry = Callable[[], object]
else:
    Entry = object


def work(channel: socket.socket, build: str, entry: Entry, max_calls: int) -> NoReturn:
    """Serve the connections the parent hands over until it closes the channel or the worker must retire."""
    world = World()
    watcher = Watcher()  # before the baseline: its thread is one of the worker's own
    baseline = Baseline()
    calls = 0
    while True:
        handed = _next(channel)
        if handed is None:
            os._exit(0)
        conn, facts = handed
        try:
            outcome = _serve(conn, build, facts, entry, world, watcher)
            if outcome is None:  # nothing of a call ran
                if not _tell(channel, b"D"):
                    os._exit(0)
                continue
            calls += 1
            code, reason, status = outcome
            reason = (
                reason
                or baseline.left_behind(conn.fileno(), status)
                or world.changed()
                or baseline.retire_reason(calls, max_calls, status)
            )
            # the parent hears first: a caller that has its answer and calls again finds this worker ready; a parent
            # that is gone (stopped, killed) hands nothing more over, but this caller still gets its answer
            if not _tell(channel, b"E" + reason.encode(errors="replace")[:4096] if reason else b"D"):
                reason = reason or "the server is gone"
            try:
                conn.sendall(frame(b"X", struct.pack(">I", code)))
            except OSError:
                pass
        finally:
            conn.close()
        if reason:
            os._exit(0)


def _next(channel: socket.socket) -> tuple[socket.socket, bytes] | None:
    """The next connection and the parent's facts (JSON, decoded only for `status`/`stop`); None when it is gone."""
    try:
        message, fds, _flags, _address = socket.recv_fds(channel, _CHANNEL_MESSAGE, 1)
    except OSError:
        return None
    if not message or len(fds) != 1:
        for fd in fds:
            os.close(fd)
        return None
    # the parent accepted it from its AF_UNIX stream listener: said here, the kernel is not asked (3 system calls)
    return socket.socket(socket.AF_UNIX, socket.SOCK_STREAM, 0, fileno=fds[0]), message


def _tell(channel: socket.socket, message: bytes) -> bool:
    """Say `message` to the parent; False when it is gone (it will hand nothing more over)."""
    try:
        channel.send(message)
    except OSError:
        return False
    return True


def _serve(
    conn: socket.socket, build: str, facts: bytes, entry: Entry, world: World, watcher: Watcher
) -> tuple[int, str | None, ownstatus.Status | None] | None:
    """One connection, up to its answer: None when no call ran, else its exit status, reason to retire, /proc status.

    The reason is None when there is none; the status is the worker's own, read once after the call ended for every
    check that needs it (None if the call did not end). The caller's stdio is let go and the worker's own world is
    back in place when it returns.
    """
    try:
        request, fds = _receive(conn)
    except (WireError, OSError):
        return None
    if request.op != "call" and request.build == build:
        _answer(conn, fds, request.op, facts)
        return None
    if (refusal := _refusal(conn, request, build)) is not None:
        _refuse(conn, fds, refusal)
        return None
    try:
        world.enter(request, fds)
    except OSError as exc:
        _refuse(conn, [], f"cannot enter the caller's working directory: {exc.strerror}")
        return None
    try:
        conn.sendall(frame(b"P", struct.pack(">I", os.getpid())))
    except OSError:  # the client is gone before anything ran
        world.leave()
        return None
    code: int = 1
    reason: str | None = "the call did not end"
    status = None
    try:
        watcher.watch(conn)
        code, reason = _run(_plant(request, entry))
        status = ownstatus.read()  # one read for the masks, the thread count and the resident size
        reason = reason or world.signals_changed(status) or world.environ_changed()
    finally:
        watcher.stop()
        code = _flush(code)
        world.leave(restore_all=reason is not None)
    return code, reason, status


def _refusal(conn: socket.socket, request: Request, build: str) -> str | None:
    """Why this worker must not run the call, or None: another build, or a caller whose rights differ from ours."""
    if request.build != build:
        return f"build {request.build} asked of a server of build {build}"
    return mismatch(conn, request.env)  # the caller's credentials, limits and start-up settings are ours


def _receive(conn: socket.socket) -> tuple[Request, list[int]]:
    """The request, read within REQUEST_SECONDS in all (a per-read timeout would let a trickling client hold on)."""
    return receive_request(conn, time.monotonic() + REQUEST_SECONDS)


def _refuse(conn: socket.socket, fds: list[int], reason: str) -> None:
    """Close the call's descriptors and say it was not started (`R`): the client runs it in-process."""
    for fd in fds:
        os.close(fd)
    try:
        conn.sendall(frame(b"R", reason.encode()))
    except OSError:
        pass


def _answer(conn: socket.socket, fds: list[int], op: str, facts: bytes) -> None:
    """`status` and `stop`: the server's facts as the parent had them at the hand-over; `stop` retires the parent."""
    for fd in fds:
        os.close(fd)
    if op == "stop":
        os.kill(os.getppid(), signal.SIGTERM)
    try:
        decoded = json.loads(facts)
    except ValueError:
        decoded = {}
    try:
        conn.sendall(frame(b"I", json.dumps(decoded if isinstance(decoded, dict) else {}, sort_keys=True).encode()))
    except OSError:
        pass


def _run(entry: Entry) -> tuple[int, str | None]:
    """The entry point's exit status as Python reports it, and what escaped it (a reason to retire) if anything."""
    try:
        entry()
    except SystemExit as exc:
        return _status(exc.code), None
    except BaseException as exc:  # noqa: BLE001 - main() maps every failure; what escapes it is reported as Python would
        import traceback  # noqa: PLC0415

        traceback.print_exc()
        return 1, f"the call raised {type(exc).__name__}"
    return 0, None


def _status(code: object) -> int:
    if code is None:
        return 0
    if isinstance(code, int):
        return code & 0xFF
    from ocivendir.output import write_stderr  # noqa: PLC0415

    write_stderr(f"{code}\n")
    return 1


def _flush(code: int) -> int:
    from ocivendir.output import flush_streams  # noqa: PLC0415

    if not flush_streams() and code == 0:
        return 120  # what the interpreter returns when flushing stdout fails at exit
    return code


def _plant(request: Request, entry: Entry) -> Entry:
    """The suite's hook: leave a thread, a descriptor or an environment variable behind, or raise from the call."""
    leak = request.env.get(TEST_LEAK)
    if leak == "thread":
        threading.Thread(target=threading.Event().wait, name="planted", daemon=True).start()
    elif leak == "descriptor":
        os.open(os.devnull, os.O_RDONLY)
    elif leak == "environ":
        os.environ["OCIVENDIR_PLANTED"] = "1"
    elif leak == "raise":
        return _raise
    return entry


def _raise() -> None:
    raise RuntimeError(TEST_LEAK)
