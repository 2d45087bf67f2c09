"""Owns: what the benchmark knows of a resident ocivendir server — its process, its CPU and its workers', stopping it.

A server is found by what it is, not by asking it (a query would fork a worker and cost CPU of its own): the process
whose command line is `... server start --foreground` and whose environment names the benchmark's server directory.
Its CPU is utime + stime + cutime + cstime from /proc (workers are reaped by the server, so theirs lands in its
children's times): clock ticks, so it is read once around a batch of calls, never per call.
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

__all__ = ["server_cpu_s", "server_pids", "stop_servers"]

_TICK = os.sysconf("SC_CLK_TCK")


def server_pids(directory: Path) -> list[int]:
    """The servers serving `directory`."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().split(b"\0")
            environ = (entry / "environ").read_bytes().split(b"\0")
        except OSError:
            continue
        if (
            b"--foreground" in cmdline
            and b"server" in cmdline
            and f"OCIVENDIR_SERVER_DIR={directory}".encode() in environ
        ):
            found.append(int(entry.name))
    return sorted(found)


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
    """Wait (up to 2 s) until the server has reaped its workers, so their CPU is in its children's times."""
    children = Path(f"/proc/{pid}/task/{pid}/children")
    deadline = time.monotonic() + 2
    while time.monotonic() < deadline:
        try:
            if not children.read_text().strip():
                return
        except OSError:
            return
        time.sleep(0.01)


def stop_servers(directory: Path) -> None:
    """End every server of `directory` (SIGTERM, then SIGKILL after 5 s)."""
    pids = server_pids(directory)
    for pid in pids:
        os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + 5
    while pids and time.monotonic() < deadline:
        pids = [pid for pid in pids if Path(f"/proc/{pid}").exists() and _alive(pid)]
        time.sleep(0.02)
    for pid in pids:
        os.kill(pid, signal.SIGKILL)


def _alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False
