"""Owns: a reused worker — it takes connections from the server's socket, one after another, each in its caller's world.

An idle worker waits on the listening socket (EPOLLEXCLUSIVE: one idle worker is woken per connection) and on its
channel to the parent (a SOCK_SEQPACKET pair), and says in its slot of the shared table whether it is idle or busy
(`server/slots.py`). It accepts, checks that the peer has its uid (SO_PEERCRED), tells the parent `S` when no other
worker is idle (a spare is wanted), reads the request within `REQUEST_SECONDS` (a connection that sends nothing frees
the worker again), puts the caller's world in place (`server/world.py`), sends `P`, runs the entry point it was
handed (the CLI's `main`: the worker never imports the command layer), flushes, puts its own world back and sends
`X`. After each call it checks what the call may have left behind (`server/leaks.py`); with a reason to retire it
tells its parent `E` and the reason first, and exits once the caller has its answer. `status` and `stop` are asked
of the parent (`Q`), whose facts they report. A channel the parent closed (the worker expired, the server retiring
or gone) ends the worker once the connection it was woken for, if any, is answered; a parent killed, every worker
(busy or idle) shuts the listening socket down at once, so new calls are refused rather than queued (`_parent`).

Before the `P` frame nothing of the call has run, so a client that sees the connection end earlier runs it
in-process; after it, the call is the worker's. The worker closes its copies of the caller's stdio before it sends
the exit status, so a reader of the caller's stdout sees EOF as soon as the client exits. The worker's resident
listener (`server/watch.py`) listens to the client during the call: a forwarded signal is raised in the worker, and a
client that goes away (killed) ends the worker with SIGTERM.
"""

from __future__ import annotations

import json
import logging
import os
import select
import socket
import struct
import threading
import time

import ocivendir.flagscan  # noqa: F401 - place.manages_server's scanner, loaded here: a module a call imports retires it
from ocivendir.registry import keptpools
from ocivendir.registry.watchdog import WATCHDOG
from ocivendir.server import ownstatus, schedule
from ocivendir.server.identity import check
from ocivendir.server.interpreter import TEST_HOOKS
from ocivendir.server.leaks import Baseline
from ocivendir.server.place import manages_server
from ocivendir.server.selfpaths import names_own_descriptors
from ocivendir.server.slots import BUSY, IDLE, Slots
from ocivendir.server.watch import Watcher
from ocivendir.server.wire import Request, WireError, frame, receive_request
from ocivendir.server.world import World

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import NoReturn

    from ocivendir.server.schedule import Scheduling

__all__ = ["REQUEST_SECONDS", "TEST_LEAK", "Entry", "take", "work"]

REQUEST_SECONDS = 5.0  # a connection that has not sent its whole request by then is closed unanswered
TEST_LEAK = "OCIVENDIR_SERVER_TEST_LEAK"  # the suite's hook: `thread`, `descriptor`, `environ` left, or `raise`
# whether the hook acts: only in a server started by hand with TEST_HOOKS=1 (read as the server starts: the daemon
# imports this module before it takes a call, whose environment is the caller's)
_HOOKS = os.environ.get(TEST_HOOKS) == "1"
_CHANNEL_MESSAGE = 1 << 16
_PEERCRED = struct.Struct("3i")
_ACCEPT_PAUSE = 0.1  # seconds, after an accept that failed for want of a descriptor or memory
_log = logging.getLogger("ocivendir.server")

if TYPE_CHECKING:
    Entry = Callable[[], object]
else:
    Entry = object


