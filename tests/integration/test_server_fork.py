"""What a forked worker takes from its parent: nothing of a caller's, and no way to retire the parent's server.

A real `Server` listens in this process (a short socket directory of its own) and forks real workers from it: the
worker that serves a connection holds no other copy of it, so its caller sees the end once the worker closes its
own; a signal reaching a worker as soon as it is forked is a worker's (SIGTERM ends it) and never runs the parent's
retirement; `retire()` in any process but the one that listens removes nothing.
"""

from __future__ import annotations

import json
import os
import select
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from ocivendir.server import daemon, wire
from ocivendir.server.daemon import Server
from ocivendir.server.desk import Desk

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

    from tests.support.server import ServerPlace

pytestmark = pytest.mark.integration

_BUILD = "0123456789abcdef"
_GUARD_SECONDS = 30.0  # only turns a hang into a failure


@pytest.fixture
def server(place: ServerPlace) -> Iterator[Server]:
    """A server of this process, listening in its own directory; retired and its workers reaped at the end."""
    made = Server(str(place.dir), _BUILD, idle=0, workers=1, max_calls=1000, entry=lambda: None)
    made.claim()
    made.listen()
    try:
        yield made
    finally:
        made.retire()
        made.wait_workers()


def _status(path: str) -> socket.socket:
    """A client that sent a `status` request (its four descriptors /dev/null and /)."""
    client = socket.socket(socket.AF_UNIX)
    client.connect(path)
    request = wire.Request(op="status", build=_BUILD, umask=0o022, cwd="/", argv=[], env={})
    null, root = os.open(os.devnull, os.O_RDONLY), os.open("/", os.O_RDONLY | os.O_DIRECTORY)
    try:
        wire.send_request(client, wire.encode_request(request), [null, null, null, root])
    finally:
        os.close(null)
        os.close(root)
    return client


def test_the_worker_that_takes_a_connection_holds_the_only_copy_of_it(server: Server) -> None:
    """A worker accepts a `status` query itself, asks the parent, answers and closes; its caller sees the end.

    The parent here is this test, answering the worker's question as the loop does: it never held the connection.
    """
    worker = server._spawn()
    assert worker is not None
    client = _status(server.path)
    counted: list[int] = []  # the calls the table held when the parent answered
    facts_of = server.facts
    server.facts = lambda asking=-1: (counted.append(server.pool.calls()), facts_of(asking))[1]  # type: ignore[method-assign]
    with client:
        while not select.select([client], [], [], 0)[0]:  # it took it and, the only worker, wants a spare; it asks
            assert select.select([worker.channel, client], [], [], _GUARD_SECONDS)[0]
            server._heard(worker.channel.fileno())
        client.settimeout(_GUARD_SECONDS)
        kind, facts = wire.read_frame(client) or (b"", b"")
        assert kind == b"I"
        assert json.loads(facts)["pid"] == os.getpid()
        assert client.recv(1) == b""  # the end: no process but the worker held the connection
    # counted as taken, before it was answered (whoever answers the caller's next query finds it counted); the
    # answer does not count itself
    assert (counted, json.loads(facts)["calls"], server.pool.calls()) == ([1], 0, 1)
    server.pool.drop(worker)  # its channel closed: an idle worker ends
    _pid, status = os.waitpid(worker.pid, 0)
    assert os.WIFEXITED(status)
    assert os.WEXITSTATUS(status) == 0
    server.children.pop(worker.pid)


