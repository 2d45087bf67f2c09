"""Owns: the soak scenario — thousands of warm kapp-controller calls through one resident server, and what it keeps.

One digest-pinned relocated bundle App, synced as kapp-controller calls it (`vendir sync -f - --lock-file /dev/null`,
a fresh working directory each time) through the dist build's native client when `dist/` is built, else the venv's
Python client, with no worker retired for its call count. After 100 calls and after the last, the server tree (the
parent and every live worker) is read from /proc: resident memory (the sum of VmRSS, where the pages a worker
shares with the parent count once per process, an upper bound; and the sum of PSS, each shared page divided among
its sharers), open descriptors, processes. Then the same once the server has been idle past the time idle workers
beyond the spare end: what an idle sidecar costs.
The goal (issue 33): after 10,000 calls RSS within 10 % of the figure after 100 and the descriptor count unchanged;
idle, server plus workers at most 96 MiB.
"""

from __future__ import annotations

import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

from tests.support.builders import Pusher, publish_bundle, relocate
from tests.support.registry import Registry

from bench.accesslog import AccessLog
from bench.fleet_apps import App
from bench.measure import run
from bench.serverstat import server_cpu_s, server_pids, stop_servers
from bench.tools import Tools, clean_env, named_vendir
from ocivendir.server.pool import IDLE_SECONDS

__all__ = ["scenario"]

_FIRST = 100
_IDLE_SECONDS = IDLE_SECONDS + 5.0  # idle workers beyond the spare have ended by then


def scenario(registry: Registry, tools: Tools, work: Path, calls: int) -> dict[str, Any]:
    """`calls` warm calls through one server; the server tree's figures after 100 calls, after all, and idle."""
    pusher = Pusher(registry)
    published = publish_bundle(pusher, "soak", images=1)
    relocate(pusher, published, "soak/relocated")
    app = App("soak", "relocated", published.ref(registry, "soak/relocated"), "soak/relocated")
    native = tools.dist is not None and (tools.dist.parent / "vendir").exists()
    program = tools.dist.parent / "vendir" if native and tools.dist else tools.ocivendir
    label = "ocivendir (dist build, native client + server)" if native else "ocivendir (venv, Python client + server)"
    server_dir = Path(tempfile.mkdtemp(prefix="ovb-soak-", dir="/tmp"))
    home = work / "home"
    home.mkdir(parents=True, exist_ok=True)
    # no worker is retired for its call count here, so what a worker keeps shows (its default retires it at 1,000)
    env = clean_env(home, VENDIR_CACHE_DIR=str(work / "cache"), OCIVENDIR_SERVER="on",
                    OCIVENDIR_SERVER_DIR=str(server_dir), OCIVENDIR_SERVER_MAX_CALLS=str(2 * calls + 10))  # fmt: skip
    argv = [str(named_vendir(program, work / "bin")), "sync", "-f", "-", "--lock-file", "/dev/null"]
    try:
        _call(argv, env, app, work, 0)  # cold: fills the cache and starts the server
        _wait_for_server(server_dir)
        log = AccessLog(registry)
        mark = log.mark()
        started, cpu_before = time.monotonic(), server_cpu_s(server_dir)
        after_first: dict[str, Any] = {}
        for number in range(1, calls + 1):
            _call(argv, env, app, work, number)
            if number == _FIRST:
                after_first = _tree(server_dir)
        took = time.monotonic() - started
        after_all = _tree(server_dir)
        server_cpu = server_cpu_s(server_dir) - cpu_before
        time.sleep(_IDLE_SECONDS)
        idle = _tree(server_dir)
        return {
            "tool": label, "calls": calls, "app": "digest-pinned relocated bundle", "wall_s": round(took, 2),
            "server_cpu_ms_per_call": round(1000 * server_cpu / calls, 3),
            "requests": log.since(mark).requests, f"after_{_FIRST}": after_first, "after_all": after_all,
            "idle": idle, "goal": _goal(after_first, after_all, idle),
        }  # fmt: skip
    finally:
        stop_servers(server_dir)
        shutil.rmtree(server_dir, ignore_errors=True)


def _call(argv: list[str], env: dict[str, str], app: App, work: Path, number: int) -> None:
    cwd = work / f"reconcile-{number}"
    cwd.mkdir()
    try:
        done = run(argv, env=env, cwd=cwd, stdin=app.stdin)
    finally:
        shutil.rmtree(cwd, ignore_errors=True)
    if done.code != 0:
        raise RuntimeError(f"soak: call {number} failed: {done.stderr[-2000:]}")


def _wait_for_server(server_dir: Path) -> None:
    deadline = time.monotonic() + 30
    while not server_pids(server_dir) or not any(server_dir.glob("server-*.sock")):
        if time.monotonic() > deadline:
            raise RuntimeError("soak: the server did not start")
        time.sleep(0.05)


def _tree(server_dir: Path) -> dict[str, Any]:
    """The server tree now: processes, the sum of their VmRSS (KiB), their open descriptors."""
    pids = server_pids(server_dir)  # the parent and its live workers (forked: the same command line and environment)
    rss = pss = fds = 0
    for pid in pids:
        try:
            status = Path(f"/proc/{pid}/status").read_text()
            rollup = Path(f"/proc/{pid}/smaps_rollup").read_text()
            fds += len(list(Path(f"/proc/{pid}/fd").iterdir()))
        except OSError:
            continue
        rss += _field(status, "VmRSS:")
        pss += _field(rollup, "Pss:")
    return {"processes": len(pids), "rss_kib": rss, "pss_kib": pss, "fds": fds}


def _field(text: str, name: str) -> int:
    """A `Name:   1234 kB` line's number (0 when absent)."""
    return next((int(line.split()[1]) for line in text.splitlines() if line.startswith(name)), 0)


def _goal(first: dict[str, Any], last: dict[str, Any], idle: dict[str, Any]) -> dict[str, Any]:
    growth = last["rss_kib"] / first["rss_kib"] - 1 if first.get("rss_kib") else 0.0
    checks = {
        "RSS within 10 % of the figure after 100 calls": abs(growth) <= 0.10,
        "descriptors unchanged": last["fds"] == first["fds"],
        "idle server and workers at most 96 MiB": idle["rss_kib"] <= 96 * 1024,
    }
    return {"rss_growth": round(growth, 4), "checks": checks, "met": all(checks.values())}
