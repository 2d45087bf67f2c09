"""A reused worker's world and its resident listener, driven in a child interpreter (they own its stdio and signals).

Each case runs a script that builds the worker's `World` (and `Watcher`), plays calls through it and prints what it
saw as JSON: what must hold is that a call's changes are seen (a handler installed, swapped or ignored; the environment
changed) whichever way the check is made, that the world is put back exactly, and that one listener thread serves
every call and raises a forwarded signal only while the call runs.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

from tests.support.fresh import CLI, reported

PRELUDE = """
import json, os, signal, socket, struct, sys, threading, time
from ocivendir.server import world as world_module
from ocivendir.server.watch import Watcher
from ocivendir.server.wire import Request, frame
from ocivendir.server.world import World

def call_fds():
    return [os.open(os.devnull, os.O_RDONLY), os.open(os.devnull, os.O_WRONLY), os.open(os.devnull, os.O_WRONLY),
            os.open("/", os.O_RDONLY | os.O_DIRECTORY)]

def request(env):
    return Request(op="call", build="b", umask=0o027, cwd="/", argv=["vendir", "sync"], env=env)

def forwarded(client, got):  # the client forwards SIGHUP; wait (10 s at most) for the call's handler to have it
    client.sendall(frame(b"S", bytes([signal.SIGHUP])))
    deadline = time.monotonic() + 10
    while not got and time.monotonic() < deadline:
        time.sleep(0.001)

report = {}
world = World()
"""


def _play(body: str, *, no_proc_masks: bool = False) -> dict[str, object]:
    script = PRELUDE
    if no_proc_masks:
        script += "world_module._masks = lambda status=None: None\n"  # as in a chroot without /proc
    return reported(script + textwrap.dedent(body))


def _calls(count: int, change: str) -> str:
    """A script playing `count` clean calls but the last, which runs `change`; each call's signal check in `seen`."""
    return f"""
        seen = []
        for number in range({count}):
            world.enter(request({{"A": "1"}}), call_fds())
            if number == {count - 1}:
                {change}
            seen.append(world.signals_changed())
            world.leave(restore_all=seen[-1] is not None)
        report["seen"] = seen
        """


CHANGES = {
    "nothing": "pass",
    "a handler installed": "signal.signal(signal.SIGUSR1, lambda *a: None)",
    "a signal ignored": "signal.signal(signal.SIGUSR2, signal.SIG_IGN)",
    "SIGINT's handler swapped": "signal.signal(signal.SIGINT, lambda *a: None)",
    "SIGTERM caught": "signal.signal(signal.SIGTERM, lambda *a: None)",
}


@pytest.mark.parametrize("no_proc_masks", [False, True], ids=["with /proc", "without /proc"])
@pytest.mark.parametrize("change", list(CHANGES))
def test_a_call_that_changes_a_signals_disposition_is_seen_on_every_call(change: str, no_proc_masks: bool) -> None:
    """Clean calls first (the first one takes the kernel's masks), then the change: seen, by /proc or by Python."""
    report = _play(_calls(4, CHANGES[change]), no_proc_masks=no_proc_masks)
    seen = report["seen"]
    assert isinstance(seen, list)
    assert seen[:3] == [None, None, None]
    if change == "nothing":
        assert seen[3] is None
    else:
        assert isinstance(seen[3], str)
        assert seen[3].startswith("the call changed the handler of signal ")


@pytest.mark.parametrize("call", [0, 3], ids=["the first call", "a later call"])
def test_a_disposition_changed_outside_python_is_seen_where_proc_has_the_masks(call: int) -> None:
    """A handler installed with sigaction(2) from C (faulthandler), unknown to signal.getsignal(), is in the masks.

    The first call's too: the masks a call must end with are the ones it started with, not the first call's end.
    """
    report = _play(
        f"""
        seen = []
        for number in range(4):
            world.enter(request({{"A": "1"}}), call_fds())
            if number == {call}:
                import faulthandler
                faulthandler.enable()
            seen.append(world.signals_changed())
            world.leave(restore_all=seen[-1] is not None)
            if seen[-1] is not None:
                break
        report["seen"] = seen
        """
    )
    seen = report["seen"]
    assert isinstance(seen, list)
    assert seen[:call] == [None] * call
    assert seen[call] == "the call changed a signal's disposition outside Python (the kernel's masks differ)"