def test_a_status_asked_of_the_only_worker_reports_the_spare_it_wanted(place: ServerPlace) -> None:
    """The only worker takes a `status`, says `S` (none other idle) and asks; the spare is forked before the answer.

    The asker waits for the answer, busy: the parent forks the spare first, so the facts report two workers whatever
    the order the parent reads the two messages in (one wake-up or two), and the next call finds a spare.
    """
    server = Server(str(place.dir), _BUILD, idle=0, workers=2, max_calls=1000, entry=lambda: None)
    server.claim()
    server.listen()
    try:
        worker = server._spawn()
        assert worker is not None
        with _status(server.path) as client:
            while not select.select([client], [], [], 0)[0]:  # heard as the loop hears them, until answered
                assert select.select([worker.channel, client], [], [], _GUARD_SECONDS)[0]
                server._heard(worker.channel.fileno())
            client.settimeout(_GUARD_SECONDS)
            kind, facts = wire.read_frame(client) or (b"", b"{}")
        assert kind == b"I"
        assert json.loads(facts)["workers"] == 2
        assert len(server.pool.workers) == 2
    finally:
        server.retire()
        server.wait_workers()


def _forked(server: Server, monkeypatch: pytest.MonkeyPatch, body: Callable[[], object]) -> int:
    """Fork a worker from `server` (its signals trapped as `serve` traps them) that runs `body`; its wait status."""
    monkeypatch.setattr(daemon, "work", lambda *_args: body())
    previous = {signo: signal.getsignal(signo) for signo in (*daemon._RETIRE_SIGNALS, signal.SIGCHLD)}
    wake_r, wake_w = server._trap_signals()
    try:
        worker = server._spawn()
        assert worker is not None
        _pid, status = os.waitpid(worker.pid, 0)
    finally:
        signal.set_wakeup_fd(-1)
        for signo, handler in previous.items():
            signal.signal(signo, handler)
        os.close(wake_r)
        os.close(wake_w)
        server.wake = (-1, -1)
    server.children.pop(worker.pid)
    server.pool.drop(worker)
    server.pool.release(worker.slot)
    return status


def _socket_in_place(server: Server) -> bool:
    info = os.lstat(server.path)
    return (info.st_dev, info.st_ino) == server.identity


def test_a_sigterm_to_a_worker_as_soon_as_it_is_forked_ends_it_and_leaves_the_parents_socket(
    server: Server, monkeypatch: pytest.MonkeyPatch
) -> None:
    status = _forked(server, monkeypatch, lambda: os.kill(os.getpid(), signal.SIGTERM))
    assert os.WIFSIGNALED(status)
    assert os.WTERMSIG(status) == signal.SIGTERM  # as a worker's: the parent's handler never ran
    assert _socket_in_place(server)
    assert not server.retiring


def test_a_worker_holds_neither_the_parents_handlers_nor_its_wake_up_descriptor(
    server: Server, monkeypatch: pytest.MonkeyPatch
) -> None:
    def check() -> None:
        inherited = [signo for signo in daemon._RETIRE_SIGNALS if signal.getsignal(signo) == server._on_retire]
        os._exit(10 * len(inherited) + (signal.set_wakeup_fd(-1) != -1))

    status = _forked(server, monkeypatch, check)
    assert os.WIFEXITED(status)
    assert os.WEXITSTATUS(status) == 0


def test_retire_in_a_forked_worker_removes_nothing(server: Server, monkeypatch: pytest.MonkeyPatch) -> None:
    status = _forked(server, monkeypatch, server.retire)
    assert os.WIFEXITED(status)
    assert _socket_in_place(server)
    with socket.socket(socket.AF_UNIX) as client:
        client.connect(server.path)  # still listened on


