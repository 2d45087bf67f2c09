"""Owns: what the benchmark knows of a resident ocivendir server — its process, its CPU and its workers', stopping it.

A server is found by what it is, not by asking it (a query would fork a worker and cost CPU of its own): the process
whose command line is `... server start --foreground` and whose environment names the benchmark's server directory.
Its CPU is utime + stime + cutime + cstime from /proc (ended workers are reaped by the server, so theirs lands in its
children's times; live ones are counted as processes of the server's own): clock ticks, so it is read once around a
batch of calls, never per call.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from tests.support.server import server_pids, stop_servers

__all__ = ["server_cpu_s", "server_pids", "stop_servers"]

_TICK = os.sysconf("SC_CLK_TCK")


def server_cpu_s(directory: Path) -> float:
    """CPU seconds used so far by the servers of `directory` and their reaped workers (0 with none)."""
    total = 0
    for pid in server_pids(directory):
        _settle(pid)
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += sum(int(value) for value in fields[11:15])  # utime, stime, cutime, cstime
    return total / _TICK


def _settle(pid: int) -> None:
    """Wait (up to 2 s) until the server has reaped its ended workers, so their CPU is in its children's times.

    Its live workers (reused, issue 33) are among `server_pids` themselves (they share its command line and
    environment): their own CPU is counted as theirs.
    """
    children = Path(f"/proc/{pid}/task/{pid}/children")
    deadline = time.monotonic() + 2
    while time.monotonic() < deadline:
        try:
            pids = children.read_text().split()
        except OSError:
            return
        if not any(_ended(child) for child in pids):
            return
        time.sleep(0.01)


def _ended(pid: str) -> bool:
    """Whether `pid` has exited and waits to be reaped (a zombie), or is gone."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] in {"Z", "X"}
    except OSError:
        return False
