"""The parent's bookkeeping: which worker takes a call, when a spare is forked, which idle ones end; the desk's answers.

`Pool` and `Desk` are driven here with real socket pairs standing in for workers' channels and clients' connections.
"""

from __future__ import annotations

import json
import os
import socket
import struct

from ocivendir.server import wire
from ocivendir.server.desk import Desk
from ocivendir.server.pool import IDLE_SECONDS, Pool, Worker


def _worker(pool: Pool, pid: int, now: float) -> tuple[Worker, socket.socket]:
    parent, child = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    worker = Worker(pid, parent, now)
    pool.add(worker)
    return worker, child


def test_a_spare_is_wanted_only_when_none_is_idle_and_the_limit_allows() -> None:
    pool = Pool(2)
    assert pool.wants_spare()
    first, _ = _worker(pool, 1, 0.0)
    assert not pool.wants_spare()
    first.busy = True
    assert pool.wants_spare()
    second, _ = _worker(pool, 2, 0.0)
    second.busy = True
    assert not pool.wants_spare()  # at the limit
    assert pool.idle() is None
    assert pool.counts() == (2, 0)


def test_a_handed_connection_arrives_with_the_facts_and_the_worker_is_busy() -> None:
    pool = Pool(1)
    worker, child = _worker(pool, 1, 0.0)
    left, right = socket.socketpair()
    with left, right, child:
        assert pool.hand(worker, left, b'{"calls": 3}')
        message, fds, _flags, _address = socket.recv_fds(child, 1024, 1)
        assert json.loads(message) == {"calls": 3}
        assert len(fds) == 1
        with socket.socket(fileno=fds[0]) as passed:
            passed.sendall(b"x")
            assert right.recv(1) == b"x"  # the very connection
    assert worker.busy


def test_ready_retiring_and_gone_workers_as_the_parent_hears_them() -> None:
    pool = Pool(3)
    ready, ready_end = _worker(pool, 1, 0.0)
    retiring, retiring_end = _worker(pool, 2, 0.0)
    gone, gone_end = _worker(pool, 3, 0.0)
    for worker in (ready, retiring, gone):
        worker.busy = True
    ready_end.send(b"D")
    retiring_end.send(b"Eserved 1000 calls")
    gone_end.close()
    for worker in (ready, retiring, gone):
        pool.heard(worker.channel.fileno(), 5.0)
    assert list(pool.workers.values()) == [ready]
    assert (ready.busy, ready.idle_since) == (False, 5.0)
    assert (pool.retired, pool.last_retired) == (1, "served 1000 calls")
    ready_end.close()
    retiring_end.close()


def test_a_worker_reaped_before_its_channel_was_read_still_counts_as_retired() -> None:
    """It said `E` and exited; the loop reaps first (its SIGCHLD came in the same wake-up) and reads what it said."""
    pool = Pool(2)
    retiring, retiring_end = _worker(pool, 1, 0.0)
    crashed, crashed_end = _worker(pool, 2, 0.0)
    retiring.busy = crashed.busy = True
    retiring_end.send(b"Eleft a thread behind")
    retiring_end.close()
    crashed_end.close()  # died without a word
    pool.ended(retiring)
    pool.ended(crashed)
    assert pool.workers == {}
    assert (pool.retired, pool.last_retired) == (1, "left a thread behind")


def test_idle_workers_beyond_one_spare_end_after_the_idle_time() -> None:
    pool = Pool(4)
    _, old_end = _worker(pool, 1, 0.0)
    _, older_end = _worker(pool, 2, -5.0)
    newest, _newest_end = _worker(pool, 3, 10.0)
    busy, _busy_end = _worker(pool, 4, -100.0)
    busy.busy = True
    assert pool.expire(30.0) == IDLE_SECONDS - 5.0 - 30.0  # the oldest beyond the spare ends first (at 55 s)
    assert len(pool.workers) == 4
    pool.expire(IDLE_SECONDS + 1.0)
    assert sorted(w.pid for w in pool.workers.values()) == [3, 4]  # the newest idle one stays, the busy one too
    assert old_end.recv(16) == b""  # its channel closed: an idle worker exits
    assert older_end.recv(16) == b""
    assert newest is pool.idle()


def _client(desk: Desk, op: str) -> socket.socket:
    server_end, client_end = socket.socketpair()
    desk.take(server_end, 0.0)
    request = wire.Request(op=op, build="0" * 16, umask=0o22, cwd="/", argv=["vendir"], env={"A": "b"})
    data = wire.encode_request(request)
    null = os.open(os.devnull, os.O_RDONLY)
    try:
        wire.send_request(client_end, data, [null, null, null, null])
    finally:
        os.close(null)
    answered = None
    for _ in range(3):  # the header (with the descriptors) arrives apart from the body
        answered = answered or desk.readable(
            server_end.fileno(), lambda: {"pid": 7}, "busy: all 1 workers are serving calls"
        )
    assert answered == op
    return client_end


def test_the_desk_answers_status_with_the_facts_and_a_call_with_busy() -> None:
    desk = Desk(5.0)
    status = _client(desk, "status")
    call = _client(desk, "call")
    with status, call:
        assert wire.read_frame(status) == (b"I", b'{"pid": 7}')
        assert wire.read_frame(call) == (b"R", b"busy: all 1 workers are serving calls")
    assert len(desk.waiting) == 2  # drained until the client closes (or the deadline)
    desk.expire(5.0)
    assert desk.waiting == {}


def test_the_desk_closes_what_is_not_a_request_and_what_never_finishes() -> None:
    desk = Desk(5.0)
    garbage_server, garbage = socket.socketpair()
    silent_server, silent = socket.socketpair()
    desk.take(garbage_server, 0.0)
    desk.take(silent_server, 0.0)
    garbage.sendall(struct.pack(">4sI", b"HTTP", 10) + b"GET / HTTP/1.1")
    desk.readable(garbage_server.fileno(), dict, "busy")
    assert garbage.recv(16) == b""  # closed unanswered
    assert desk.expire(4.0) == 1.0
    desk.expire(5.0)
    assert silent.recv(16) == b""
    assert desk.waiting == {}
    garbage.close()
    silent.close()


def test_the_facts_a_hand_over_carries_are_the_servers_facts() -> None:
    """Formatted around the constant ones encoded once, they decode to what `server status` reports.

    But the uptime, read a moment apart; a reason with quotes and non-ASCII stays one JSON string.
    """
    from ocivendir.server.daemon import Server  # noqa: PLC0415

    server = Server("/nonexistent", "ab" * 8, idle=600.0, workers=4, max_calls=1000, entry=lambda: None)
    server.calls = 7
    server.pool.retired, server.pool.last_retired = 2, 'served "1000" calls — ü\\'
    for _ in range(2):  # the constant part encoded on the first, reused on the second
        carried = json.loads(server.facts_json())
        expected = server.facts()
        assert abs(carried.pop("uptime") - expected.pop("uptime")) < 1  # type: ignore[operator]
        assert carried == expected
