"""Owns: what the benchmark knows of a resident server — its processes, their CPU and a call's memory, stopping it.

A server is found by what it is, not by asking it (a query would fork a worker and cost CPU of its own): the process
whose command line is `... server start --foreground` and whose environment names the benchmark's server directory.
Its CPU is utime + stime + cutime + cstime from /proc (ended workers are reaped by the server, so theirs lands in its
children's times; live ones are counted as processes of the server's own): clock ticks, so it is read once around a
batch of calls, never per call.
"""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path
from typing import Self

from tests.support.server import server_parents, server_pids, stop_servers

__all__ = ["PrivateGrowth", "server_cpu_s", "server_pids", "stop_servers"]

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


class PrivateGrowth:
    """The private memory a call added to the server's processes at its peak (issue 33's goal: at most 16 MiB).

    A context around one call. Private memory is Private_Clean + Private_Dirty of /proc/PID/smaps: pages this process
    alone maps, so pages it shared with the server's parent count once they are copied on write. Sampled every
    `interval` seconds by a thread (a read costs ~1 ms, which is why the benchmark does this in a pass of its own,
    not in its timed repetitions). `kib` is the sum over the server's processes of (peak − before); a process that
    appears during the call (the spare forked ahead of the next call) counts with all of its private memory.

    `parts_kib` splits that growth by where it lies, at each process's peak (`KINDS`): the direct-write buffers
    (`fs/dropbehind.py` maps them shared and anonymous: /dev/zero), pages copied on write (in a mapping the server's
    parent has at the same addresses: what a worker inherited), and new memory (the heap beyond the parent's, thread
    arenas, anonymous mappings of its own).
    """

    def __init__(self, directory: Path, interval: float = 0.005) -> None:  # noqa: D107
        self._directory, self._interval = directory, interval
        self._before: dict[int, dict[str, int]] = {}
        self._peak: dict[int, dict[str, int]] = {}
        self._parents: list[int] = []
        self._inherited: frozenset[str] = frozenset()
        self._failed: Exception | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, name="private-growth", daemon=True)

    def __enter__(self) -> Self:  # noqa: D105
        self._parents = server_parents(self._directory)
        if not self._parents:  # a figure of no process would read as a call that added nothing
            raise RuntimeError(f"no server serves {self._directory}")
        self._inherited = frozenset(_ranges(self._parents))
        self._once()
        self._before = dict(self._peak)
        self._thread.start()
        return self

    def __exit__(self, *_exc: object) -> None:  # noqa: D105
        self._stop.set()
        self._thread.join()
        if self._failed is not None:  # a sampler that died would leave only the last sample: too low, and silent
            raise RuntimeError("sampling the server's memory failed") from self._failed
        self._once()

    @property
    def kib(self) -> int:
        """The growth, in KiB, once the context has ended."""
        return sum(self.parts_kib.values())

    @property
    def parts_kib(self) -> dict[str, int]:
        """The growth by kind (`KINDS`), in KiB, once the context has ended."""
        parts = dict.fromkeys(KINDS, 0)
        for pid, peak in self._peak.items():
            before = self._before.get(pid, {})
            for kind in KINDS:
                parts[kind] += peak.get(kind, 0) - before.get(kind, 0)
        return parts

    def _sample(self) -> None:
        try:
            while not self._stop.wait(self._interval):
                self._once()
        except Exception as exc:  # noqa: BLE001 - any failure is reported by __exit__, in the measuring thread
            self._failed = exc

    def _once(self) -> None:
        """One sample of the parents and their children now (a worker forked meanwhile among them)."""
        for parent in self._parents:
            try:
                children = [int(pid) for pid in Path(f"/proc/{parent}/task/{parent}/children").read_text().split()]
            except OSError:
                children = []
            for pid in (parent, *children):
                inherited = self._inherited if pid != parent else frozenset()
                if (parts := _private_parts(pid, inherited)) is not None and sum(parts.values()) > sum(
                    self._peak.get(pid, {}).values()
                ):
                    self._peak[pid] = parts


KINDS = ("direct-write buffers", "copied on write", "new")


def _ranges(pids: list[int]) -> set[str]:
    """The address ranges of the mappings of `pids` (what a worker forked from them inherits)."""
    ranges: set[str] = set()
    for pid in pids:
        try:
            text = Path(f"/proc/{pid}/maps").read_text()
        except OSError:
            continue
        ranges.update(line.split(" ", 1)[0] for line in text.splitlines())
    return ranges


def _private_parts(pid: int, inherited: frozenset[str]) -> dict[str, int] | None:
    """Private_Clean + Private_Dirty of `pid` in KiB by kind (`KINDS`), or None when it is gone.

    A mapping is a direct-write buffer when it maps /dev/zero, copied on write when its address range is in
    `inherited`, else new.
    """
    try:
        text = Path(f"/proc/{pid}/smaps").read_text()
    except OSError:
        return None
    parts = dict.fromkeys(KINDS, 0)
    kind = KINDS[2]
    for line in text.splitlines():
        head = line.split(None, 6)
        if "-" in head[0] and not head[0].endswith(":"):  # a mapping's first line: range perms offset dev inode path
            path = head[5] if len(head) > 5 else ""  # the path field: absent for anonymous memory
            kind = KINDS[0] if path == "/dev/zero" else KINDS[1] if head[0] in inherited else KINDS[2]
        elif head[0] in ("Private_Clean:", "Private_Dirty:"):
            parts[kind] += int(head[1])
    return parts
