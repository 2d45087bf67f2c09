"""The program run as a shell runs it with `> /dev/full`: every write to its stdout fails with ENOSPC."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

FULL = Path("/dev/full")


def run_into_full_disk(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """`python -m ocivendir ARGS > /dev/full` in `cwd` (through the server when the environment says so)."""
    with FULL.open("w") as full:
        return subprocess.run([sys.executable, "-m", "ocivendir", *args], stdout=full, stderr=subprocess.PIPE,
                              text=True, cwd=cwd, check=False, timeout=120)  # fmt: skip
