"""The benchmark's view of a server: what one call added to the private memory of its processes, at the peak.

A stand-in server (a process named as `server start --foreground` is, with the benchmark's socket directory in its
environment) takes commands on stdin: hold memory, let it go, fork a child that holds some.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from bench.serverstat import PrivateGrowth

_STAND_IN = """
import mmap, os, sys, time
held = mapped = None
def touched(size, block=None):
    block = bytearray(size) if block is None else block
    block[::4096] = b"x" * len(block[::4096])  # every page written: private and resident
    return block
for line in sys.stdin:
    command = line.strip()
    if command == "hold":
        held = touched(16 << 20)
    elif command == "free":
        held = None
    elif command == "map":  # as fs/dropbehind.py maps its direct-write buffers
        mapped = touched(4 << 20, mmap.mmap(-1, 4 << 20))
    elif command.startswith("fork") and os.fork() == 0:
        child = touched(16 << 20, held) if command == "fork-write" else touched(8 << 20)
        print("ok", flush=True)
        time.sleep(60)
        os._exit(0)
    if not command.startswith("fork"):
        print("ok", flush=True)
"""
MIB = 1024
# what else a process may let go while its 16 MiB are sampled (a page of its heap trimmed, a stack page): a run saw
# 16,380 KiB of new memory for the 16 MiB it held
SLACK = 256


class StandIn:
    def __init__(self, directory: Path) -> None:
        environ = {**os.environ, "OCIVENDIR_SERVER_DIR": str(directory)}
        self.process = subprocess.Popen([sys.executable, "-c", _STAND_IN, "server", "start", "--foreground"],
                                        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=environ,
                                        start_new_session=True)  # fmt: skip

    def tell(self, command: str) -> None:
        assert self.process.stdin is not None
        assert self.process.stdout is not None
        self.process.stdin.write(f"{command}\n")
        self.process.stdin.flush()
        assert self.process.stdout.readline() == "ok\n"


@pytest.fixture
def stand_in(tmp_path: Path) -> Iterator[StandIn]:
    server = StandIn(tmp_path)
    server.tell("ready")
    yield server
    os.killpg(server.process.pid, signal.SIGKILL)
    server.process.wait()


def test_a_call_that_holds_nothing_adds_next_to_nothing(stand_in: StandIn, tmp_path: Path) -> None:
    with PrivateGrowth(tmp_path) as growth:
        stand_in.tell("nothing")
    assert growth.kib < 2 * MIB


def test_memory_held_during_the_call_counts_though_it_is_let_go_before_the_end(stand_in: StandIn,
                                                                               tmp_path: Path) -> None:  # fmt: skip
    with PrivateGrowth(tmp_path, interval=60) as growth:  # no sample of its own: the test takes them
        stand_in.tell("hold")
        growth._once()
        stand_in.tell("free")
    assert 16 * MIB - SLACK <= growth.kib < 20 * MIB


def test_a_process_forked_during_the_call_counts_with_all_of_its_private_memory(stand_in: StandIn,
                                                                                tmp_path: Path) -> None:  # fmt: skip
    with PrivateGrowth(tmp_path, interval=60) as growth:
        stand_in.tell("fork")
    assert 8 * MIB <= growth.kib < 14 * MIB


def test_its_parts_tell_direct_write_buffers_from_new_memory(stand_in: StandIn, tmp_path: Path) -> None:
    with PrivateGrowth(tmp_path, interval=60) as growth:
        stand_in.tell("map")
        stand_in.tell("hold")
    parts = growth.parts_kib
    assert 4 * MIB <= parts["direct-write buffers"] < 5 * MIB
    assert 16 * MIB - SLACK <= parts["new"] < 18 * MIB
    assert parts["copied on write"] < 1 * MIB  # the server itself copies nothing: it is no one's child
    assert growth.kib == sum(parts.values())


def test_pages_a_forked_worker_writes_in_what_it_inherited_are_copied_on_write(stand_in: StandIn,
                                                                                tmp_path: Path) -> None:  # fmt: skip
    stand_in.tell("hold")  # before the call: the worker forked during it inherits the 16 MiB
    with PrivateGrowth(tmp_path, interval=60) as growth:
        stand_in.tell("fork-write")
    parts = growth.parts_kib
    assert 16 * MIB - SLACK <= parts["copied on write"] < 18 * MIB
    assert parts["new"] < 4 * MIB
    assert parts["direct-write buffers"] == 0


def test_its_own_sampling_catches_memory_held_for_a_while(stand_in: StandIn, tmp_path: Path) -> None:
    with PrivateGrowth(tmp_path, interval=0.005) as growth:
        stand_in.tell("hold")
        time.sleep(0.3)  # some 60 samples' time; one is enough
        stand_in.tell("free")
    assert 16 * MIB - SLACK <= growth.kib < 20 * MIB


def test_no_server_is_an_error_not_a_call_that_added_nothing(tmp_path: Path) -> None:
    with pytest.raises(RuntimeError, match="no server serves"), PrivateGrowth(tmp_path):
        pass
