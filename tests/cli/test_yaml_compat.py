"""vendir.yml read as vendir 0.40.0 reads it: `<<` merge keys, duplicate keys, case-folded field names.

Each case in tests/golden/yaml/ is a vendir.yml of inline contents and, beside it, what the real vendir did with it
(`.expected`: the exit code, stderr, then every synced file with its text). Ours must do exactly that. When a real
vendir is at hand (VENDIR_BIN, else /work/tools/bin/vendir) the recording is checked against it as well, so the
cases stay true to vendir while CI without it still checks ours against the recording.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from tests.conftest import run_cli

GOLDEN = Path(__file__).resolve().parents[1] / "golden" / "yaml"
CASES = sorted(path.stem for path in GOLDEN.glob("*.yml"))
# read at import: the suite's isolated environment drops VENDIR_* variables before each test
VENDIR = Path(os.environ.get("VENDIR_BIN") or "/work/tools/bin/vendir")


def outcome(code: int, stderr: str, work: Path) -> str:
    """The exit code, stderr and the synced files (`path: text`), as the `.expected` files record them."""
    lines = [f"exit {code}", *stderr.rstrip("\n").splitlines()]
    out = work / "out"
    files = sorted(path for path in out.rglob("*") if path.is_file()) if out.is_dir() else []
    lines += [f"{path.relative_to(work)}: {path.read_text()}" for path in files]
    return "\n".join(lines) + "\n"


def _workdir(tmp_path: Path, case: str, name: str) -> Path:
    work = tmp_path / name
    work.mkdir()
    (work / "vendir.yml").write_bytes((GOLDEN / f"{case}.yml").read_bytes())
    return work


@pytest.mark.parametrize("case", CASES)
def test_ours_reads_the_case_as_vendir_did(case: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("VENDIR_CACHE_DIR", str(tmp_path / "cache"))
    work = _workdir(tmp_path, case, "ours")
    result = run_cli("sync", "--lock-file", "/dev/null", "--chdir", str(work), prog="vendir")
    assert outcome(result.exit_code, result.stderr, work) == (GOLDEN / f"{case}.expected").read_text()


@pytest.mark.skipif(not VENDIR.is_file(), reason="no real vendir (set VENDIR_BIN)")
@pytest.mark.parametrize("case", CASES)
def test_the_recording_is_what_the_real_vendir_does(case: str, tmp_path: Path) -> None:
    work = _workdir(tmp_path, case, "vendir")
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "VENDIR_CACHE_DIR": str(tmp_path / "cache")}
    done = subprocess.run(
        [str(VENDIR), "sync", "--lock-file", "/dev/null"],
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert outcome(done.returncode, done.stderr, work) == (GOLDEN / f"{case}.expected").read_text()


def test_every_case_has_its_recording() -> None:
    assert CASES
    assert sorted(path.stem for path in GOLDEN.glob("*.expected")) == CASES
