"""A new interpreter: for tests that count what importing something loads, or that drive a whole process's state.

`fresh_python` starts with sys.modules empty; `reported` runs a script that owns its stdio, signals and /proc status
and reads back what it reported.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

CLI = Path(__file__).resolve().parents[2] / "cli"


def fresh_python(code: str) -> subprocess.CompletedProcess[str]:
    """Run `code` with `python -c` in a new interpreter of this venv; a non-zero exit fails the test."""
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)


def reported(script: str) -> dict[str, object]:
    """The dict `script` left in its `report`, run in a new interpreter; a non-zero exit fails the test.

    The report comes through a pipe of its own: the script may rebind its stdio.
    """
    read, write = os.pipe()
    script += f"\nos.write({write}, json.dumps(report).encode())\n"
    try:
        done = subprocess.run([sys.executable, "-c", script], check=False, env={**os.environ, "PYTHONPATH": str(CLI)},
                              pass_fds=[write], capture_output=True, text=True, timeout=60)  # fmt: skip
    finally:
        os.close(write)
    with os.fdopen(read, "rb") as answer:
        data = answer.read()
    assert done.returncode == 0, done.stderr
    return json.loads(data)  # type: ignore[no-any-return]