@pytest.mark.parametrize("no_proc_masks", [False, True], ids=["with /proc", "without /proc"])
def test_a_call_that_leaves_signals_blocked_is_seen(no_proc_masks: bool) -> None:
    """A signal the call left blocked would never reach the next call (a forwarded SIGINT, the request's SIGALRM)."""
    report = _play(
        """
        seen = []
        for number in range(3):
            world.enter(request({"A": "1"}), call_fds())
            if number == 2:
                signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGALRM})
            seen.append(world.signals_changed())
            world.leave(restore_all=seen[-1] is not None)
        report["seen"] = seen
        """,
        no_proc_masks=no_proc_masks,
    )
    assert report["seen"] == [None, None, "the call changed the main thread's blocked signals: 14"]


LEFT_ARMED = {
    "a wake-up descriptor": (
        "signal.set_wakeup_fd(os.pipe2(os.O_NONBLOCK)[1])",
        "the call left a wake-up descriptor for signals",
    ),
    "a real-time timer": ("signal.setitimer(signal.ITIMER_REAL, 1000)", "the call left a timer armed: ITIMER_REAL"),
    "a CPU timer": ("signal.setitimer(signal.ITIMER_VIRTUAL, 1000)", "the call left a timer armed: ITIMER_VIRTUAL"),
}


@pytest.mark.parametrize("left", list(LEFT_ARMED))
def test_a_call_that_leaves_a_timer_or_a_wake_up_descriptor_is_seen_and_they_are_disarmed(left: str) -> None:
    """Seen, and disarmed: a timer left armed would end a later call (SIGALRM, SIGVTALRM).

    A wake-up descriptor would have every caught signal write a byte to whatever a later call opens under its number.
    """
    code, reason = LEFT_ARMED[left]
    report = _play(
        _calls(3, code)
        + """
        report["disarmed"] = signal.set_wakeup_fd(-1) == -1 and all(
            signal.getitimer(which) == (0.0, 0.0)
            for which in (signal.ITIMER_REAL, signal.ITIMER_VIRTUAL, signal.ITIMER_PROF)
        )
        """
    )
    seen = report["seen"]
    assert isinstance(seen, list)
    assert seen[:2] == [None, None]
    assert isinstance(seen[2], str)
    assert seen[2].startswith(reason)
    assert report["disarmed"] is True


def test_each_calls_environment_is_exactly_its_own_whatever_came_before() -> None:
    """Only what differs is touched; names a caller lacks are gone; TZ is re-read; a changed one is undone in full.

    A clean call's environment stays until the next call's replaces it; a call that changed os.environ (a reason to
    retire) is seen, and the worker's own comes back.
    """
    report = _play(
        """
        own = dict(os.environ)
        report["own_offset"] = time.timezone // 3600
        world.enter(request({"A": "1", "TZ": "UTC+5", "PATH": "/caller/bin"}), call_fds())
        report["in_call"] = dict(os.environ)
        report["hour_offset"] = time.timezone // 3600
        report["umask"] = os.umask(0o022)
        report["clean"] = world.environ_changed()
        world.leave(restore_all=False)
        report["changed"] = world.changed()
        report["argv"] = sys.argv
        report["sigint"] = signal.getsignal(signal.SIGINT) == signal.SIG_IGN
        world.enter(request({"B": "2", "PATH": "/caller/bin", **({"TZ": own["TZ"]} if "TZ" in own else {})}), call_fds())
        report["second"] = dict(os.environ)
        report["second_offset"] = time.timezone // 3600
        os.environ["PLANTED"] = "1"
        report["seen"] = world.environ_changed()
        world.leave(restore_all=True)
        report["after"] = dict(os.environ) == own
        report["changed_after"] = world.changed()
        """
    )
    assert report["in_call"] == {"A": "1", "TZ": "UTC+5", "PATH": "/caller/bin"}
    assert report["hour_offset"] == 5  # the caller's zone, read when the call's TZ came in
    assert report["umask"] == 0o027
    assert report["clean"] is None
    assert report["changed"] is None
    assert report["sigint"] is True  # SIG_IGN: the worker's own between calls
    assert {k: v for k, v in report["second"].items() if k != "TZ"} == {"B": "2", "PATH": "/caller/bin"}
    assert report["second_offset"] == report["own_offset"] != 5  # TZ gone: the zone read again
    assert report["seen"] == "the call changed os.environ"
    assert report["after"] is True
    assert report["changed_after"] is None


