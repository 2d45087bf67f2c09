"""`python -m ocivendir` run inside an untrusted checkout imports nothing of ours from it (issue 22.8).

A hostile working directory holds a module for every name ocivendir and its dependencies import; each one, if imported,
leaves a mark and kills the process. `-m` alone still lets CPython's `runpy` import its few standard modules from there
before ocivendir runs (the README documents `-P` for that); from the entry on, nothing is imported from it.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

# what ocivendir imports for the commands below, and the dependencies they pull in (not all on every path)
OURS = ["click", "yaml", "_yaml", "rich", "platformdirs", "markdown_it", "pygments", "mdurl", "sqlite3", "json", "re",
        "typing", "enum", "tarfile", "hashlib", "threading", "pathlib", "socket", "ssl", "ipaddress", "http",
        "shutil", "textwrap", "datetime", "uuid", "gettext", "locale", "inspect", "ocivendir_test_missing"]  # fmt: skip
# what CPython's runpy imports for `-m` before the package's code runs
RUNPY = ["importlib", "warnings", "contextlib", "collections", "keyword", "operator", "reprlib", "functools", "types"]
VENDIR_YML = """apiVersion: vendir.k14s.io/v1alpha1
kind: Config
directories:
- path: vendor
  contents:
  - path: values
    inline:
      paths: {values.yml: "replicas: 2\\n"}
"""


def hostile(tmp_path: Path, names: list[str]) -> tuple[Path, Path]:
    work, marks = tmp_path / "checkout", tmp_path / "marks"
    work.mkdir()
    marks.mkdir()
    for name in names:
        (work / f"{name}.py").write_text(f"import os\nopen({str(marks / name)!r}, 'w').close()\nos._exit(97)\n")
    (work / "vendir.yml").write_text(VENDIR_YML)
    return work, marks


@pytest.mark.parametrize(
    "argv",
    [
        ["--help"],
        ["version"],
        ["sync", "--no-cache"],
        ["sync", "--no-cache", "--json"],
        ["pull", "-i", "x@@", "-o", "o"],
    ],
    ids=" ".join,
)
def test_python_m_imports_nothing_of_ours_from_the_working_directory(tmp_path: Path, argv: list[str]) -> None:
    work, marks = hostile(tmp_path, OURS)
    done = subprocess.run([sys.executable, "-m", "ocivendir", *argv], cwd=work, capture_output=True, text=True,
                          check=False)  # fmt: skip
    assert sorted(p.name for p in marks.iterdir()) == []
    assert done.returncode != 97, done.stderr
    assert done.returncode == (2 if argv[0] == "pull" else 0), done.stderr
    if argv[0] == "sync":
        assert (work / "vendor/values/values.yml").read_text() == "replicas: 2\n"


def test_python_p_m_imports_nothing_at_all_from_the_working_directory(tmp_path: Path) -> None:
    work, marks = hostile(tmp_path, OURS + RUNPY)
    done = subprocess.run([sys.executable, "-P", "-m", "ocivendir", "sync", "--no-cache"], cwd=work,
                          capture_output=True, text=True, check=False)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert sorted(p.name for p in marks.iterdir()) == []


def test_an_explicit_pythonpath_entry_for_the_working_directory_is_kept(tmp_path: Path) -> None:
    work, marks = hostile(tmp_path, ["click"])
    env = {"PYTHONPATH": str(work), "PATH": "/usr/bin:/bin"}
    done = subprocess.run([sys.executable, "-m", "ocivendir", "--help"], cwd=work, capture_output=True, text=True,
                          check=False, env=env)  # fmt: skip
    assert done.returncode == 97  # the caller asked for that directory on the path: only -m's own entry is dropped
    assert [p.name for p in marks.iterdir()] == ["click"]