def test_a_server_told_to_stop_ends_once_its_last_worker_has(place: ServerPlace) -> None:
    """SIGTERM: `serve` returns as soon as the worker it ended is reaped, not at the loop's next timeout (a minute)."""
    ready_r, ready_w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the server, in a process of its own
        try:
            os.close(ready_r)
            made = Server(str(place.dir), _BUILD, idle=0, workers=1, max_calls=1000, entry=lambda: None)
            made.desk = Desk(3600.0)  # the loop's next timeout is then a minute, past the guard
            made.claim()
            made.listen()
            os.write(ready_w, b"1")
            made.serve()
        finally:
            os._exit(0)
    os.close(ready_w)
    try:
        assert os.read(ready_r, 1) == b"1"
        with _status(str(place.dir / f"server-{_BUILD}.sock")) as client:  # answered: it serves, its worker runs
            client.settimeout(_GUARD_SECONDS)
            assert (wire.read_frame(client) or (b"",))[0] == b"I"
        os.kill(pid, signal.SIGTERM)
        ended = 0
        for _ in range(int(_GUARD_SECONDS / 0.05)):
            ended, status = os.waitpid(pid, os.WNOHANG)
            if ended:
                break
            time.sleep(0.05)
        assert ended == pid, "the server still runs after its workers ended"
        assert os.WIFEXITED(status)
    finally:
        os.close(ready_r)
        if not ended:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)


def _counted_server(place: ServerPlace, workers: int, counter: Callable[[Server], list[int]]) -> tuple[int, int]:
    """A server forked off to serve in a process of its own, `counter(server)` counting in it; (pid, report pipe)."""
    report_r, report_w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the server
        try:
            os.close(report_r)
            made = Server(str(place.dir), _BUILD, idle=0, workers=workers, max_calls=1000, entry=lambda: None)
            made.claim()
            made.listen()
            count = counter(made)
            os.write(report_w, b"1")
            made.serve()
            os.write(report_w, str(count[0]).encode())
        finally:
            os._exit(0)
    os.close(report_w)
    assert os.read(report_r, 1) == b"1"
    return pid, report_r


def _stopped_count(pid: int, report_r: int) -> int:
    """SIGTERM to the server of `_counted_server`; its count once it ended."""
    try:
        os.kill(pid, signal.SIGTERM)
        _, status = os.waitpid(pid, 0)
        assert os.WIFEXITED(status)
        return int(os.read(report_r, 100) or b"-1")
    finally:
        os.close(report_r)


def _facts(path: str) -> dict[str, object]:
    with _status(path) as client:
        client.settimeout(_GUARD_SECONDS)
        kind, facts = wire.read_frame(client) or (b"", b"{}")
    assert kind == b"I"
    return dict(json.loads(facts))


def test_the_parent_waits_for_its_children_only_after_one_ended(place: ServerPlace) -> None:
    """Wake-ups for connections and workers' questions reap nothing: waitpid runs after a SIGCHLD, not every wake-up.

    Ten status queries wake the loop ten times (each worker's question); the parent asks the kernel about its
    children once at the start and once its worker has ended, not once a wake-up.
    """

    def counter(_server: Server) -> list[int]:
        asked = [0]
        waitpid = os.waitpid

        def counted(*args: int) -> tuple[int, int]:
            asked[0] += 1
            return waitpid(*args)

        os.waitpid = counted  # type: ignore[assignment] # counted in the server's process only
        return asked

    pid, report_r = _counted_server(place, 1, counter)
    for _ in range(10):
        _facts(str(place.dir / f"server-{_BUILD}.sock"))
    assert 0 < _stopped_count(pid, report_r) < 10


def _call(path: str) -> bytes:
    """A `call` through the socket (argv `vendir`, this process's stdio and directory); the kinds of frames answered."""
    env = {name: value for name, value in os.environ.items() if name == "LANG" or name.startswith("LC_")}
    request = wire.Request(op="call", build=_BUILD, umask=0o022, cwd=str(Path.cwd()), argv=["vendir"], env=env)
    null, here = os.open(os.devnull, os.O_RDWR), os.open(".", os.O_RDONLY | os.O_DIRECTORY)
    kinds = b""
    with socket.socket(socket.AF_UNIX) as client:
        client.settimeout(_GUARD_SECONDS)
        client.connect(path)
        try:
            wire.send_request(client, wire.encode_request(request), [null, null, null, here])
        finally:
            os.close(null)
            os.close(here)
        while (answered := wire.read_frame(client)) is not None:
            kinds += answered[0]
    return kinds


