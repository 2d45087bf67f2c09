"""The parent's bookkeeping: which workers live, when a spare is forked, which idle ones end; the desk's answers.

`Pool` and `Desk` are driven here with real socket pairs standing in for workers' channels and clients' connections,
and the real shared table, which the tests write as a worker would.
"""

from __future__ import annotations

import errno
import json
import os
import socket
import struct
import time
from pathlib import Path

import pytest

from ocivendir.server import wire
from ocivendir.server.desk import Desk
from ocivendir.server.pool import IDLE_SECONDS, Pool, Worker
from ocivendir.server.slots import BUSY, IDLE, Slots


def _worker(pool: Pool, pid: int, now: float) -> tuple[Worker, socket.socket]:
    parent, child = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    slot = pool.slots.claim(now)
    assert slot is not None
    worker = Worker(pid, parent, slot)
    pool.add(worker)
    return worker, child


def test_a_spare_is_wanted_only_when_none_is_idle_and_the_limit_allows() -> None:
    pool = Pool(2)
    assert pool.wants_spare()
    first, _ = _worker(pool, 1, 0.0)
    assert not pool.wants_spare()  # a forked worker is idle in its slot at once
    pool.slots.mark(first.slot, BUSY, 1.0)  # as the worker says it, without a word to the parent
    assert pool.wants_spare()
    assert not pool.full()
    second, _ = _worker(pool, 2, 0.0)
    pool.slots.mark(second.slot, BUSY, 1.0)
    assert not pool.wants_spare()  # at the limit
    assert pool.full()  # the parent then answers connections itself
    assert pool.counts() == (2, 0)
    assert pool.counts(asking=second.channel.fileno()) == (1, 1)  # a status query's worker does not count itself


def test_a_worker_on_its_way_out_does_not_make_the_pool_full() -> None:
    pool = Pool(1)
    ended = os.fork()
    if ended == 0:
        os._exit(0)  # killed mid-call, say: its caller may call again before the parent has heard
    try:
        while Path(f"/proc/{ended}/stat").read_text().rpartition(")")[2].split()[0] != "Z":
            time.sleep(0.001)
        worker, _ = _worker(pool, ended, 0.0)
        pool.slots.mark(worker.slot, BUSY, 1.0)  # busy, as it last said
        assert not pool.full()  # the parent does not answer "busy": its channel's end brings the spare
    finally:
        os.waitpid(ended, 0)
    alive = Pool(1)
    live, _ = _worker(alive, os.getpid(), 0.0)
    alive.slots.mark(live.slot, BUSY, 1.0)
    assert alive.full()  # a busy worker that is not exiting


def test_the_table_is_shared_with_a_forked_worker() -> None:
    slots = Slots(2)
    index = slots.claim(5.0)
    assert index is not None
    pid = os.fork()
    if pid == 0:  # the worker
        slots.mark(index, BUSY, 7.0)
        slots.served(index)
        slots.served(index)
        os._exit(0)
    os.waitpid(pid, 0)
    assert slots.read(index) == (BUSY, 2, 7.0)
    assert slots.any_idle() is False
    assert slots.claim(8.0) == 1 - index
    assert slots.any_idle() is True
    assert slots.any_idle(but=1 - index) is False
    assert slots.free(index) == 2
    assert slots.claim(9.0) == index  # free again, its count back to 0
    assert slots.read(index) == (IDLE, 0, 9.0)


def test_what_the_parent_hears_a_spare_wanted_a_question_a_retirement_an_end() -> None:
    pool = Pool(4)
    spare, spare_end = _worker(pool, 1, 0.0)
    asking, asking_end = _worker(pool, 2, 0.0)
    retiring, retiring_end = _worker(pool, 3, 0.0)
    gone, gone_end = _worker(pool, 4, 0.0)
    spare_end.send(b"S")
    asking_end.send(b"Qstatus")
    retiring_end.send(b"Eserved 1000 calls")
    gone_end.close()
    assert pool.heard(spare.channel.fileno()) is None
    assert pool.heard(asking.channel.fileno()) == b"status"
    assert pool.heard(asking.channel.fileno()) is None  # nothing more said: nothing read, nothing done
    for worker in (retiring, gone):
        assert pool.heard(worker.channel.fileno()) is None
    assert list(pool.workers.values()) == [spare, asking]
    assert (pool.retired, pool.last_retired) == (1, "served 1000 calls")
    for end in (spare_end, asking_end, retiring_end):
        end.close()


def test_a_worker_reaped_before_its_channel_was_read_still_counts_as_retired() -> None:
    """It said `E` and exited; the loop reaps first (its SIGCHLD came in the same wake-up) and reads what it said."""
    pool = Pool(2)
    retiring, retiring_end = _worker(pool, 1, 0.0)
    crashed, crashed_end = _worker(pool, 2, 0.0)
    retiring_end.send(b"Eleft a thread behind")
    retiring_end.close()
    crashed_end.close()  # died without a word
    pool.ended(retiring)
    pool.ended(crashed)
    assert pool.workers == {}
    assert (pool.retired, pool.last_retired) == (1, "left a thread behind")


def test_calls_count_every_worker_ended_or_not_until_its_slot_is_taken_back() -> None:
    pool = Pool(2)
    first, first_end = _worker(pool, 1, 0.0)
    second, second_end = _worker(pool, 2, 0.0)
    for _ in range(3):
        pool.slots.served(first.slot)
    pool.slots.served(second.slot)
    assert pool.calls() == 4
    pool.ended(first)  # dropped, not yet reaped: its calls still count, once
    assert pool.calls() == 4
    pool.release(first.slot)  # reaped
    pool.release(first.slot)  # twice: still once
    assert (pool.calls(), pool.ended_calls) == (4, 3)
    first_end.close()
    second_end.close()


