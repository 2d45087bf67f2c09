"""The native client under test, built once per session by scripts/client.sh with a test build id.

Each test installs it into a fresh directory next to a fake `ocivendir` program (tests/support/fakeprogram.py) that
records its runs.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
BUILD = "0123456789abcdef"
SHIM = r"""
#include <stdlib.h>
#include <unistd.h>
int main(int argc, char **argv) {  /* keeps argv[0] for the recorder: a #! script would lose it */
    char self[4096];
    ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
    char **args = calloc((size_t)argc + 5, sizeof(char *));
    if (n < 0 || !args) return 127;
    self[n] = '\0';
    args[0] = PYTHON; args[1] = "-I"; args[2] = RECORDER; args[3] = self;
    for (int i = 0; i < argc; i++) args[4 + i] = argv[i];
    execv(PYTHON, args);
    return 127;
}
"""


def compile_client(output: Path, build: str = BUILD, *flags: str, env: Mapping[str, str] | None = None) -> Path:
    """scripts/client.sh's build of the client into `output` (`env`: its environment, e.g. CC, else this one's)."""
    subprocess.run([shutil.which("bash") or "/bin/bash", str(ROOT / "scripts" / "client.sh"), str(output), build, *flags], check=True,
                   capture_output=True, text=True, env=env)  # fmt: skip
    return output


@pytest.fixture(scope="session")
def binaries(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The client (`vendir`), a variant that ignores /proc/self/exe (`vendir-noproc`) and the recorder's shim."""
    where = tmp_path_factory.mktemp("client-bin")
    compile_client(where / "vendir")
    compile_client(where / "vendir-noproc", BUILD, "-DOCIVENDIR_TEST_NO_PROC")
    (where / "shim.c").write_text(SHIM)
    recorder = ROOT / "tests" / "support" / "fakeprogram.py"
    subprocess.run([shutil.which("cc") or "/usr/bin/cc", "-O2", "-o", str(where / "shim"), f'-DPYTHON="{sys.executable}"', f'-DRECORDER="{recorder}"',
                    str(where / "shim.c")], check=True)  # fmt: skip
    return where


class Install:
    """A fresh install directory (`vendir` = the client, `ocivendir` = the recorder) and a socket directory D."""

    def __init__(self, root: Path, binaries: Path, server_dir: Path) -> None:
        self.dir = root / "install"
        self.records = self.dir / "records"
        self.records.mkdir(parents=True)
        self.client = self.dir / "vendir"
        shutil.copy(binaries / "vendir", self.client)
        shutil.copy(binaries / "shim", self.dir / "ocivendir")
        self.server_dir = server_dir
        self.started: list[int] = []

    def env(self, **extra: str) -> dict[str, str]:
        """A small, known environment: PATH, D, and what the test adds."""
        return {"PATH": "/usr/bin:/bin", "OCIVENDIR_SERVER_DIR": str(self.server_dir), **extra}

    def popen(self, args: Sequence[str] = ("sync", "-f", "-"), *, argv0: str = "vendir",
              env: Mapping[str, str] | None = None, **kwargs: Any) -> subprocess.Popen[bytes]:  # fmt: skip
        kwargs.setdefault("stdin", subprocess.DEVNULL)
        kwargs.setdefault("stdout", subprocess.PIPE)
        kwargs.setdefault("stderr", subprocess.PIPE)
        return subprocess.Popen([argv0, *args], executable=str(self.client), env=self.env() if env is None else env,
                                **kwargs)  # fmt: skip

    def run(self, args: Sequence[str] = ("sync", "-f", "-"), **kwargs: Any) -> subprocess.CompletedProcess[bytes]:
        with self.popen(args, **kwargs) as proc:
            out, err = proc.communicate(timeout=30)
        return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)

    def runs(self) -> list[dict[str, Any]]:
        """The in-process runs the client fell back to."""
        return [json.loads(p.read_text()) for p in sorted(self.records.glob("run-*.json"))]

    def starts(self, expect: int = 0) -> list[dict[str, Any]]:
        """The detached server starts (waiting up to 20 s for `expect` of them to have recorded themselves)."""
        deadline = time.monotonic() + 20
        while True:
            found = [json.loads(p.read_text()) for p in sorted(self.records.glob("start-*.json"))]
            self.started = [r["pid"] for r in found]
            if len(found) >= expect or time.monotonic() > deadline:
                return found
            time.sleep(0.02)

    def processes(self) -> list[int]:
        """Live processes of this install (a started server, from its fork on, before the client exits).

        A start's grandchild exists before the client exits: first a copy of the client, then the recorder whose
        command line names the shim. So none here after the client exited means none was started.
        """
        found = []
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                exe = str((entry / "exe").readlink())
                cmdline = (entry / "cmdline").read_bytes()
            except OSError:
                continue
            if exe == str(self.client) or str(self.dir).encode() + b"/ocivendir\0" in cmdline:
                found.append(int(entry.name))
        return found

    def kill_started(self) -> None:
        for pid in {*self.started, *self.processes()}:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


@pytest.fixture
def server_dir() -> Iterator[Path]:
    """D, 0700: short, under /tmp (sun_path holds 108 bytes; pytest's tmp_path may be longer)."""
    where = Path(tempfile.mkdtemp(prefix="ovc-", dir="/tmp"))
    try:
        yield where
    finally:
        shutil.rmtree(where, ignore_errors=True)


@pytest.fixture
def install(tmp_path: Path, binaries: Path, server_dir: Path) -> Iterator[Install]:
    installed = Install(tmp_path, binaries, server_dir)
    try:
        yield installed
    finally:
        installed.kill_started()