def test_one_listener_thread_serves_every_call_and_raises_only_while_the_call_runs() -> None:
    """A forwarded SIGHUP is raised during the call; one sent after the call's end never is; the thread stays one."""
    report = _play(
        """
        got = []
        signal.signal(signal.SIGHUP, lambda signo, frame: got.append(signo))
        watcher = Watcher()
        threads = threading.active_count()
        counts = []
        for number in range(5):
            ours, client = socket.socketpair()
            watcher.watch(ours)
            if number == 2:
                forwarded(client, got)
            watcher.stop()
            client.sendall(frame(b"S", bytes([signal.SIGHUP])))  # after the call's end: never raised
            ours.shutdown(socket.SHUT_RD)
            time.sleep(0.01)
            counts.append(threading.active_count())
            ours.close()
            client.close()
        report["got"] = got
        report["counts"] = counts
        report["threads"] = threads
        """
    )
    assert report["got"] == [1]
    counts = report["counts"]
    assert isinstance(counts, list)
    assert set(counts) == {report["threads"]}


def test_a_listener_that_fails_unexpectedly_still_lets_go_of_the_call_and_serves_the_next() -> None:
    """Whatever ends the reading of a call's connection, stop() returns: a worker never waits forever on it.

    A thread per call survived its own failure (join returned); the resident one must too, and listen to the next call.
    """
    report = _play(
        """
        ended = threading.Event()

        class Failing(socket.socket):
            def recv(self, *args):
                ended.wait()  # fails once the call has ended (else it would end the worker with SIGTERM)
                raise MemoryError("no room for the next frame")

        got = []
        signal.signal(signal.SIGHUP, lambda signo, frame: got.append(signo))
        watcher = Watcher()
        first, _peer = socket.socketpair()
        watcher.watch(Failing(fileno=first.detach()))
        watcher.stop()
        ended.set()
        ours, client = socket.socketpair()
        watcher.watch(ours)
        forwarded(client, got)
        watcher.stop()
        ours.shutdown(socket.SHUT_RD)
        report["got"] = got
        """
    )
    assert report["got"] == [1]


def test_a_client_gone_mid_call_ends_the_worker_with_sigterm() -> None:
    """The client's end before the call's end: SIGTERM, as kapp-controller's kill would have ended the program."""
    script = PRELUDE + textwrap.dedent(
        """
        watcher = Watcher()
        ours, client = socket.socketpair()
        watcher.watch(ours)
        client.close()
        time.sleep(10)
        """
    )
    done = subprocess.run([sys.executable, "-c", script], check=False, env={**os.environ, "PYTHONPATH": str(CLI)},
                          capture_output=True, text=True, timeout=60)  # fmt: skip
    assert done.returncode == -15, done.stderr


def test_what_is_written_between_calls_never_reaches_a_callers_stdout() -> None:
    """Between calls the streams are the worker's own, over its own /dev/null: never over a caller's descriptor 1.

    Text buffered between calls (nothing flushed it) is not carried into the next call's stdout when its streams
    come in; the call's own text is, and the worker's streams are built once, not on every call.
    """
    report = _play(
        """
        import weakref
        idle = [weakref.ref(stream) for stream in (sys.stdin, sys.stdout, sys.stderr)]  # not kept alive here
        read, write = os.pipe()
        fds = call_fds()
        os.close(fds[1])
        fds[1] = write
        sys.stdout.write("between calls\\n")  # buffered in the worker's own stream, not flushed
        world.enter(request({"A": "1"}), fds)
        print("in the call")
        sys.stdout.flush()
        world.leave(restore_all=False)
        sys.stdout.write("after the call\\n")
        sys.stdout.flush()
        os.set_blocking(read, False)
        report["caller_saw"] = os.read(read, 1000).decode()
        report["idle_fds"] = [stream.fileno() for stream in (sys.stdin, sys.stdout, sys.stderr)]
        report["own_again"] = [ref() for ref in idle] == [sys.stdin, sys.stdout, sys.stderr] == [
            sys.__stdin__, sys.__stdout__, sys.__stderr__]
        report["null"] = world.null
        """
    )
    assert report["caller_saw"] == "in the call\n"
    assert report["idle_fds"] == [report["null"]] * 3
    assert report["own_again"] is True