def work(channel: socket.socket, listener: socket.socket, slot: tuple[Slots, int], build: str, entry: Entry,
         max_calls: int) -> NoReturn:  # fmt: skip
    """Serve connections from `listener` until the parent closes the channel or the worker must retire."""
    slots, index = slot
    world = World()
    watcher = Watcher(_parent(listener))  # before the baseline: its thread and the pidfd are the worker's own
    waiter = _waiter(listener, channel)  # before the baseline too: its descriptor is the worker's own
    keptpools.serve_calls()  # idle registry connections stay open for the next call that would make them
    baseline = Baseline()
    WATCHDOG.start()  # after the baseline (a resident thread), before any call: at the worker's own scheduling
    calls = 0
    served = time.monotonic()  # the last call this worker ran ended then (its birth at first): its idle time's start
    while True:
        slots.mark(index, IDLE, served)
        conn, parent_gone = _next(waiter, listener, channel)
        if conn is None:
            os._exit(0)
        slots.mark(index, BUSY, time.monotonic())
        slots.served(index)  # counted as taken, before any answer: a caller's next query finds it counted
        if not parent_gone and not slots.any_idle(but=index):
            parent_gone = not _tell(channel, b"S")  # a spare wanted: the parent forks it beside this call
            _log.debug("took a connection, no other worker idle: a spare asked for")
        else:
            _log.debug("took a connection%s", " (the parent gone)" if parent_gone else "")
        # idle again before its caller has an answer or sees the end: that caller's next connection finds this worker,
        # not a parent that counts every worker busy and answers "busy" (a worker leaving keeps its slot busy)
        # a connection that runs no call (refused, a status query) leaves the worker idle since its last call: a
        # server whose every caller it refuses (a caller unlike the one that started it) still retires when idle
        unused = _ready(slots, index, served) if not parent_gone else _nothing
        ready = _ready(slots, index) if not parent_gone else _nothing
        try:
            outcome = _serve(conn, build, channel, entry, world, watcher, unused)
            if outcome is None:  # nothing of a call ran
                if parent_gone:
                    os._exit(0)
                unused()
                continue
            served = time.monotonic()
            calls += 1
            code, reason, status = outcome
            _log.debug("call %d ended: exit status %d", calls, code)
            reason = (
                reason
                or baseline.left_behind(conn.fileno(), status)
                or world.changed()
                or baseline.retire_reason(calls, max_calls, status)
                or ("the server is gone" if parent_gone else None)
            )
            # the parent hears first: a caller that has its answer and asks for `status` finds this retirement in it
            if reason and not parent_gone:
                _tell(channel, b"E" + reason.encode(errors="replace")[:4096])
            elif not reason:  # a worker woken for the caller's next call sees this one idle (no spare)
                ready()
            try:
                conn.sendall(frame(b"X", struct.pack(">I", code)))
            except OSError:
                pass
        finally:
            conn.close()
        if reason:
            os._exit(0)


def _ready(slots: Slots, index: int, since: float | None = None) -> Callable[[], None]:
    """What marks this worker idle in its slot: idle since `since`, or since the moment it is called."""
    return lambda: slots.mark(index, IDLE, time.monotonic() if since is None else since)


def _nothing() -> None:
    """A worker whose parent is gone stays busy in its slot until it is reaped: it takes nothing more."""


def _parent(listener: socket.socket) -> tuple[int, Callable[[], object]] | None:
    """A pidfd of the server's parent process, and what to do once it has ended: shut the listening socket down.

    Every worker holds a copy of the listening socket. A parent that retires removes its name, so new calls go
    elsewhere; one killed (-9) leaves both, and a busy worker would keep the socket listening for the rest of its call
    while new calls wait in its queue. Shut down, the socket refuses them at once (the client runs them in-process
    and starts a new server); connections already queued can still be taken. None without pidfds (before Linux 5.3).
    """
    try:
        pidfd = os.pidfd_open(os.getppid())
    except OSError:
        return None

    def shut() -> None:
        try:
            listener.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass

    return pidfd, shut


def _waiter(listener: socket.socket, channel: socket.socket) -> select.epoll:
    """What an idle worker waits on: a connection (this worker woken alone for it) or its channel."""
    waiter = select.epoll(2)
    try:
        waiter.register(listener.fileno(), select.EPOLLIN | select.EPOLLEXCLUSIVE)
    except OSError:  # a kernel before 4.5: every idle worker is woken, one accepts, the others find nothing
        waiter.register(listener.fileno(), select.EPOLLIN)
    waiter.register(channel.fileno(), select.EPOLLIN)
    return waiter


def _next(waiter: select.epoll, listener: socket.socket, channel: socket.socket) -> tuple[socket.socket | None, bool]:
    """The next connection (None: none, the parent gone) and whether the parent is gone (the channel closed).

    A worker woken for a connection takes it even when its channel closed meanwhile: being woken, it may be the
    only one that was (EPOLLEXCLUSIVE), and the connection would otherwise wait for the next one to arrive. Waiting,
    it wakes to close the registry connections it kept that have been idle too long (`registry/keptpools.py`).
    """
    while True:
        wait = keptpools.next_expiry()
        ready = dict(waiter.poll(-1 if wait is None else wait))
        if not ready:  # idle registry connections due to close (`registry/keptpools.py`)
            keptpools.expire()
            continue
        parent_gone = channel.fileno() in ready and _closed(channel)
        if listener.fileno() in ready or parent_gone:
            conn = take(listener)
            if conn is not None:
                return conn, parent_gone
            if parent_gone:
                return None, True


