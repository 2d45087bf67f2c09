"""Owns: the start-up scenario: `version` and a warm digest-pinned sync.

For ocivendir's venv console script and its dist/ build, against `python -c pass` and the real vendir when VENDIR_BIN
is set. The warm sync is kapp-controller's call of a relocated bundle already in the per-App cache.
"""

from __future__ import annotations

import functools
import itertools
import shutil
import sys
from pathlib import Path
from typing import Any

from tests.support.builders import Pusher, publish_bundle, relocate
from tests.support.registry import Registry

from bench.accesslog import AccessLog
from bench.fleet_apps import App
from bench.measure import Run, repeat, run
from bench.tools import Tools, clean_env, named_vendir


def _programs(tools: Tools) -> dict[str, Path]:
    """Each program to compare, by label (ocivendir builds reached through a symlink named `vendir`)."""
    programs = {"ocivendir (venv console script)": tools.ocivendir}
    if tools.dist:
        programs["ocivendir (dist build)"] = tools.dist
    if tools.vendir:
        programs["vendir"] = tools.vendir
    return programs


def _warm_sync(registry: Registry, label: str, program: Path, app: App, work: Path, reps: int) -> dict[str, Any]:
    """The kapp-controller call once to fill the cache, then measured warm; the registry's traffic while warm."""
    counter = itertools.count()
    home, cache = work / "home", work / "caches" / label.replace(" ", "_")
    home.mkdir(parents=True, exist_ok=True)
    env = clean_env(home, VENDIR_CACHE_DIR=str(cache))
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
    log = AccessLog(registry)
    mark = log.mark()
    measured = repeat(once, reps).as_dict()
    return {"what": "warm digest-pinned sync", "tool": label, **measured, "requests": log.since(mark).requests}


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
        version = functools.partial(run, [str(program), "version"], env=env)
        rows.append({"what": "version", "tool": label, **repeat(version, reps).as_dict()})
    rows += [_warm_sync(registry, label, program, app, work, reps) for label, program in programs.items()]
    skipped = {name: why for name, why in tools.skipped.items() if name in {"dist build", "real vendir"}}
    return {"rows": rows, "skipped": skipped}
