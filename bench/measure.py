"""Owns: running one child process and measuring it, and the statistics every figure is reported with.

Wall is timed here; user+sys CPU comes from wait4 (the child and whatever it waited for). Peak RSS comes from GNU
time's %M when /usr/bin/time exists: Linux carries a process's peak RSS across exec, so a child forked straight from
this (large) Python process would report at least this process's own size. Figures are medians with min and max over
repetitions.
"""

from __future__ import annotations

import contextlib
import os
import statistics
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

# anything under a second is repeated at least this often; longer runs at least `reps` times
SUB_SECOND_REPS = 5
GNU_TIME = Path("/usr/bin/time")


def rss_method() -> str:
    """How peak RSS is measured on this machine (for the report)."""
    if GNU_TIME.exists():
        return "GNU time %M of the measured process (forked from the small time process, so its own peak)"
    return "wait4 ru_maxrss; /usr/bin/time is missing, so small processes show at least the harness's own RSS"


@dataclass(frozen=True)
class Run:
    """One finished child: exit code, wall seconds, CPU seconds (user+sys), peak RSS in KiB, and its stdout."""

    code: int
    wall_s: float
    cpu_s: float
    rss_kib: int
    stdout: str
    stderr: str


def run(argv: Sequence[str], *, env: Mapping[str, str] | None = None, cwd: Path | None = None,
        stdin: str | None = None) -> Run:  # fmt: skip
    """Run `argv` to completion: wall, CPU from this child's wait4 (not the cumulative RUSAGE_CHILDREN), peak RSS."""
    with tempfile.NamedTemporaryFile("r", prefix="bench-rss-") as report:
        wrapped = [str(GNU_TIME), "-f", "%M", "-o", report.name, "--", *argv] if GNU_TIME.exists() else list(argv)
        start = time.perf_counter()
        process = subprocess.Popen(
            wrapped, stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, env=dict(env) if env is not None else None, cwd=cwd,
        )  # fmt: skip
        out, err = _exchange(process, stdin)
        _, status, usage = os.wait4(process.pid, 0)
        wall = time.perf_counter() - start
        process.returncode = os.waitstatus_to_exitcode(status)
        lines = report.read().split()
    rss = int(lines[-1]) if GNU_TIME.exists() and lines and lines[-1].isdigit() else int(usage.ru_maxrss)
    return Run(process.returncode, wall, usage.ru_utime + usage.ru_stime, rss, out.decode(errors="replace"),
               err.decode(errors="replace"))  # fmt: skip


def _exchange(process: subprocess.Popen[bytes], stdin: str | None) -> tuple[bytes, bytes]:
    """Feed stdin and read stdout and stderr without reaping the child (communicate() would; wait4 needs it)."""
    assert process.stdout is not None
    assert process.stderr is not None
    errors: list[bytes] = []
    stderr = process.stderr
    reader = threading.Thread(target=lambda: errors.append(stderr.read()))
    reader.start()
    if process.stdin is not None:
        with contextlib.suppress(BrokenPipeError):
            process.stdin.write((stdin or "").encode())
        with contextlib.suppress(BrokenPipeError):
            process.stdin.close()
    out = process.stdout.read()
    reader.join()
    process.stdout.close()
    stderr.close()
    return out, errors[0]


@dataclass(frozen=True)
class Stat:
    """A figure over repetitions: median with min and max, and how many repetitions."""

    median: float
    min: float
    max: float
    n: int

    @classmethod
    def of(cls, values: Sequence[float]) -> Stat:
        """The median, min and max of `values`."""
        return cls(statistics.median(values), min(values), max(values), len(values))

    def as_dict(self, digits: int = 4) -> dict[str, float | int]:
        """The JSON form."""
        return {"median": round(self.median, digits), "min": round(self.min, digits), "max": round(self.max, digits),
                "n": self.n}  # fmt: skip


def percentile(values: Sequence[float], fraction: float) -> float:
    """The nearest-rank percentile (p90 of 100 values is the 90th smallest)."""
    ordered = sorted(values)
    rank = max(1, min(len(ordered), round(fraction * len(ordered) + 0.4999)))
    return ordered[rank - 1]


@dataclass(frozen=True)
class Repeated:
    """A command measured over repetitions: wall, CPU and peak RSS, each as a Stat."""

    wall_s: Stat
    cpu_s: Stat
    rss_kib: Stat
    runs: tuple[Run, ...]

    def as_dict(self) -> dict[str, object]:
        """The JSON form."""
        return {"wall_s": self.wall_s.as_dict(), "cpu_s": self.cpu_s.as_dict(), "max_rss_kib": self.rss_kib.as_dict(0)}


def repeat(once: Callable[[], Run], reps: int, before: Callable[[], None] | None = None) -> Repeated:
    """Run `once` `reps` times (calling `before` each time), and more up to 5 when the median is under a second.

    A repetition that fails (non-zero exit) stops the measurement with its stderr: a figure of a failing command
    would mean nothing.
    """
    return interleaved({"": (once, before)}, reps)[""]


def interleaved(
    commands: dict[str, tuple[Callable[[], Run], Callable[[], None] | None]], reps: int
) -> dict[str, Repeated]:
    """`repeat` for several commands at once, taking turns: repetition k of each runs before repetition k + 1 of any.

    Drift in the machine (file-system work here costs ten times more in one hour than in the next) then weighs on
    every command alike, instead of on whichever was measured last. Each command gets the repetitions `repeat`
    would give it.
    """
    runs: dict[str, list[Run]] = {name: [] for name in commands}

    def wanted(done: list[Run]) -> bool:
        return len(done) < reps or (len(done) < SUB_SECOND_REPS and reps > 1 and _median_wall(done) < 1.0)

    while any(wanted(done) for done in runs.values()):
        for name, (once, before) in commands.items():
            if not wanted(runs[name]):
                continue
            if before is not None:
                before()
            result = once()
            if result.code != 0:
                raise RuntimeError(f"{name or 'measured command'} failed with exit code {result.code}: "
                                   f"{result.stderr[-2000:]}")  # fmt: skip
            runs[name].append(result)
    return {name: Repeated(Stat.of([r.wall_s for r in done]), Stat.of([r.cpu_s for r in done]),
                           Stat.of([float(r.rss_kib) for r in done]), tuple(done))
            for name, done in runs.items()}  # fmt: skip


def _median_wall(runs: Sequence[Run]) -> float:
    return statistics.median(r.wall_s for r in runs) if runs else 0.0