def take(listener: socket.socket) -> socket.socket | None:
    """One connection from `listener`, of a peer with this process's uid (SO_PEERCRED); None when there is none to take.

    None too when another process took it first (a lost race), when the peer is another user's (closed, logged) and
    after an accept that failed for want of a descriptor or memory (EMFILE, ENFILE, ENOMEM): then after a pause, not
    a spin, with the connection still queued for whoever looks next. The worker's loop and the parent's desk both
    take connections so.
    """
    try:
        conn, _address = listener.accept()  # blocking: accept4(2) does not pass the listener's O_NONBLOCK on
    except (BlockingIOError, InterruptedError, ConnectionAbortedError):
        return None
    except OSError as exc:
        _log.warning("cannot accept a connection: %s", exc)
        time.sleep(_ACCEPT_PAUSE)
        return None
    _pid, uid, _gid = _PEERCRED.unpack(conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, _PEERCRED.size))
    if uid != os.geteuid():
        _log.warning("refused a connection from uid %d", uid)
        conn.close()
        return None
    return conn


def _closed(channel: socket.socket) -> bool:
    """Whether the parent closed `channel` (what else it holds, a stale answer to a question, is dropped)."""
    while True:
        try:
            message = channel.recv(_CHANNEL_MESSAGE, socket.MSG_DONTWAIT)
        except BlockingIOError:
            return False
        except OSError:
            return True
        if not message:
            return True


def _tell(channel: socket.socket, message: bytes) -> bool:
    """Say `message` to the parent; False when it is gone (it will hand nothing more over)."""
    try:
        channel.send(message)
    except OSError:
        return False
    return True


def _ask(channel: socket.socket, op: str) -> bytes | None:
    """The parent's facts (JSON) for `op` (`status`, `stop`: the parent then retires); None when it cannot answer.

    It cannot once it closed the channel (retired, killed) or when it did not answer in time.
    """
    if not _tell(channel, b"Q" + op.encode()):
        _log.debug("%s asked: the parent is gone", op)
        return None
    answer = select.poll()
    answer.register(channel, select.POLLIN)
    if not answer.poll(int(REQUEST_SECONDS * 1000)):
        _log.warning("%s asked: the parent did not answer in %.0f s", op, REQUEST_SECONDS)
        return None
    try:
        return channel.recv(_CHANNEL_MESSAGE) or None
    except OSError:
        return None


def _serve(
    conn: socket.socket,
    build: str,
    channel: socket.socket,
    entry: Entry,
    world: World,
    watcher: Watcher,
    ready: Callable[[], None],
) -> tuple[int, str | None, ownstatus.Status | None] | None:
    """One connection, up to its answer: None when no call ran, else its exit status, reason to retire, /proc status.

    The reason is None when there is none; the status is the worker's own, read once after the call ended for every
    check that needs it (None if the call did not end). The caller's stdio is let go and the worker's own world is
    back in place when it returns.
    """
    try:
        request, fds = _receive(conn)
    except (WireError, OSError) as exc:
        _log.debug("closed a connection without a request: %s", exc)
        return None
    if request.op != "call" and request.build == build:
        _answer(conn, fds, request.op, channel, ready)
        return None
    if isinstance(caller := _admission(conn, request, build), str):
        ready()
        _refuse(conn, fds, caller)
        return None
    if not _enter(conn, channel, world, (request, fds, caller), ready):
        return None
    try:
        conn.sendall(frame(b"P", struct.pack(">I", os.getpid())))
    except OSError:  # the client is gone before anything ran
        world.leave()
        if world.stuck is not None:  # the caller's priority, which it cannot lower again: it would serve the next so
            _retire_now(conn, channel, world.stuck)
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


def _admission(conn: socket.socket, request: Request, build: str) -> str | Scheduling:
    """Why this worker must not run the call (another build, a `server …` command, or a caller unlike us); else the
    caller's scheduling, for the worker to take on.

    No client sends a `server` command (`place.manages_server`); one made by hand would start a server from the
    caller's environment, or make this worker one. A call naming its own process's descriptors (`/dev/fd/3`) would
    reach this worker's (`server/selfpaths.py`). A caller unlike us has other rights (`identity.check`).
    """  # noqa: D205
    if request.build != build:
        return f"build {request.build} asked of a server of build {build}"
    if manages_server(request.argv):
        return "a server command runs in the caller's own process"
    if (own := names_own_descriptors(request.argv, request.env, request.cwd)) is not None:
        return own
    return check(conn, request.env)  # the caller's credentials, limits and start-up settings are ours


