"""Owns: the start-up scenario: `version` and a warm digest-pinned sync.

For ocivendir's venv console script and its dist/ build, against `python -c pass` and the real vendir when VENDIR_BIN
is set. The warm sync is kapp-controller's call of a relocated bundle already in the per-App cache.
"""

from __future__ import annotations

import functools
import itertools
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from tests.support.builders import Pusher, publish_bundle, relocate
from tests.support.registry import Registry

from bench.accesslog import AccessLog
from bench.fleet_apps import App
from bench.measure import Run, repeat, run
from bench.serverstat import server_cpu_s, server_pids, stop_servers
from bench.tools import Tools, clean_env, named_vendir

SERVED = {"ocivendir (venv, Python client + server)", "ocivendir (dist build, native client + server)"}


def _programs(tools: Tools) -> dict[str, Path]:
    """Each program to compare, by label (ocivendir builds reached through a symlink named `vendir`)."""
    programs = {"ocivendir (venv console script)": tools.ocivendir,
                "ocivendir (venv, Python client + server)": tools.ocivendir}  # fmt: skip
    if tools.dist:
        programs["ocivendir (dist build)"] = tools.dist
        if (tools.dist.parent / "vendir").exists():
            programs["ocivendir (dist build, native client + server)"] = tools.dist.parent / "vendir"
    if tools.vendir:
        programs["vendir"] = tools.vendir
    return programs


def _warm_sync(registry: Registry, label: str, program: Path, app: App, work: Path, reps: int) -> dict[str, Any]:
    """The kapp-controller call once to fill the cache, then measured warm; the registry's traffic while warm.

    Through a server, the server's CPU and its workers' over the measured calls is added per call (read once around
    them: /proc counts clock ticks), and the server is stopped afterwards.
    """
    counter = itertools.count()
    home, cache = work / "home", work / "caches" / label.replace(" ", "_")
    home.mkdir(parents=True, exist_ok=True)
    server_dir = Path(tempfile.mkdtemp(prefix="ovb-startup-", dir="/tmp")) if label in SERVED else None
    env = clean_env(home, VENDIR_CACHE_DIR=str(cache), OCIVENDIR_SERVER="on" if server_dir else "off")
    if server_dir:
        env["OCIVENDIR_SERVER_DIR"] = str(server_dir)
    try:
        return _measure_warm(registry, label, program, app, work, reps, counter, env, server_dir)
    finally:
        if server_dir:
            stop_servers(server_dir)
            shutil.rmtree(server_dir, ignore_errors=True)


def _measure_warm(registry: Registry, label: str, program: Path, app: App, work: Path, reps: int,
                  counter: itertools.count[int], env: dict[str, str],
                  server_dir: Path | None) -> dict[str, Any]:  # fmt: skip
    argv = [str(named_vendir(program, work / "bin" / label.replace(" ", "_"))), "sync", "-f", "-", "--lock-file",
            "/dev/null"]  # fmt: skip

    def once() -> Run:
        cwd = work / f"reconcile{next(counter)}"
        cwd.mkdir()
        try:
            return run(argv, env=env, cwd=cwd, stdin=app.stdin)
        finally:
            shutil.rmtree(cwd, ignore_errors=True)

    first = once()
    if first.code != 0:
        raise RuntimeError(f"{label}: first sync failed: {first.stderr[-2000:]}")
    if server_dir:  # the first call ran in-process and started the server: wait until it serves
        deadline = time.monotonic() + 30
        while not server_pids(server_dir) or not any(server_dir.glob("server-*.sock")):
            if time.monotonic() > deadline:
                raise RuntimeError(f"{label}: the server did not start")
            time.sleep(0.05)
        once()
    log = AccessLog(registry)
    mark = log.mark()
    served_before = server_cpu_s(server_dir) if server_dir else 0.0
    repeated = repeat(once, reps)
    row = {"what": "warm digest-pinned sync", "tool": label, **repeated.as_dict(), "requests": log.since(mark).requests}
    if server_dir:
        per_call = (server_cpu_s(server_dir) - served_before) / len(repeated.runs)
        row["server_cpu_s_per_call"] = round(per_call, 5)
        row["cpu_total_s"] = round(repeated.cpu_s.median + per_call, 5)
    return row


def scenario(registry: Registry, tools: Tools, work: Path, reps: int) -> dict[str, Any]:
    """`python -c pass`, `version` for each program, then the warm sync for each program."""
    pusher = Pusher(registry)
    published = publish_bundle(pusher, "startup", images=1)
    relocate(pusher, published, "startup/relocated")
    app = App("startup", "relocated", published.ref(registry, "startup/relocated"), "startup/relocated")
    env = clean_env(work / "home")
    rows = [{"what": "interpreter start-up", "tool": "python -c pass",
             **repeat(lambda: run([sys.executable, "-c", "pass"], env=env), reps).as_dict()}]  # fmt: skip
    programs = _programs(tools)
    for label, program in programs.items():
        if label in SERVED:
            continue  # `version` through a server is the warm sync's floor; the warm sync is what is compared
        version = functools.partial(run, [str(program), "version"], env=env)
        rows.append({"what": "version", "tool": label, **repeat(version, reps).as_dict()})
    rows += [_warm_sync(registry, label, program, app, work, reps) for label, program in programs.items()]
    skipped = {name: why for name, why in tools.skipped.items() if name in {"dist build", "real vendir"}}
    return {"rows": rows, "skipped": skipped}
