"""What a call leaves behind in a reused worker: a descriptor it still holds retires the worker; garbage does not.

A descriptor held only by a reference cycle (an answer's socket, say) is closed when CPython collects the cycle: the
next call can neither see nor use it, so it is no reason to pay for a fork and a warm-up. Each case runs in a child
interpreter (a worker's baseline is the whole process's: the suite's own threads and descriptors would be in it),
with automatic collection off, so what the check sees is what the call left.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

CLI = Path(__file__).resolve().parents[2] / "cli"

PRELUDE = """
import gc, json, os, socket
from ocivendir.server.leaks import Baseline
gc.collect()
gc.disable()
report = {}
"""


def _play(body: str) -> dict[str, object]:
    script = PRELUDE + textwrap.dedent(body) + "\nprint(json.dumps(report))\n"
    done = subprocess.run([sys.executable, "-c", script], check=False, env={**os.environ, "PYTHONPATH": str(CLI)},
                          capture_output=True, text=True, timeout=60)  # fmt: skip
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_a_descriptor_only_garbage_holds_is_collected_and_is_no_reason_to_retire() -> None:
    report = _play(
        """
        baseline = Baseline()
        cycle = [socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)]
        cycle.append(cycle)
        fd = cycle[0].fileno()
        del cycle
        report["reason"] = baseline.left_behind(-1)
        try:
            os.fstat(fd)
            report["closed"] = False
        except OSError:
            report["closed"] = True
        """
    )
    assert report == {"reason": None, "closed": True}


def test_a_descriptor_still_held_is_left_behind() -> None:
    report = _play(
        """
        baseline = Baseline()
        kept = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        report["fd"] = kept.fileno()
        report["reason"] = baseline.left_behind(-1)
        kept.close()
        report["after"] = baseline.left_behind(-1)
        """
    )
    reason = report["reason"]
    assert isinstance(reason, str)
    assert reason.startswith(f"descriptors left open: {report['fd']} ")
    assert report["after"] is None
