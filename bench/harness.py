"""Benchmark harness: timing of whole commands (median of runs) with the child's peak RSS, side by side."""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OCIVENDIR = [sys.executable, "-m", "ocivendir"]


@dataclass
class Measure:
    """One command's median wall time, peak RSS (MiB) and, for ocivendir, its request count."""

    label: str
    seconds: float
    rss_mib: float
    requests: int | None = None


def measure(label: str, argv: Sequence[str], *, runs: int = 3, before: Callable[[], None] | None = None,
            env: dict[str, str] | None = None) -> Measure:  # fmt: skip
    """The median of `runs` runs (calling `before` each time) and the largest peak RSS."""
    times, peaks, requests = [], [], None
    for _ in range(runs):
        if before is not None:
            before()
        seconds, rss, out = rusage_run(argv, env)
        times.append(seconds)
        peaks.append(rss)
        if out.startswith("{"):
            requests = json.loads(out)["result"].get("requests", {}).get("total")
    return Measure(label, statistics.median(times), max(peaks), requests)


def rusage_run(argv: Sequence[str], env: dict[str, str] | None) -> tuple[float, float, str]:
    """Run and collect the child's own rusage with wait4 (not the cumulative children's maximum)."""
    start = time.perf_counter()
    process = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env)
    assert process.stdout is not None
    out = process.stdout.read()
    _, status, usage = os.wait4(process.pid, 0)
    elapsed = time.perf_counter() - start
    process.returncode = os.waitstatus_to_exitcode(status)
    if process.returncode not in (0, 3):
        raise SystemExit(f"{' '.join(argv)} failed with exit code {process.returncode}")
    return elapsed, usage.ru_maxrss / 1024, out.decode()


def reset(path: Path) -> Callable[[], None]:
    """A `before` hook that removes a path."""

    def _reset() -> None:
        shutil.rmtree(path, ignore_errors=True)

    return _reset


def report(title: str, rows: Sequence[Measure], baseline: Measure | None = None) -> None:
    """Print a table with ratios against the baseline."""
    print(f"\n## {title}")
    print(f"{'command':58} {'median s':>9} {'peak RSS MiB':>13} {'requests':>9} {'ratio':>7}")
    for row in rows:
        ratio = f"{row.seconds / baseline.seconds:.2f}" if baseline and baseline.seconds else "-"
        requests = "-" if row.requests is None else str(row.requests)
        print(f"{row.label:58} {row.seconds:9.3f} {row.rss_mib:13.1f} {requests:>9} {ratio:>7}")
