"""Owns: the fleet scenario, what kapp-controller does to a registry.

N Apps are reconciled round after round through a program named `vendir` (`sync -f - --lock-file /dev/null`, a fresh
working directory per reconcile, the per-App VENDIR_CACHE_DIR), then one round runs with the registry stopped. Each
tool runs the identical rounds, interleaved round by round so machine noise hits both; the variants share one cache
across Apps, or keep four Apps in flight.
"""

from __future__ import annotations

import itertools
import shutil
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.support.registry import Registry

from bench.accesslog import AccessLog, Traffic
from bench.fleet_apps import CATEGORIES, App
from bench.measure import Run, percentile, run
from bench.serverstat import server_cpu_s, stop_servers
from bench.tools import clean_env

Row = dict[str, Any]  # one JSON object of the report


@dataclass(frozen=True)
class Variant:
    """How the fleet runs: one cache per App or one shared cache, and how many Apps are in flight."""

    name: str
    shared_cache: bool = False
    concurrency: int = 1
    env: tuple[tuple[str, str], ...] = ()  # more environment for every reconcile (a registries.yaml, say)


VARIANTS = (
    Variant("per_app_cache"),
    Variant("shared_cache", shared_cache=True),
    Variant("concurrency_4", concurrency=4),
)


DIST_TOOL = "ocivendir (dist build)"  # the fleet's name for the dist build, when it is built
SERVER_TOOL = "ocivendir (server)"  # the venv's console script (the Python client) through a resident server
DIST_SERVER_TOOL = "ocivendir (dist build, native client + server)"  # what the sidecar runs


@dataclass(frozen=True)
class FleetTool:
    """A tool under test: its `vendir`-named program, and whether it is ocivendir (which reads OCIVENDIR_CACHE_DIR)."""

    name: str
    program: Path
    ocivendir: bool
    server_dir: Path | None = None  # through a resident server living here (its CPU and its workers' counted)


@dataclass(frozen=True)
class Outcome:
    """One reconcile: the App, its process measurements, and whether it produced its directory."""

    app: App
    run: Run
    ok: bool


class Fleet:
    """The Apps, the registry they fetch from, and where reconciles and caches live."""

    def __init__(self, registry: Registry, apps: Sequence[App], work: Path) -> None:
        """Prepare a fleet run over `apps` in `work`."""
        self.registry = registry
        self.log = AccessLog(registry)
        self.apps = list(apps)
        self.work = work
        self.tag_prefixes = {_repo_prefix(app.repo) for app in apps if not app.pinned}
        self._reconciles = itertools.count(1)  # next() is atomic: threads never share a directory

    def _env(self, tool: FleetTool, variant: Variant, app: App) -> dict[str, str]:
        caches = self.work / "caches" / variant.name / tool.name
        home = self.work / "home" / tool.name
        home.mkdir(parents=True, exist_ok=True)
        env = clean_env(home, VENDIR_CACHE_DIR=str(caches / "apps" / app.name))
        if variant.shared_cache:
            env["OCIVENDIR_CACHE_DIR" if tool.ocivendir else "VENDIR_CACHE_DIR"] = str(caches / "shared")
        if tool.ocivendir:  # in-process unless the tool is a server variant (`auto` would start one as `vendir`)
            env["OCIVENDIR_SERVER"] = "on" if tool.server_dir else "off"
        if tool.server_dir:
            env["OCIVENDIR_SERVER_DIR"] = str(tool.server_dir)
        return env | dict(variant.env)

    def reconcile(self, tool: FleetTool, variant: Variant, app: App) -> Outcome:
        """One fetch as kapp-controller runs it, in a fresh directory that is removed afterwards."""
        cwd = self.work / "reconciles" / f"kapp-controller-fetch-template-deploy{next(self._reconciles)}"
        cwd.mkdir(parents=True)
        try:
            argv = [str(tool.program), "sync", "-f", "-", "--lock-file", "/dev/null"]
            done = run(argv, env=self._env(tool, variant, app), cwd=cwd, stdin=app.stdin)
            return Outcome(app, done, done.code == 0 and (cwd / "0").is_dir())
        finally:
            shutil.rmtree(cwd, ignore_errors=True)

    def round(self, tool: FleetTool, variant: Variant, number: int, online: bool) -> Row:
        """Every App once; the registry's traffic and the processes' figures."""
        mark = self.log.mark() if online else None
        once: Callable[[App], Outcome] = lambda app: self.reconcile(tool, variant, app)  # noqa: E731
        served_before = server_cpu_s(tool.server_dir) if tool.server_dir else 0.0
        if variant.concurrency > 1:
            with ThreadPoolExecutor(variant.concurrency) as pool:
                outcomes = list(pool.map(once, self.apps))
        else:
            outcomes = [once(app) for app in self.apps]
        traffic = self.log.since(mark) if mark is not None else Traffic(0, 0, {}, ())
        row = self._record(number, online, outcomes, traffic)
        if tool.server_dir:  # the server's own CPU and its workers': the round's share of every process
            served = server_cpu_s(tool.server_dir) - served_before
            row["server_cpu_s"] = round(served, 2)
            row["cpu_s"] = round(row["cpu_s"] + served, 2)
        return row

    def _record(self, number: int, online: bool, outcomes: list[Outcome], traffic: Traffic) -> Row:
        walls = [o.run.wall_s * 1000 for o in outcomes]
        tag_requests = traffic.under(self.tag_prefixes)
        return {
            "round": number, "online": online, "requests": traffic.requests, "bytes": traffic.bytes,
            "ok": sum(o.ok for o in outcomes), "wall_ms_median": round(percentile(walls, 0.5), 1),
            "wall_ms_p90": round(percentile(walls, 0.9), 1), "cpu_s": round(sum(o.run.cpu_s for o in outcomes), 2),
            "max_rss_kib": max(o.run.rss_kib for o in outcomes),
            "wall_ms_min": round(min(walls), 1), "wall_ms_max": round(max(walls), 1),
            "ok_pinned": sum(o.ok for o in outcomes if o.app.pinned),
            "ok_tag": sum(o.ok for o in outcomes if not o.app.pinned),
            "requests_tag_apps": tag_requests, "requests_pinned_apps": traffic.requests - tag_requests,
            "requests_by_method": dict(sorted(traffic.by_method.items())), "failures": _failures(outcomes, online),
            "failed_by_category": _failed_by_category(outcomes),
        }  # fmt: skip

    def variant(self, tools: Sequence[FleetTool], variant: Variant, online_rounds: int) -> Row:
        """The online rounds (tools interleaved, the first tool alternating), then one round with the registry down."""
        rounds: dict[str, list[Row]] = {tool.name: [] for tool in tools}
        for tool in tools:  # each variant starts with no server: its first round pays for starting one
            if tool.server_dir:
                stop_servers(tool.server_dir)
        for number in range(1, online_rounds + 1):
            for tool in tools if number % 2 else reversed(tools):
                rounds[tool.name].append(self.round(tool, variant, number, online=True))
        self.registry.stop()
        try:
            for tool in tools:
                rounds[tool.name].append(self.round(tool, variant, online_rounds + 1, online=False))
        finally:
            self.registry.restart()
            for tool in tools:
                if tool.server_dir:
                    stop_servers(tool.server_dir)
        return {"concurrency": variant.concurrency, "shared_cache": variant.shared_cache,
                "tools": {name: {"rounds": tool_rounds} for name, tool_rounds in rounds.items()}}  # fmt: skip


