"""A worker's checks after each call read its own /proc status through one descriptor, opened once, its own.

What must hold: a call's checks (signal masks, threads, resident size) open nothing under /proc/self but the listing
of its descriptors; the descriptor describes the process that reads it (a child of a fork opens its own: one
inherited would describe the parent); and what the checks catch is still caught. Each case runs in a child
interpreter: the checks are of the whole process.
"""

from __future__ import annotations

import textwrap

from tests.support.fresh import reported

PRELUDE = """
import json, os, signal, sys, threading
from ocivendir.server import ownstatus
from ocivendir.server.leaks import Baseline, resident_bytes
from ocivendir.server.wire import Request
from ocivendir.server.world import World
report = {}

def call_fds():
    return [os.open(os.devnull, os.O_RDONLY), os.open(os.devnull, os.O_WRONLY), os.open(os.devnull, os.O_WRONLY),
            os.open("/", os.O_RDONLY | os.O_DIRECTORY)]

def request():
    return Request(op="call", build="b", umask=0o022, cwd="/", argv=["vendir"], env=dict(os.environ))
"""


def _play(body: str) -> dict[str, object]:
    return reported(PRELUDE + textwrap.dedent(body))


def test_a_calls_checks_open_nothing_under_proc_self_but_the_descriptor_listing() -> None:
    """Masks, thread count and resident size come from one pread(2) of the descriptor opened before the baseline."""
    report = _play(
        """
        world = World()
        baseline = Baseline()
        opened = []
        def hook(event, args):
            if event in ("open", "os.listdir") and str(args[0]).startswith("/proc/self/"):
                opened.append(str(args[0]))
        sys.addaudithook(hook)
        reasons = []
        for _ in range(3):
            world.enter(request(), call_fds())
            reasons.append(world.signals_changed())
            world.leave(restore_all=False)
            reasons.append(baseline.left_behind(-1) or world.changed() or baseline.retire_reason(1, 10))
        report["opened"] = sorted(set(opened))
        report["reasons"] = reasons
        """
    )
    assert report["reasons"] == [None] * 6
    assert report["opened"] == ["/proc/self/fd"]


def test_the_status_read_is_the_readers_own_after_a_fork() -> None:
    """The parent has a second thread and opened its status; a forked child has one thread, and reads so."""
    report = _play(
        """
        assert ownstatus.open_status()
        stop = threading.Event()
        threading.Thread(target=stop.wait, daemon=True).start()
        report["parent"] = int(ownstatus.read().get(b"Threads"))
        read, write = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.write(write, ownstatus.read().get(b"Threads") + b" " + str(os.getpid()).encode())
            os._exit(0)
        os.close(write)
        os.waitpid(pid, 0)
        threads, child = os.read(read, 100).split()
        report["child"] = int(threads)
        report["child_pid_matches"] = int(child) == pid
        report["parent_after"] = int(ownstatus.read().get(b"Threads"))
        stop.set()
        """
    )
    assert report == {"parent": 2, "child": 1, "child_pid_matches": True, "parent_after": 2}


def test_a_thread_left_running_is_still_caught_by_the_kernels_count() -> None:
    report = _play(
        """
        baseline = Baseline()
        stop = threading.Event()
        threading.Thread(target=stop.wait, name="planted", daemon=True).start()
        report["reason"] = baseline.left_behind(-1)
        stop.set()
        """
    )
    assert report["reason"] == "1 threads were left running (planted)"


def test_the_resident_size_is_the_kernels() -> None:
    """VmRSS from the status, as statm's resident pages say it (within what the reading itself may touch)."""
    report = _play(
        """
        with open("/proc/self/statm", "rb") as statm:
            pages = int(statm.read().split()[1])
        report["statm"] = pages * os.sysconf("SC_PAGE_SIZE")
        report["status"] = resident_bytes()
        """
    )
    statm, status = report["statm"], report["status"]
    assert isinstance(statm, int)
    assert isinstance(status, int)
    assert abs(statm - status) < 1 << 20


def test_without_proc_every_reading_falls_back() -> None:
    """Where /proc is not mounted (the sidecar's chroot): no masks, Python's thread count, the peak resident size."""
    report = _play(
        """
        ownstatus._fd = ownstatus._NO_PROC  # as open_status() leaves it where /proc/self/status cannot be opened
        from ocivendir.server import leaks, world as world_module
        report["masks"] = world_module._masks()
        report["threads"] = leaks._threads() == threading.active_count()
        report["resident"] = resident_bytes() > 0
        """
    )
    assert report == {"masks": None, "threads": True, "resident": True}


def test_one_read_after_a_call_serves_every_check_that_needs_the_status() -> None:
    """The masks, the thread count and the resident size of a clean call come from one pread(2), not three.

    (The worker's first call also reads the masks it starts with, before it runs.)
    """
    report = _play(
        """
        world = World()
        baseline = Baseline()
        world.enter(request(), call_fds())  # the first call also takes the masks every call starts with
        world.leave(restore_all=False)
        reads = []
        text = ownstatus._text
        def counted():
            reads.append(1)
            return text()
        ownstatus._text = counted
        world.enter(request(), call_fds())
        status = ownstatus.read()
        reasons = [world.signals_changed(status)]
        world.leave(restore_all=False)
        reasons.append(baseline.left_behind(-1, status) or world.changed() or baseline.retire_reason(1, 10, status))
        report["reads"] = len(reads)
        report["reasons"] = reasons
        """
    )
    assert report == {"reads": 1, "reasons": [None, None]}
