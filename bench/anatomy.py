"""Owns: the anatomy of a call through the resident server — fork, adopt, work and restore, each measured alone.

A worker serves calls one after another (issue 33); one process per call is still there as an option
(`OCIVENDIR_SERVER_MAX_CALLS=1`). What each costs is measured here in a process that preloads exactly what the
server preloads (`server/preload.py`), then forks:
- an empty worker that ends at once: the fork and the exit, what one process per call pays on top of every call;
- one worker that serves the warm digest-pinned kapp-controller sync call after call, each in a fresh directory,
  exactly as `server/worker.py` does: the caller's world put in place (`World.enter`: stdio, directory, umask,
  environment, argv, signals — "adopt"), the entry point run ("work"), the worker's own world put back and checked
  for anything left behind (`World.leave`, `World.changed`, `Baseline.left_behind` — "restore").

The worker's first call pays what a fresh copy-on-write child pays on top of the work (every page it writes is copied
first, everything it reads is cold): reported as "work, first call of a fresh worker", against "work" (the later
calls). CPU from CLOCK_PROCESS_CPUTIME_ID inside the worker, minor faults from getrusage; the empty worker's from
wait4. Run by the start-up scenario (`bench/startup.py`); `python -m bench.anatomy SPEC` is its child.
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
PHASES = ("fork", "adopt", "first", "work", "restore")


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
    for key in PHASES:
        values = [s for s in samples if f"{key}_cpu" in s]
        rows[key] = {"cpu_s": Stat.of([s[f"{key}_cpu"] for s in values]).as_dict(5),
                     "minor_faults": Stat.of([s[f"{key}_faults"] for s in values]).as_dict(0)}  # fmt: skip
    return rows


class _Clock:
    """CPU and minor faults of this process since the last `lap`."""

    def __init__(self) -> None:
        self.cpu, self.faults = time.process_time(), resource.getrusage(resource.RUSAGE_SELF).ru_minflt

    def lap(self, figures: dict[str, float], key: str) -> None:
        cpu, faults = time.process_time(), resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        figures[f"{key}_cpu"], figures[f"{key}_faults"] = cpu - self.cpu, faults - self.faults
        self.cpu, self.faults = cpu, faults


def _serve(work: Path, env: dict[str, str], reps: int, report: int) -> None:
    """One worker: a first call, then `reps` more, each adopted, run and restored as server/worker.py does.

    A line per call: the first call's work only (its own key), then every phase of each later call.
    """
    from ocivendir.commands import main  # noqa: PLC0415 - preloaded
    from ocivendir.server.leaks import Baseline  # noqa: PLC0415
    from ocivendir.server.wire import Request  # noqa: PLC0415
    from ocivendir.server.world import World  # noqa: PLC0415

    world = World()
    baseline = Baseline()
    for rep in range(reps + 1):
        target = work / f"call-{os.getpid()}-{rep}"
        target.mkdir()
        request = Request(op="call", build="", umask=0o022, cwd=str(target), argv=list(ARGV), env=env)
        fds = [os.open(work / "stdin.yml", os.O_RDONLY), os.open(os.devnull, os.O_WRONLY),
               os.open(os.devnull, os.O_WRONLY), os.open(target, os.O_RDONLY | os.O_DIRECTORY)]  # fmt: skip
        figures: dict[str, float] = {}
        clock = _Clock()
        world.enter(request, fds)
        clock.lap(figures, "adopt")
        try:
            main()
        except SystemExit as exc:
            if exc.code not in (0, None):
                os._exit(3)
        clock.lap(figures, "first" if rep == 0 else "work")
        world.leave()
        left = baseline.left_behind(-1) or world.changed()
        clock.lap(figures, "restore")
        if left:
            os.write(report, json.dumps({"left": left}).encode() + b"\n")
            os._exit(5)
        shutil.rmtree(target, ignore_errors=True)
        if rep == 0:
            figures = {key: value for key, value in figures.items() if key.startswith("first")}
        os.write(report, json.dumps(figures).encode() + b"\n")


def _fork(run: Any) -> resource.struct_rusage:  # noqa: ANN401 - a callable run in the child
    pid = os.fork()
    if pid == 0:
        try:
            run()
            os._exit(0)
        finally:
            os._exit(4)
    _, status, usage = os.wait4(pid, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"a measured worker failed ({os.waitstatus_to_exitcode(status)})")
    return usage


def _child(spec: dict[str, Any]) -> None:
    """Warm the cache once, preload as the server does, then fork the empty workers and the one reused worker."""
    work = Path(spec["work"])
    os.environ.clear()
    os.environ.update(spec["env"])
    report = os.dup(1)  # the figures go to the measuring parent; the syncs' own output to /dev/null
    null = os.open(os.devnull, os.O_RDWR)
    os.dup2(os.open(work / "stdin.yml", os.O_RDONLY), 0)
    os.dup2(null, 1)
    os.dup2(null, 2)
    from ocivendir.server.preload import preload  # noqa: PLC0415 - what the server imports before its first fork

    def warm_up() -> None:
        from ocivendir.commands import main  # noqa: PLC0415

        target = work / "warm-up"
        target.mkdir()
        os.chdir(target)
        sys.argv = list(ARGV)
        try:
            main()
        except SystemExit as exc:
            if exc.code not in (0, None):
                os._exit(3)

    _fork(warm_up)  # fills the cache
    preload()
    for _ in range(spec["reps"]):
        usage = _fork(lambda: os._exit(0))
        os.write(report, json.dumps({"fork_cpu": usage.ru_utime + usage.ru_stime,
                                     "fork_faults": usage.ru_minflt}).encode() + b"\n")  # fmt: skip
    for _ in range(min(spec["reps"], 5)):  # fresh workers' first calls
        _fork(lambda: _serve(work, spec["env"], 0, report))
    _fork(lambda: _serve(work, spec["env"], spec["reps"], report))


if __name__ == "__main__":
    _child(json.loads(sys.argv[1]))
