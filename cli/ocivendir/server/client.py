"""Owns: the Python client — hand a call to this build's server, or say it must run in-process.

It runs before the package's heavy imports (`commands.run()`): the mode switch, the directory checks, one connection
(to a listener of this user only: SO_PEERCRED), the request with the caller's stdio and working directory, then the
frames. `OCIVENDIR_SERVER` is `on`, `off` or
`auto` (the default: on only when invoked as `vendir`, kapp-controller's call); any other value runs in-process, which
reports it. A call falls back to in-process only when the server certainly did not start it (no `P` frame); with
no server yet, one is started detached first (`server/spawn.py`: once for a burst of first calls); so it is once a
server refused the caller as favoured over it (`Y`) and retires. A call that sets
a variable acting at a program's start-up (`server/interpreter.py`) runs in-process at once and starts no server.
The native client (`client/`) does the same for the sidecar.
"""

from __future__ import annotations

import os
import socket
import sys

from ocivendir.server.build import build_id
from ocivendir.server.interpreter import startup_variable
from ocivendir.server.place import Unusable, check_dir, server_dir, socket_path
from ocivendir.server.wire import Request, WireError, encode_request, frame, read_frame, send_request

__all__ = ["call_server", "query"]

_PEERCRED = 12  # struct ucred: pid, uid and gid, three native ints
REPLACE_SECONDS = 1.0  # how long a caller a server made way for waits for it to let its lock go


def call_server(argv: list[str]) -> int | None:
    """The exit status of the call as the server ran it, or None when it must run in-process (it did not start)."""
    variable = startup_variable(os.environ)
    if variable is not None:  # no server could run it as this process was started: no server is started for it
        _fallback(argv, f"{variable} is set: it acts when a program starts")
        return None
    closed = _closed_stdio()
    if closed is not None:  # the connection would take its number and be handed over as the call's stdio
        _fallback(argv, closed)
        return None
    try:
        build, path = _place()
    except FileNotFoundError:
        _start_server()
        _fallback(argv, "no server yet; one is starting")
        return None
    except (Unusable, OSError) as exc:
        _fallback(argv, str(exc))
        return None
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM | socket.SOCK_CLOEXEC)
    try:
        return _call(
            sock, path, Request(op="call", build=build, umask=_umask(), cwd=_cwd(), argv=argv, env=dict(os.environ))
        )
    finally:
        sock.close()


def _call(sock: socket.socket, path: str, request: Request) -> int | None:
    argv = request.argv
    try:
        _connect(sock, path)
    except (FileNotFoundError, ConnectionRefusedError):
        _start_server()
        _fallback(argv, "no server yet; one is starting")
        return None
    except Unusable as exc:
        _fallback(argv, str(exc))
        return None
    except OSError as exc:
        _fallback(argv, f"cannot connect to {path}: {exc.strerror}")
        return None
    try:
        got = _hand_over(sock, request)
    except (OSError, WireError) as exc:
        _fallback(argv, f"the server did not take the call: {exc}")
        return None
    if got is None or got[0] != b"P" or len(got[1]) != 4:  # noqa: PLR2004 - a u32 pid
        reason = got[1].decode(errors="replace") if got and got[0] in b"RY" else "the server did not take the call"
        if got and got[0] == b"Y":  # favoured over the server, which retires: one started here serves us and them
            reason += (
                "; the server retires, and one at this caller's scheduling is starting"
                if _start_replacement()
                else "; the server retires, and did not let its lock go in time: none started here"
            )
        _fallback(argv, reason)
        return None
    return _wait(sock, argv, int.from_bytes(got[1], "big"))


def _connect(sock: socket.socket, path: str) -> None:
    """Connect to the socket at `path`, listened on by a process of this user (else Unusable: nothing is sent).

    The directory was checked before: a path component swapped since (a TMPDIR in a shared directory) could lead to
    another user's listener, which would be handed the call's environment, stdio and working directory.
    """
    sock.connect(path)
    uid = int.from_bytes(sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, _PEERCRED)[4:8], sys.byteorder)
    if uid != os.geteuid():
        raise Unusable(f"{path} is listened on by uid {uid}, not {os.geteuid()}")


def _place() -> tuple[str, str]:
    """This build's id and socket path; FileNotFoundError without a directory yet, Unusable or OSError otherwise."""
    directory = server_dir()
    check_dir(directory)
    build = build_id()
    return build, socket_path(directory, build)