def _enter(conn: socket.socket, channel: socket.socket, world: World,
           call: tuple[Request, list[int], Scheduling], ready: Callable[[], None]) -> bool:  # fmt: skip
    """The caller's world in place for its call (True); else the call refused, the worker's own world kept.

    A caller whose scheduling this worker cannot take on is refused; one favoured over the server makes it retire
    (`Y`): a server started with that caller's scheduling serves it and takes on the others'. A worker that could not
    put its own scheduling back retires at once.
    """
    request, fds, caller = call
    try:
        world.enter(request, fds)
    except OSError as exc:
        ready()
        _refuse(conn, [], f"cannot enter the caller's working directory: {exc.strerror}")
        return False
    if (refused := world.take_on(caller)) is None:
        return True
    world.leave()
    if refused.stuck is None:
        ready()
    if refused.favoured:  # the parent first: it lets its lock go while the caller hears it is to start a server
        _log.info("refused a caller favoured over this server: the server retires for one started by such a caller")
        _tell(channel, b"Y")
    _refuse(conn, [], refused.reason, b"Y" if refused.favoured else b"R")
    if refused.stuck is not None:
        _retire_now(conn, channel, refused.stuck)
    return False


def _retire_now(conn: socket.socket, channel: socket.socket, reason: str) -> NoReturn:
    """Retire before a call ran: the worker's own scheduling is not back (`World.stuck`), so it serves nothing more."""
    _tell(channel, b"E" + reason.encode(errors="replace")[:4096])
    conn.close()
    os._exit(0)


def _receive(conn: socket.socket) -> tuple[Request, list[int]]:
    """The request, read within REQUEST_SECONDS in all (a per-read timeout would let a trickling client hold on)."""
    return receive_request(conn, time.monotonic() + REQUEST_SECONDS)


def _refuse(conn: socket.socket, fds: list[int], reason: str, kind: bytes = b"R") -> None:
    """Close the call's descriptors and say it was not started (`R`, or `Y`: start a server of your own, this one
    retires): the client runs it in-process.
    """  # noqa: D205
    _log.debug("refused a call: %s", reason)
    for fd in fds:
        os.close(fd)
    try:
        conn.sendall(frame(kind, reason.encode()))
    except OSError:
        pass


def _answer(conn: socket.socket, fds: list[int], op: str, channel: socket.socket, ready: Callable[[], None]) -> None:
    """`status` and `stop`: the server's facts, as the parent has them; `stop` retires the parent.

    With no facts from the parent (it retired or was killed as this worker took the question), there is no server to
    report: the caller is told so (`R`, and `server status` says none runs) rather than handed empty facts.
    """
    for fd in fds:
        os.close(fd)
    facts = _ask(channel, "stop" if op == "stop" else "status")  # asked busy: a spare it wanted is in the facts
    ready()
    try:
        decoded = json.loads(facts) if facts else None
    except ValueError:
        decoded = None
    if not isinstance(decoded, dict) or not decoded:
        _refuse(conn, [], "the server is retiring")
        return
    try:
        conn.sendall(frame(b"I", json.dumps(decoded, sort_keys=True).encode()))
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
    """The suite's hook: leave a thread, a descriptor or an environment variable behind, or raise from the call.

    `scheduling` reports the scheduling the call runs with instead of running it (on stderr, as JSON). Honoured only
    by a server whose starter switched it on (TEST_HOOKS); any other ignores the call's TEST_LEAK.
    """
    if not _HOOKS:
        return entry
    leak = request.env.get(TEST_LEAK)
    if leak == "thread":
        threading.Thread(target=threading.Event().wait, name="planted", daemon=True).start()
    elif leak == "descriptor":
        os.open(os.devnull, os.O_RDONLY)
    elif leak == "environ":
        os.environ["OCIVENDIR_PLANTED"] = "1"
    elif leak == "raise":
        return _raise
    elif leak == "scheduling":
        return _report_scheduling
    return entry


def _raise() -> None:
    raise RuntimeError(TEST_LEAK)


def _report_scheduling() -> None:
    from ocivendir.output import write_stderr  # noqa: PLC0415

    now = schedule.of(0)
    write_stderr(json.dumps({"pid": os.getpid(), "nice": now.nice, "policy": now.policy, "priority": now.priority,
                             "cpus": sorted(now.cpus), "io": now.io}) + "\n")  # fmt: skip
