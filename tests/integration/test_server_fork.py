"""What a forked worker takes from its parent: nothing of a caller's, and no way to retire the parent's server.

A real `Server` listens in this process (a short socket directory of its own) and forks real workers from it: the
worker that serves a connection holds no other copy of it, so its caller sees the end once the worker closes its
own; a signal reaching a worker as soon as it is forked is a worker's (SIGTERM ends it) and never runs the parent's
retirement; `retire()` in any process but the one that listens removes nothing.
"""

from __future__ import annotations

import os
import signal
import socket
import time
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


def test_the_worker_forked_for_a_connection_holds_no_other_copy_of_it(server: Server) -> None:
    """The first connection, with no worker yet: the worker answers it and closes it; its caller sees the end."""
    client = _status(server.path)
    with client:
        server._accept(0.0)  # no worker idle, none forked yet: one is forked for this connection
        assert len(server.pool.workers) == 1
        client.settimeout(_GUARD_SECONDS)
        kind, _facts = wire.read_frame(client) or (b"", b"")
        assert kind == b"I"
        assert client.recv(1) == b""  # the end: no process but the worker held the connection


def _forked(server: Server, monkeypatch: pytest.MonkeyPatch, body: Callable[[], object]) -> int:
    """Fork a worker from `server` (its signals trapped as `serve` traps them) that runs `body`; its wait status."""
    monkeypatch.setattr(daemon, "work", lambda *_args: body())
    previous = {signo: signal.getsignal(signo) for signo in (*daemon._RETIRE_SIGNALS, signal.SIGCHLD)}
    wake_r, wake_w = server._trap_signals()
    try:
        worker = server._spawn()
        _pid, status = os.waitpid(worker.pid, 0)
    finally:
        signal.set_wakeup_fd(-1)
        for signo, handler in previous.items():
            signal.signal(signo, handler)
        os.close(wake_r)
        os.close(wake_w)
        server.wake = (-1, -1)
    server.children.discard(worker.pid)
    server.pool.drop(worker)
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


def test_the_parent_waits_for_its_children_only_after_one_ended(place: ServerPlace) -> None:
    """Wake-ups for connections and ready workers reap nothing: waitpid runs after a SIGCHLD, not on every wake-up.

    Ten hand-overs wake the loop twenty times; the parent asks the kernel about its children once at the start and
    once its worker has ended, not once a wake-up.
    """
    report_r, report_w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the server, in a process of its own
        try:
            os.close(report_r)
            asked = [0]
            waitpid = os.waitpid

            def counted(*args: int) -> tuple[int, int]:
                asked[0] += 1
                return waitpid(*args)

            made = Server(str(place.dir), _BUILD, idle=0, workers=1, max_calls=1000, entry=lambda: None)
            made.claim()
            made.listen()
            os.write(report_w, b"1")
            os.waitpid = counted  # type: ignore[assignment] # counted in this process only
            made.serve()
            os.write(report_w, str(asked[0]).encode())
        finally:
            os._exit(0)
    os.close(report_w)
    try:
        assert os.read(report_r, 1) == b"1"
        for _ in range(10):
            with _status(str(place.dir / f"server-{_BUILD}.sock")) as client:
                client.settimeout(_GUARD_SECONDS)
                assert (wire.read_frame(client) or (b"",))[0] == b"I"
        os.kill(pid, signal.SIGTERM)
        _, status = os.waitpid(pid, 0)
        assert os.WIFEXITED(status)
        asked = int(os.read(report_r, 100) or b"-1")
    finally:
        os.close(report_r)
    assert 0 < asked < 10