def _repo_prefix(repo: str) -> str:
    """The access-log path prefix of every repository an artifact lives in (`fleet/<label>/...`)."""
    return "/v2/" + "/".join(repo.split("/")[:2]) + "/"


def _failed_by_category(outcomes: list[Outcome]) -> dict[str, int]:
    """How many Apps of each category failed."""
    failed: dict[str, int] = {}
    for outcome in outcomes:
        if not outcome.ok:
            failed[outcome.app.category] = failed.get(outcome.app.category, 0) + 1
    return dict(sorted(failed.items()))


def _failures(outcomes: list[Outcome], online: bool) -> list[dict[str, str]]:
    """The first few failures that matter (any online; digest-pinned offline), with the end of their stderr."""
    bad = [o for o in outcomes if not o.ok and (online or o.app.pinned)]
    return [{"app": o.app.name, "exit": str(o.run.code), "stderr": o.run.stderr.strip()[-400:]} for o in bad[:3]]


def scenario(fleet: Fleet, tools: Sequence[FleetTool], online_rounds: int, artifacts: int) -> Row:
    """Every variant of the fleet, with the goal checked for ocivendir."""
    variants = {variant.name: fleet.variant(tools, variant, online_rounds) for variant in VARIANTS}
    tag_apps = sum(not app.pinned for app in fleet.apps)
    ocivendir = {name: variant["tools"]["ocivendir"]["rounds"] for name, variant in variants.items()}
    base = variants.pop("per_app_cache")
    return {
        "apps": len(fleet.apps), "tag_apps": tag_apps, "pinned_apps": len(fleet.apps) - tag_apps,
        "artifacts": artifacts, "online_rounds": online_rounds,
        "shape": {category: sum(app.category == category for app in fleet.apps) for category in CATEGORIES},
        **base, "variants": variants, "goal": goal(ocivendir, tag_apps, len(fleet.apps) - tag_apps),
    }  # fmt: skip


def goal(rounds: dict[str, list[Row]], tag_apps: int, pinned_apps: int) -> Row:
    """Check ocivendir's goal in every variant.

    Warm rounds make at most one request per tag App and none for digest-pinned Apps; the offline round serves every
    digest-pinned App.
    """
    checks = [check for name, rows in rounds.items() for row in rows for check in _checks(name, row, tag_apps,
                                                                                          pinned_apps)]  # fmt: skip
    return {"met": all(check["met"] for check in checks), "checks": checks}


def _checks(variant: str, row: Row, tag_apps: int, pinned_apps: int) -> list[Row]:
    number = row["round"]
    if not row["online"]:
        served = row["ok_pinned"]
        return [{"variant": variant, "round": number, "check": "digest-pinned Apps served offline",
                 "expected": pinned_apps, "measured": served, "met": served == pinned_apps}]  # fmt: skip
    if number == 1:
        return []
    pinned, total = row["requests_pinned_apps"], row["requests"]
    return [
        {"variant": variant, "round": number, "check": "requests for digest-pinned Apps", "expected": 0,
         "measured": pinned, "met": pinned == 0},
        {"variant": variant, "round": number, "check": "requests in all (at most one per tag App)",
         "expected": tag_apps, "measured": total, "met": total <= tag_apps},
    ]  # fmt: skip
