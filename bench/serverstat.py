"""Owns: what the benchmark knows of a resident ocivendir server — its process, its CPU and its workers', stopping it.

A server is found by what it is, not by asking it (a query would cost CPU of its own): the process whose command
line is `... server start --foreground` and whose environment names the benchmark's server directory. Its CPU is
utime + stime + cutime + cstime from /proc (workers it has reaped land in its children's times), plus the same four
of every live descendant: a pooled worker serves many calls and lives on, so its CPU is read where it is. Clock
ticks, so it is read once around a batch of calls, never per call.
"""

from __future__ import annotations

import os
from pathlib import Path

from tests.support.server import server_pids, stop_servers

__all__ = ["descendants", "server_cpu_s", "server_pids", "stop_servers"]

_TICK = os.sysconf("SC_CLK_TCK")


def server_cpu_s(directory: Path) -> float:
    """CPU seconds used so far by the servers of `directory`, their live workers and the workers they reaped."""
    total = 0
    for pid in server_pids(directory):
        for member in [*descendants(pid), pid]:  # the workers first: one reaped meanwhile is then in cutime
            total += _ticks(member)
    return total / _TICK


def descendants(pid: int) -> list[int]:
    """The live descendants of `pid` (children of every thread, recursively)."""
    found: list[int] = []
    queue = [pid]
    while queue:
        current = queue.pop()
        try:
            tasks = list(Path(f"/proc/{current}/task").iterdir())
        except OSError:
            continue
        for task in tasks:
            try:
                children = [int(c) for c in (task / "children").read_text().split()]
            except OSError:
                continue
            found += children
            queue += children
    return found


def _ticks(pid: int) -> int:
    """The CPU ticks of `pid`: utime + stime + cutime + cstime (0 when it is gone)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0
    return sum(int(value) for value in fields[11:15])