def test_a_calls_streams_are_closed_when_it_ends() -> None:
    """A closed stream never flushes again: what a call left buffered is dropped, never written to the next caller."""
    report = _play(
        """
        world.enter(request({"A": "1"}), call_fds())
        call_stdout = sys.stdout
        world.leave(restore_all=False)
        report["closed"] = call_stdout.closed
        """
    )
    assert report["closed"] is True


def test_a_callers_environment_called_with_again_is_not_set_again() -> None:
    """Call after call with the same environment (a controller's): nothing of os.environ is set, unset or read.

    Each setenv/unsetenv and each read of os.environ is Python on both sides of libc; a worker that put its own
    environment back after each call set every name twice a call.
    """
    report = _play(
        """
        env = {**os.environ, "A": "1", "CALLER_ONLY": "x"}
        world.enter(request(dict(env)), call_fds())
        world.leave(restore_all=world.environ_changed() is not None)
        touched = []
        def profile(frame, event, arg):
            if event == "call" and frame.f_globals.get("__name__") == "os":
                touched.append(frame.f_code.co_name)
        sys.setprofile(profile)
        world.enter(request(dict(env)), call_fds())
        sys.setprofile(None)
        report["in_call"] = dict(os.environ) == env
        report["clean"] = world.environ_changed()
        sys.setprofile(profile)
        world.leave(restore_all=False)
        sys.setprofile(None)
        report["touched"] = sorted(set(touched) & {"__getitem__", "__setitem__", "__delitem__", "__iter__", "get"})
        report["changed"] = world.changed()
        """
    )
    assert report == {"in_call": True, "clean": None, "touched": [], "changed": None}


def test_a_call_that_changed_os_environ_is_undone_in_full() -> None:
    """A call that set and removed names (a reason to retire) still leaves the worker's own environment exactly."""
    report = _play(
        """
        own = dict(os.environ)
        world.enter(request({"A": "1", "B": "2"}), call_fds())
        os.environ["PLANTED"] = "1"
        del os.environ["A"]
        world.leave(restore_all=True)
        report["after"] = dict(os.environ) == own
        report["changed"] = world.changed()
        """
    )
    assert report == {"after": True, "changed": None}


def test_the_listener_sleeps_through_calls_whose_client_says_nothing() -> None:
    """A call begins and ends without waking the listener: it wakes only for a frame or a client gone.

    Counted as the thread's voluntary context switches (each wake-up ends in one when it sleeps again): a hand-over
    to the thread and back cost two per call. Once a call has ended, its connection may be closed at once.
    """
    report = _play(
        """
        from ocivendir.server.watch import THREAD_NAME
        watcher = Watcher()
        time.sleep(0.05)  # the thread has gone to sleep
        tid = next(t.native_id for t in threading.enumerate() if t.name == THREAD_NAME)
        def switches():
            with open(f"/proc/self/task/{tid}/status") as status:
                return int(next(l.split()[1] for l in status if l.startswith("voluntary_ctxt_switches")))
        before = switches()
        for _ in range(10):
            ours, client = socket.socketpair()
            watcher.watch(ours)
            watcher.stop()
            ours.close()
            client.close()
        time.sleep(0.05)
        report["woken"] = switches() - before
        got = []
        signal.signal(signal.SIGHUP, lambda signo, frame: got.append(signo))
        ours, client = socket.socketpair()
        watcher.watch(ours)
        forwarded(client, got)
        watcher.stop()
        report["got"] = got
        """
    )
    assert report == {"woken": 0, "got": [1]}


def test_a_frame_that_comes_in_pieces_is_raised_once_whole() -> None:
    """The listener reads what is there without waiting: a frame's first bytes wait for the rest, then it is raised."""
    report = _play(
        """
        got = []
        signal.signal(signal.SIGHUP, lambda signo, frame: got.append(signo))
        watcher = Watcher()
        ours, client = socket.socketpair()
        watcher.watch(ours)
        whole = frame(b"S", bytes([signal.SIGHUP]))
        client.sendall(whole[:3])
        time.sleep(0.05)
        report["early"] = list(got)
        client.sendall(whole[3:])
        deadline = time.monotonic() + 10
        while not got and time.monotonic() < deadline:
            time.sleep(0.001)
        watcher.stop()
        report["got"] = got
        """
    )
    assert report == {"early": [], "got": [1]}