def _hand_over(sock: socket.socket, request: Request) -> tuple[bytes, bytes] | None:
    """Send the request with the caller's descriptors over a connected socket; the worker's first frame.

    `signal` (half a millisecond, even with `enum` loaded for `socket`) is imported only once the request is sent,
    while the server hands the call to a worker; `_wait` sets its handlers once the worker has started the call.
    """
    fds = _caller_fds()
    try:
        send_request(sock, encode_request(request), fds)
    finally:
        os.close(fds[3])
    import signal  # noqa: F401, PLC0415 - see above

    return read_frame(sock)


def _closed_stdio() -> str | None:
    """Which of descriptors 0-2 is closed, if one is: the connection would take its number and be sent as it."""
    for fd in (0, 1, 2):
        try:
            os.fstat(fd)
        except OSError:
            return f"descriptor {fd} is closed"
    return None


def _caller_fds() -> list[int]:
    """Descriptors 0-2 (open: `_closed_stdio`) and one of the working directory."""
    return [0, 1, 2, os.open(".", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)]


def _umask() -> int:
    umask = os.umask(0)
    os.umask(umask)
    return umask


def _prog(argv: list[str]) -> str:
    name = os.path.basename(argv[0]) if argv else ""
    return name if name in ("vendir", "imgpkg") else "ocivendir"


def _cwd() -> str:
    try:
        return os.getcwd()
    except OSError:
        return ""


def _wait(sock: socket.socket, argv: list[str], pid: int) -> int:
    """Forward signals until the worker reports its status; a worker that ends without one fails the call.

    A signal this process was started with ignored (`nohup`, a background job) is not forwarded: in-process it would
    be ignored, so the call goes on.
    """
    import signal  # noqa: PLC0415 - loaded while the request went out (_hand_over)

    forwarded: list[int] = []

    def forward(signo: int, _frame: object) -> None:
        forwarded.append(signo)
        try:
            sock.sendall(frame(b"S", bytes([signo])))
        except OSError:
            pass

    for signo in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        if signal.getsignal(signo) != signal.SIG_IGN:  # one the caller was started with ignored (nohup) stays so
            signal.signal(signo, forward)
    try:
        while (got := read_frame(sock)) is not None:
            kind, payload = got
            if kind == b"X" and len(payload) == 4:  # noqa: PLR2004 - a u32 status
                return int.from_bytes(payload, "big") & 0xFF
    except (OSError, WireError):
        pass
    if forwarded:
        signal.signal(forwarded[-1], signal.SIG_DFL)
        os.kill(os.getpid(), forwarded[-1])
    from ocivendir.output import write_stderr  # noqa: PLC0415 - only when a worker died

    write_stderr(
        f"{_prog(argv)}: Error: ocivendir server: the call ended without an exit status (worker {pid} stopped)\n"
    )
    return 1


def _fallback(argv: list[str], reason: str) -> None:
    if log := os.environ.get("OCIVENDIR_SERVER_LOG"):
        from ocivendir.server.log import append  # noqa: PLC0415 - only with a log, only when not served

        append(log, f"client: runs {_prog(argv)} in-process: {reason}")
    if "--debug" in argv:
        from ocivendir.output import write_stderr  # noqa: PLC0415

        write_stderr(f"{_prog(argv)}: debug: ocivendir server unavailable ({reason}); running in-process\n")


def _start_server() -> None:
    from ocivendir.server.spawn import start_server  # noqa: PLC0415 - only when no server runs

    try:
        start_server(server_dir(), build_id())  # none when another call of the burst is starting one
    except (OSError, Unusable):
        pass  # the call runs in-process anyway


def _start_replacement() -> bool:
    """Start a server once the one that made way for this caller has let its lock go (within REPLACE_SECONDS).

    False when it did not in time (the next call starts one, or finds it serving).
    """
    import time  # noqa: PLC0415 - only when a server makes way

    from ocivendir.fs.locks import is_held  # noqa: PLC0415
    from ocivendir.server.place import lock_path  # noqa: PLC0415

    directory, build = server_dir(), build_id()
    deadline = time.monotonic() + REPLACE_SECONDS
    while is_held(lock_path(directory, build)):
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.005)
    _start_server()
    return True


def query(op: str) -> dict[str, object] | None:
    """The answer of this build's server to `status` or `stop` (its facts), or None when no usable server answers."""
    import json  # noqa: PLC0415 - `server status` and `stop` only

    try:
        build, path = _place()
    except (Unusable, OSError):
        return None
    request = Request(op=op, build=build, umask=_umask(), cwd=_cwd(), argv=[], env={})
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM | socket.SOCK_CLOEXEC) as sock:
        try:
            _connect(sock, path)
            got = _hand_over(sock, request)
        except (OSError, WireError, Unusable):
            return None
    if got is None or got[0] != b"I":
        return None
    answer = json.loads(got[1])
    return answer if isinstance(answer, dict) else None