def test_idle_workers_beyond_one_spare_end_after_the_idle_time() -> None:
    pool = Pool(4)
    _, old_end = _worker(pool, 1, 0.0)
    _, older_end = _worker(pool, 2, -5.0)
    newest, _newest_end = _worker(pool, 3, 10.0)
    busy, _busy_end = _worker(pool, 4, -100.0)
    pool.slots.mark(busy.slot, BUSY, -100.0)
    assert pool.expire(30.0) == IDLE_SECONDS - 5.0 - 30.0  # the oldest beyond the spare ends first (at 55 s)
    assert len(pool.workers) == 4
    pool.expire(IDLE_SECONDS + 1.0)
    assert sorted(w.pid for w in pool.workers.values()) == [3, 4]  # the newest idle one stays, the busy one too
    assert old_end.recv(16) == b""  # its channel closed: an idle worker exits
    assert older_end.recv(16) == b""
    assert pool.counts() == (1, 1)
    assert pool.last_activity() == 10.0
    assert newest.pid == 3


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
    assert desk.expire(6.0) == float("inf")  # nothing waiting: no reason to wake the parent


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


def test_a_workers_question_is_answered_with_the_servers_facts_the_asker_not_busy() -> None:
    """A worker asked `status` asks its parent (`Q`); the answer, on its channel, says what `server status` says."""
    from ocivendir.server.daemon import Server  # noqa: PLC0415

    server = Server("/nonexistent", "ab" * 8, idle=600.0, workers=4, max_calls=1000, entry=lambda: None)
    server.calls = 2  # answered by the parent itself
    asking, asking_end = _worker(server.pool, 1, 0.0)
    other, other_end = _worker(server.pool, 2, 0.0)
    server.pool.slots.mark(asking.slot, BUSY, 1.0)
    server.pool.slots.served(asking.slot)  # its question, counted as it took it (and not in its own answer)
    server.pool.slots.served(other.slot)
    other_end.send('Eserved "1000" calls \u2014 \xfc'.encode())
    asking_end.send(b"Qstatus")
    server._heard(asking.channel.fileno())  # the other worker's retirement, said first, is heard first
    answer = json.loads(asking_end.recv(65536))
    assert (answer["calls"], answer["busy"], answer["idle"], answer["workers"]) == (3, 0, 1, 1)
    assert (answer["retired"], answer["last_retired"]) == (1, 'served "1000" calls \u2014 \xfc')
    assert answer["pid"] == os.getpid()
    assert answer.keys() == server.facts().keys()
    asking_end.close()
    other_end.close()


def test_a_question_is_answered_after_everything_another_worker_said_before_it() -> None:
    """A status asked after a short call reports its worker's retirement, though `S` came before its `E`.

    Both waited on the channel when the parent woke (the call was short, the machine loaded); its caller has its
    answer and asks another worker, in that same wake-up.
    """
    from ocivendir.server.daemon import Server  # noqa: PLC0415

    server = Server("/nonexistent", "ab" * 8, idle=600.0, workers=4, max_calls=1000, entry=lambda: None)
    asking, asking_end = _worker(server.pool, 1, 0.0)
    _other, other_end = _worker(server.pool, 2, 0.0)
    other_end.send(b"S")
    other_end.send(b"Eserved 1 calls")
    asking_end.send(b"Qstatus")
    server._heard(asking.channel.fileno())
    answer = json.loads(asking_end.recv(65536))
    assert (answer["retired"], answer["last_retired"], answer["workers"]) == (1, "served 1 calls", 1)
    asking_end.close()
    other_end.close()


def test_an_accept_that_failed_for_want_of_descriptors_pauses_a_lost_race_does_not(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """EMFILE leaves the connection queued and the socket readable: retried at once, the worker would spin."""
    from ocivendir.server import worker  # noqa: PLC0415

    class Failing:
        def __init__(self, error: OSError) -> None:
            self.error = error

        def accept(self) -> tuple[socket.socket, object]:
            raise self.error

    def take(error: OSError) -> socket.socket | None:
        return worker.take(Failing(error))  # type: ignore[arg-type]

    paused: list[float] = []
    monkeypatch.setattr(worker.time, "sleep", paused.append)
    assert take(BlockingIOError(errno.EAGAIN, "taken by another worker")) is None
    assert take(ConnectionAbortedError(errno.ECONNABORTED, "gone")) is None
    assert paused == []
    assert take(OSError(errno.EMFILE, "Too many open files")) is None
    assert paused == [worker._ACCEPT_PAUSE]


def test_an_idle_deadline_passed_while_a_worker_was_busy_is_looked_at_again_soon() -> None:
    """A worker says nothing when its call ends: the parent, which then sleeps, must wake to see the server idle."""
    from ocivendir.server.daemon import Server  # noqa: PLC0415

    server = Server("/nonexistent", "ab" * 8, idle=1.0, workers=2, max_calls=1000, entry=lambda: None)
    worker, worker_end = _worker(server.pool, 1, 100.0)
    assert server._timeout(100.25) == 0.75  # idle: the deadline, a second after the worker's last word
    server.pool.slots.mark(worker.slot, BUSY, 100.5)  # it took a call: the parent was not told
    assert server._timeout(100.5) == 1.0  # the deadline counts from the call's start
    assert server._timeout(103.0) == 1.0  # past it, still busy: again in a second, not at the minute's check
    server.pool.slots.mark(worker.slot, IDLE, 103.2)  # done, as the table says
    assert round(server._timeout(103.5), 6) == 0.7
    worker_end.close()