_COUNTING_SERVER = """
import sys
from ocivendir.server.daemon import Server

server = Server(sys.argv[1], sys.argv[2], idle=0, workers=2, max_calls=1000, entry=lambda: None)
polls = [0]
poll = server._poll


def counted(wake_r, wait):
    polls[0] += 1
    poll(wake_r, wait)


server._poll = counted
server.claim()
server.listen()
print("ready", flush=True)
server.serve()
server.wait_workers()
print(polls[0], flush=True)
"""


def test_calls_one_after_another_do_not_wake_the_parent(place: ServerPlace) -> None:
    """The workers accept themselves: after the first call (a spare wanted), twenty calls wake the parent not once.

    The server is a fresh interpreter: forked from the test's process, its workers could pass the resident-size bound
    and retire after every call (each retirement wakes the parent, as it must).
    """
    server = subprocess.Popen([sys.executable, "-c", _COUNTING_SERVER, str(place.dir), _BUILD],
                              stdout=subprocess.PIPE, text=True)  # fmt: skip
    assert server.stdout is not None
    path = str(place.dir / f"server-{_BUILD}.sock")
    try:
        assert server.stdout.readline() == "ready\n"
        assert _call(path) == b"PX"  # the first: its worker saw no other idle and asked for a spare
        facts = _facts(path)  # a question (one wake-up): the spare is forked by its answer, if not already
        assert (facts["workers"], facts["calls"]) == (2, 1)
        for _ in range(20):
            assert _call(path) == b"PX"
        facts = _facts(path)
        assert (facts["workers"], facts["calls"], facts["busy"], facts["retired"]) == (2, 22, 0, 0)
    finally:
        server.send_signal(signal.SIGTERM)
        wakes = int(server.communicate(timeout=_GUARD_SECONDS)[0] or "-1")
    # the loop's first pass, the spare wanted, two questions, the SIGTERM, the reaping: a handful, never one a call
    assert 0 < wakes < 10


def test_an_idle_worker_takes_what_it_was_woken_for_and_ends_once_its_channel_closed(tmp_path: Path) -> None:
    """Woken alone for a connection, a worker takes it even if its parent closed the channel meanwhile.

    Nobody else was woken for it (EPOLLEXCLUSIVE). A stale answer on the channel is dropped; a closed channel with
    nothing waiting ends the worker.
    """
    from ocivendir.server.worker import _next, _waiter  # noqa: PLC0415

    path = str(tmp_path / "s.sock")
    listener = socket.socket(socket.AF_UNIX)
    listener.bind(path)
    listener.listen(4)
    listener.setblocking(False)  # noqa: FBT003 - the socket API
    parent, channel = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    waiter = _waiter(listener, channel)
    with listener, channel, socket.socket(socket.AF_UNIX) as first, socket.socket(socket.AF_UNIX) as second:
        parent.send(b'{"calls": 1}')  # an answer that came too late for its question
        first.connect(path)
        conn, gone = _next(waiter, listener, channel)
        assert conn is not None
        assert not gone
        conn.close()
        second.connect(path)
        parent.close()
        conn, gone = _next(waiter, listener, channel)
        assert conn is not None
        assert gone
        conn.close()
        assert _next(waiter, listener, channel) == (None, True)
    waiter.close()


def test_a_question_taken_by_a_worker_whose_parent_is_gone_gets_no_facts() -> None:
    """The parent closed the channel (retired, or killed) as the worker took a `status`: no server to report.

    The caller is told so (`R`: `server status` then says none runs), never handed empty facts to print.
    """
    from ocivendir.server.worker import _answer  # noqa: PLC0415

    parent, channel = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    parent.close()
    server_end, client = socket.socketpair()
    with channel, server_end, client:
        _answer(server_end, [], "status", channel, lambda: None)
        client.settimeout(_GUARD_SECONDS)
        assert (wire.read_frame(client) or (b"",))[0] == b"R"
