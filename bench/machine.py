"""Owns: the machine section of the report and the load record.

Cores, CPU model, memory, Python and tool versions; the 1-minute loadavg and duration at the start and end of every
scenario, since the machine may be shared.
"""

from __future__ import annotations

import os
import platform
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path

from bench.measure import rss_method
from bench.tools import Tools


def describe(tools: Tools) -> dict[str, object]:
    """Everything about this machine a reader needs to weigh the figures."""
    return {
        "cores": os.cpu_count() or 0,
        "cpu_model": _cpu_model(),
        "memory_gib": _memory_gib(),
        "kernel": platform.release(),
        "python": sys.version.split()[0],
        "versions": tools.versions(),
        "rss_method": rss_method(),
        "started_utc": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "load": [],
    }


def _cpu_model() -> str:
    info = Path("/proc/cpuinfo")
    if info.exists():
        for line in info.read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or "unknown"


def _memory_gib() -> float:
    info = Path("/proc/meminfo")
    if info.exists():
        for line in info.read_text().splitlines():
            if line.startswith("MemTotal:"):
                return round(int(line.split()[1]) / 1024 / 1024, 1)
    return 0.0


def loadavg() -> float:
    """The 1-minute load average."""
    return round(os.getloadavg()[0], 2)


@contextmanager
def scenario(load: list[dict[str, object]], name: str) -> Iterator[None]:
    """Record the load at the start and end of a scenario, and how long it took."""
    start, began = loadavg(), time.monotonic()
    try:
        yield
    finally:
        load.append({"scenario": name, "load_start": start, "load_end": loadavg(),
                     "seconds": round(time.monotonic() - began, 1)})  # fmt: skip
