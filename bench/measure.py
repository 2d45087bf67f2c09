"""Owns: running one child process and measuring it, and the statistics every figure is reported with.

Each child is run under `bench/spawnstat.c` (compiled into build/bench/ on first use), which reports the child's own
wall, user+sys CPU (wait4: the child and whatever it waited for) and peak RSS: forked from that small parent, the
child's peak RSS is its own (Linux carries a process's peak across exec, so a child forked straight from this large
Python process would report at least this process's size), and no harness start-up is in any figure. Without a C
compiler, GNU time's %M gives the peak RSS and wall and CPU are taken around GNU time, whose own start-up (about
1 ms of CPU) then lands in every figure alike. Figures are medians with min and max over repetitions.
"""

from __future__ import annotations

import contextlib
import functools
import os
import shutil
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
_ROOT = Path(__file__).resolve().parents[1]


@functools.cache
def spawnstat() -> Path | None:
    """The measuring parent, compiled once per source change into build/bench/; None without a C compiler."""
    source = _ROOT / "bench" / "spawnstat.c"
    compiler = shutil.which(os.environ.get("CC", "cc")) or shutil.which("gcc")
    if compiler is None:
        return None
    built = _ROOT / "build" / "bench" / f"spawnstat-{source.stat().st_mtime_ns}"
    if not built.exists():
        built.parent.mkdir(parents=True, exist_ok=True)
        partial = built.with_name(f"{built.name}.{os.getpid()}.tmp")  # racing compilers (the suite's workers)
        done = subprocess.run([compiler, "-std=c11", "-O2", "-o", str(partial), str(source)], capture_output=True,
                              check=False)  # fmt: skip
        if done.returncode != 0:
            return None
        partial.replace(built)
    return built


def rss_method() -> str:
    """How the children are measured on this machine (for the report)."""
    if spawnstat() is not None:
        return ("bench/spawnstat.c: the measured process forked from a small C parent, its own wall, CPU (wait4) and "
                "peak RSS, no harness start-up in any figure")  # fmt: skip
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
    """Run `argv` to completion: its own wall, CPU (wait4 of the child, not cumulative RUSAGE_CHILDREN), peak RSS."""
    parent = spawnstat()
    with tempfile.NamedTemporaryFile("r", prefix="bench-rss-") as report:
        if parent is not None:
            wrapped = [str(parent), report.name, "--", *argv]
        elif GNU_TIME.exists():
            wrapped = [str(GNU_TIME), "-f", "%M", "-o", report.name, "--", *argv]
        else:
            wrapped = list(argv)
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
    cpu, rss = usage.ru_utime + usage.ru_stime, int(usage.ru_maxrss)
    if parent is not None and len(lines) == 4 and all(part.isdigit() for part in lines):
        rss, cpu, wall = int(lines[0]), (int(lines[1]) + int(lines[2])) / 1e6, int(lines[3]) / 1e9
    elif parent is None and GNU_TIME.exists() and lines and lines[-1].isdigit():
        rss = int(lines[-1])
    return Run(process.returncode, wall, cpu, rss, out.decode(errors="replace"), err.decode(errors="replace"))


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
