"""A new interpreter for tests that count what importing or running something loads (sys.modules starts empty)."""

from __future__ import annotations

import subprocess
import sys


def fresh_python(code: str) -> subprocess.CompletedProcess[str]:
    """Run `code` with `python -c` in a new interpreter of this venv; a non-zero exit fails the test."""
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
