"""The benchmark's measuring.

Peak RSS is the measured process's own, CPU and exit codes come back, and sub-second figures get five repetitions.
"""

from __future__ import annotations

import resource
import sys

import pytest
from bench.measure import GNU_TIME, SUB_SECOND_REPS, Run, interleaved, percentile, repeat, run, spawnstat


@pytest.mark.skipif(not GNU_TIME.exists(), reason="GNU time is not installed")
def test_peak_rss_is_the_child_s_own_not_the_harness_s() -> None:
    harness_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    small = run([sys.executable, "-S", "-c", "pass"])
    big = run([sys.executable, "-S", "-c", "b = bytearray(96 << 20); b[::4096] = b'x' * len(b[::4096])"])
    assert small.code == 0
    assert big.code == 0
    assert small.rss_kib < 24 * 1024 < harness_kib  # a child forked straight from pytest would report pytest's size
    assert big.rss_kib - small.rss_kib > 90 * 1024


def test_exit_code_cpu_stdin_and_output_come_back() -> None:
    done = run([sys.executable, "-c", "import sys; d = sys.stdin.read(); print(d.upper()); sys.exit(3)"], stdin="abc")
    assert (done.code, done.stdout) == (3, "ABC\n")
    assert done.cpu_s > 0
    assert done.wall_s >= done.cpu_s / 4


@pytest.mark.skipif(spawnstat() is None, reason="no C compiler for bench/spawnstat.c")
def test_a_childs_cpu_is_what_it_burned() -> None:
    """A child that burns 50 ms of CPU more than another is reported with about 50 ms more (spawnstat's wait4)."""
    spin = "import time\nend = time.process_time() + 0.05\nwhile time.process_time() < end: pass"
    baseline = min(run([sys.executable, "-S", "-c", "pass"]).cpu_s for _ in range(5))
    spun = min(run([sys.executable, "-S", "-c", spin]).cpu_s for _ in range(5))
    assert 0.045 <= spun - baseline < 0.1  # the spin itself (give or take start-up's spread), not the measurer's
    assert baseline < 0.1


def test_sub_second_figures_get_five_repetitions_and_a_failure_stops_the_measurement() -> None:
    calls: list[int] = []

    def quick() -> Run:
        calls.append(1)
        return Run(0, 0.01, 0.01, 1000, "", "")

    measured = repeat(quick, 3)
    assert len(calls) == SUB_SECOND_REPS
    assert (measured.wall_s.n, measured.rss_kib.median) == (5, 1000)
    assert len(repeat(lambda: Run(0, 2.0, 1.0, 1, "", ""), 3).runs) == 3
    with pytest.raises(RuntimeError, match="exit code 2: boom"):
        repeat(lambda: Run(2, 0.1, 0.1, 1, "", "boom"), 3)


def test_interleaved_commands_take_turns_and_each_gets_the_repetitions_repeat_would_give() -> None:
    order: list[str] = []

    def command(name: str, wall: float) -> tuple[object, object]:
        def once() -> Run:
            order.append(name)
            return Run(0, wall, wall, 1, "", "")

        return once, lambda: order.append(f"before {name}")

    measured = interleaved({"slow": command("slow", 2.0), "quick": command("quick", 0.1)}, 3)  # type: ignore[dict-item]
    turns = ["before slow", "slow", "before quick", "quick"]
    assert order == turns * 3 + ["before quick", "quick"] * (SUB_SECOND_REPS - 3)
    assert (measured["slow"].wall_s.n, measured["quick"].wall_s.n) == (3, SUB_SECOND_REPS)


def test_percentile_is_nearest_rank() -> None:
    values = [float(v) for v in range(1, 101)]
    assert (percentile(values, 0.5), percentile(values, 0.9), percentile([7.0], 0.9)) == (50.0, 90.0, 7.0)
