"""The build under test: one `./scripts/dist.sh` per session (incremental: unchanged inputs rebuild nothing)."""

from __future__ import annotations

import fcntl
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def dist_dir() -> Path:
    """`dist/` with all four artifacts, built (or found fresh) by the one build command.

    Under pytest-xdist every worker asks for it: a lock makes one build and the others find it fresh (dist.sh is
    incremental), rather than two builds writing `build/` and `dist/` at once.
    """
    (ROOT / "build").mkdir(exist_ok=True)
    with (ROOT / "build" / ".dist.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        done = subprocess.run([shutil.which("bash") or "/bin/bash", str(ROOT / "scripts" / "dist.sh")], cwd=ROOT, capture_output=True, text=True,
                              timeout=900, check=False)  # fmt: skip
    if done.returncode != 0:
        pytest.fail(f"scripts/dist.sh failed ({done.returncode}):\n{done.stderr[-6000:]}")
    return ROOT / "dist"


@pytest.fixture(scope="session")
def frozen(dist_dir: Path) -> Path:
    """The onedir build's directory (holds the `ocivendir` executable and `_internal`)."""
    return dist_dir / "ocivendir"
