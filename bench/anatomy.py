"""Owns: the anatomy of a call through the resident server — the price of a fresh process per call, and the work.

A worker is forked from the warm server for each call and ends with it (issue 21: no state crosses calls). What that
costs is measured here in a process that preloads exactly what the server preloads (`server/preload.py`) and then,
repetition by repetition, forks:
- an empty worker, which ends at once: the fork and the exit (its page tables, its first faults);
- a worker that runs the warm digest-pinned kapp-controller sync once — what a real worker does after adopting the
  caller's world — and then the very same sync twice more in the same process, each in a fresh directory.

The first run pays what a fresh copy-on-write child pays on top of the work: every page it writes is copied first
(minor faults) and everything it reads is cold; the third run is the work alone (reported as "again"). CPU comes from
CLOCK_PROCESS_CPUTIME_ID and the faults from getrusage, both inside the worker; the empty worker's from wait4.
Run by the start-up scenario (`bench/startup.py`); `python -m bench.anatomy SPEC` is its child.
"""

from __future__ import annotations

import json
import os
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from bench.measure import Stat

ARGV = ["vendir", "sync", "-f", "-", "--lock-file", "/dev/null"]


def measure(stdin: str, env: dict[str, str], work: Path, reps: int) -> dict[str, Any]:
    """Run the child that measures; its figures (CPU in seconds, faults per call) as medians over `reps`."""
    work.mkdir(parents=True, exist_ok=True)
    (work / "stdin.yml").write_text(stdin)
    spec = json.dumps({"work": str(work), "env": env, "reps": reps})
    root = Path(__file__).resolve().parent.parent
    child_env = {**env, "PYTHONPATH": f"{root / 'cli'}:{root}"}
    done = subprocess.run([sys.executable, "-m", "bench.anatomy", spec], env=child_env, capture_output=True,
                          text=True, check=False)  # fmt: skip
    if done.returncode != 0:
        raise RuntimeError(f"the server anatomy child failed: {done.stderr[-2000:]}")
    samples: list[dict[str, float]] = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    rows = {}
    for key in ("empty", "first", "again"):
        rows[key] = {"cpu_s": Stat.of([s[f"{key}_cpu"] for s in samples]).as_dict(5),
                     "minor_faults": Stat.of([s[f"{key}_faults"] for s in samples]).as_dict(0)}  # fmt: skip
    return rows


def _sync(work: Path, name: str) -> None:
    """One warm sync in `work/name` (stdin rewound), as the worker runs it: the entry point, its exit caught."""
    from ocivendir.commands import main  # noqa: PLC0415 - preloaded

    target = work / name
    target.mkdir()
    os.chdir(target)
    os.lseek(0, 0, os.SEEK_SET)
    sys.argv = list(ARGV)
    try:
        main()
    except SystemExit as exc:
        if exc.code not in (0, None):
            os._exit(3)


def _worker(work: Path, rep: int, out: int) -> None:
    """The measuring worker: the sync once (as a server's worker), then twice more; its figures on `out`."""
    figures: dict[str, float] = {}
    for key in ("first", "second", "again"):
        cpu, faults = time.process_time(), resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        _sync(work, f"{rep}-{key}")
        figures[f"{key}_cpu"] = time.process_time() - cpu
        figures[f"{key}_faults"] = resource.getrusage(resource.RUSAGE_SELF).ru_minflt - faults
    os.write(out, json.dumps(figures).encode())
    os._exit(0)


def _fork(run: Any) -> tuple[bytes, resource.struct_rusage]:  # noqa: ANN401 - a callable taking the pipe's end
    reader, writer = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(reader)
        try:
            run(writer)
            os._exit(0)
        finally:
            os._exit(4)
    os.close(writer)
    with os.fdopen(reader, "rb") as pipe:
        data = pipe.read()
    _, status, usage = os.wait4(pid, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"a measured worker failed ({os.waitstatus_to_exitcode(status)})")
    return data, usage


def _child(spec: dict[str, Any]) -> None:
    """Warm the cache in-process once, preload as the server does, then fork the measured workers."""
    work = Path(spec["work"])
    os.environ.clear()
    os.environ.update(spec["env"])
    report = os.dup(1)  # the figures go to the measuring parent; the syncs' own output to /dev/null
    stdin = os.open(work / "stdin.yml", os.O_RDONLY)
    os.dup2(stdin, 0)
    null = os.open(os.devnull, os.O_WRONLY)
    os.dup2(null, 1)
    os.dup2(null, 2)
    from ocivendir.server.preload import preload  # noqa: PLC0415 - what the server imports before its first fork

    _fork(lambda _out: _sync(work, "warm-up"))  # fills the cache (the fork's wrapper ends it)
    preload()
    for rep in range(spec["reps"]):
        _, usage = _fork(lambda _out: os._exit(0))
        data, _ = _fork(lambda out, rep=rep: _worker(work, rep, out))
        figures = json.loads(data)
        figures["empty_cpu"] = usage.ru_utime + usage.ru_stime
        figures["empty_faults"] = usage.ru_minflt
        os.write(report, json.dumps(figures).encode() + b"\n")
        for leftover in work.glob(f"{rep}-*"):
            shutil.rmtree(leftover, ignore_errors=True)


if __name__ == "__main__":
    _child(json.loads(sys.argv[1]))
