"""The program's entry, `run()` in-process: `main()`, then the interpreter's usual exit (issue 26 dropped `os._exit`)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from subprocess import PIPE
from typing import IO

import pytest

WITNESS = "class Witness:\n    def __del__(self):\n        print('finalized', flush=True)\nwitness = Witness()\n"


def entry(
    argv: list[str], setup: str = "", function: str = "run", cwd: Path | None = None, stdout: IO[str] | int = PIPE
) -> subprocess.CompletedProcess[str]:
    """The program as the console script starts it (`function` = "main" for what tests call in-process)."""
    probe = f"import sys\n{setup}sys.argv = {argv!r}\nfrom ocivendir.commands import {function}\n{function}()\n"
    env = {**os.environ, "OCIVENDIR_SERVER": "off"}  # the entry in this process, even in a through-server run
    return subprocess.run([sys.executable, "-c", probe], stdout=stdout, stderr=PIPE, text=True, check=False, cwd=cwd,
                          env=env)  # fmt: skip


def test_a_run_ends_with_the_interpreters_usual_teardown_and_its_output_arrives_whole() -> None:
    done = entry(["ocivendir", "--help"], WITNESS)
    assert done.returncode == 0
    assert done.stdout.splitlines()[-1] == "finalized"  # objects were torn down as in any Python program
    assert done.stdout.removesuffix("finalized\n") == entry(["ocivendir", "--help"], function="main").stdout


@pytest.mark.parametrize(
    "argv",
    [
        ["ocivendir", "version"],
        ["vendir", "sync", "-f", "/nonexistent/vendir.yml"],  # vendir mode: 1
        ["ocivendir", "sync", "-f", "/nonexistent/vendir.yml"],  # ocivendir's own code for a usage error
        ["ocivendir", "pull", "-b", "Not A Reference!", "-o", "out"],
        ["imgpkg", "pull", "--nope"],
    ],
)
def test_exit_codes_and_messages_are_main_s(argv: list[str], tmp_path: Path) -> None:
    quick, reference = entry(argv, cwd=tmp_path), entry(argv, function="main", cwd=tmp_path)
    assert (quick.returncode, quick.stdout, quick.stderr) == (reference.returncode, reference.stdout, reference.stderr)


def test_an_atexit_callback_runs() -> None:
    done = entry(["ocivendir", "version"], "import atexit\natexit.register(lambda: print('atexit ran'))\n" + WITNESS)
    assert done.returncode == 0
    assert done.stdout.splitlines()[1:] == ["atexit ran", "finalized"]


def test_a_live_non_daemon_thread_makes_the_run_wait_for_it() -> None:
    setup = "import threading, time\nthreading.Thread(target=lambda: (time.sleep(0.3), print('thread done'))).start()\n"
    done = entry(["ocivendir", "version"], setup)
    assert done.returncode == 0
    assert done.stdout.splitlines()[-1] == "thread done"


def test_output_that_cannot_be_written_fails_as_it_did_before() -> None:
    with Path("/dev/full").open("w") as full:  # every write fails with ENOSPC when flushed
        quick = entry(["ocivendir", "--help"], stdout=full)
        reference = entry(["ocivendir", "--help"], function="main", stdout=full)
    assert quick.returncode == reference.returncode != 0
    assert quick.stderr == reference.stderr
