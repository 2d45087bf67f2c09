"""Owns: the benchmark's command line and writing results.json (machine) and RESULTS.md (human).

Each scenario runs against its own docker-registry on a random 127.0.0.1 port, started and stopped here.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.support.builders import Pusher
from tests.support.registry import Registry

from bench import (
    cache_scale,
    charts,
    fleet,
    fleet_apps,
    fleet_mirror,
    fleet_signed,
    machine,
    pull,
    report,
    soak,
    startup,
    verify,
)
from bench.fleet import DIST_SERVER_TOOL, DIST_TOOL, SERVER_TOOL
from bench.tools import ROOT, Tools, named_vendir

SCENARIOS = ("fleet", "fleet_mirror", "fleet_signed", "pull", "startup", "cache_scale", "verify_relocation", "soak")


def _arguments(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="bench/run.sh", description=__doc__)
    parser.add_argument("--smoke", action="store_true", help="every scenario at a small size (well under 2 minutes)")
    parser.add_argument("--out", type=Path, default=ROOT / "bench", help="where results.json and RESULTS.md go")
    parser.add_argument("--reps", type=int, help="repetitions per figure (default 3; sub-second ones at least 5)")
    parser.add_argument("--apps", type=int, help="Apps in the fleet (default 100, smoke 6)")
    parser.add_argument("--rounds", type=int, help="online fleet rounds before the offline one (default 5, smoke 2)")
    parser.add_argument("--nodes", type=int, help="nodes behind the mirror in fleet_mirror (default 10, smoke 3)")
    parser.add_argument("--mirror-apps", type=int, help="Apps per node in fleet_mirror (default 20, smoke 6)")
    parser.add_argument("--mirror-rounds", type=int, help="online fleet_mirror rounds per mode (default 2, smoke 1)")
    parser.add_argument("--dist", type=Path, help="the dist build to compare (default dist/ocivendir/ocivendir)")
    parser.add_argument("--render", action="store_true", help="only re-render RESULTS.md from OUT/results.json")
    parser.add_argument(
        "--merge",
        action="store_true",
        help="replace only the scenarios run in OUT/results.json (same mode), keeping the others",
    )
    parser.add_argument("--only", default=",".join(SCENARIOS), help=f"comma-separated subset of {','.join(SCENARIOS)}")
    parser.add_argument("--pull-cases", default="", metavar="KEYS",
                        help="comma-separated cases of the pull scenario to run (default all): 100MiB, 1024MiB, "
                             "2000files; with --smoke 2MiB, 8MiB, 100files")  # fmt: skip
    args = parser.parse_args(argv)
    args.reps = args.reps or (1 if args.smoke else 3)
    args.apps = args.apps or (6 if args.smoke else 100)
    args.rounds = args.rounds or (2 if args.smoke else 5)
    args.nodes = args.nodes or (3 if args.smoke else 10)
    args.mirror_apps = args.mirror_apps or (6 if args.smoke else 20)
    args.mirror_rounds = args.mirror_rounds or (1 if args.smoke else 2)
    args.only = [name for name in args.only.split(",") if name]
    args.pull_cases = [key for key in args.pull_cases.split(",") if key]
    unknown = set(args.only) - set(SCENARIOS)
    if unknown:
        parser.error(f"unknown scenarios: {', '.join(sorted(unknown))}")
    return args


def _fleet(registry: Registry, tools: Tools, work: Path, args: argparse.Namespace) -> dict[str, Any]:
    apps, artifacts = fleet_apps.publish(Pusher(registry), args.apps)
    venv_vendir = named_vendir(tools.ocivendir, work / "bin")
    contenders = [fleet.FleetTool("ocivendir", venv_vendir, ocivendir=True),
                  fleet.FleetTool(SERVER_TOOL, venv_vendir, ocivendir=True,
                                  server_dir=_server_dir("venv"))]  # fmt: skip
    if tools.dist:  # the build kapp-controller's sidecar runs, beside the venv's console script
        contenders.append(fleet.FleetTool(DIST_TOOL, named_vendir(tools.dist, work / "bin-dist"), ocivendir=True))
        native = tools.dist.parent / "vendir"
        if native.exists():
            served = fleet.FleetTool(DIST_SERVER_TOOL, native, ocivendir=True, server_dir=_server_dir("dist"))
            contenders.append(served)
    if tools.vendir:
        contenders.append(fleet.FleetTool("vendir", tools.vendir, ocivendir=False))
    try:
        section = fleet.scenario(fleet.Fleet(registry, apps, work), contenders, args.rounds, artifacts)
    finally:
        for contender in contenders:
            if contender.server_dir:
                shutil.rmtree(contender.server_dir, ignore_errors=True)
    if not tools.vendir:
        section["tools"]["vendir"] = {"rounds": [], "skipped": tools.skipped["real vendir"]}
    return section


def _server_dir(name: str) -> Path:
    """A fresh socket directory for one server variant (short: a Unix socket's path has 107 bytes at most)."""
    return Path(tempfile.mkdtemp(prefix=f"ovb-{name}-", dir="/tmp"))


def _fleet_mirror(registry: Registry, tools: Tools, work: Path, args: argparse.Namespace) -> dict[str, Any]:
    published = fleet_apps.publish(Pusher(registry), args.mirror_apps)
    program = named_vendir(tools.ocivendir, work / "bin")
    return fleet_mirror.scenario(registry, program, published, work, args.nodes, args.mirror_rounds)


def _fleet_signed(registry: Registry, tools: Tools, work: Path, args: argparse.Namespace) -> dict[str, Any]:
    published = fleet_apps.publish(Pusher(registry), args.apps)
    program = named_vendir(tools.ocivendir, work / "bin")
    return fleet_signed.scenario(registry, program, published, work, args.rounds)


def _runners(tools: Tools, args: argparse.Namespace) -> dict[str, Callable[[Registry, Path], dict[str, Any]]]:
    entries = 300 if args.smoke else 10_000
    images = 10 if args.smoke else 200
    return {
        "fleet": lambda registry, work: _fleet(registry, tools, work, args),
        "fleet_mirror": lambda registry, work: _fleet_mirror(registry, tools, work, args),
        "fleet_signed": lambda registry, work: _fleet_signed(registry, tools, work, args),
        "pull": lambda registry, work: pull.scenario(registry, tools, work, args.reps, args.smoke, args.pull_cases),
        "startup": lambda registry, work: startup.scenario(registry, tools, work, args.reps),
        "cache_scale": lambda _, work: cache_scale.scenario(tools, work, args.reps, entries),
        "verify_relocation": lambda registry, work: verify.scenario(registry, tools, work, args.reps, images),
        "soak": lambda registry, work: soak.scenario(registry, tools, work, 150 if args.smoke else 10_000),
    }


def _run(name: str, runner: Callable[[Registry, Path], dict[str, Any]], work: Path) -> dict[str, Any]:
    """One scenario against a registry of its own, started and stopped here."""
    print(f"bench: {name} ...", file=sys.stderr, flush=True)
    registry = Registry(mode="plain", workdir=work / "registry").start()
    try:
        return runner(registry, work)
    finally:
        registry.stop()
        shutil.rmtree(work, ignore_errors=True)


def _merged(path: Path, fresh: dict[str, Any], ran: list[str]) -> dict[str, Any]:
    """The results in `path` with the scenarios just run replaced, their load rows too, and the merge recorded."""
    if not path.exists():
        raise SystemExit(f"bench: --merge needs an earlier {path}")
    merged: dict[str, Any] = json.loads(path.read_text())
    if merged["mode"] != fresh["mode"]:
        raise SystemExit(f"bench: --merge of a {fresh['mode']} run into a {merged['mode']} run's {path}")
    for name in ran:
        merged[name] = fresh[name]
    machine_figures = merged["machine"]
    machine_figures["load"] = [row for row in machine_figures["load"] if row["scenario"] not in ran]
    machine_figures["load"] += fresh["machine"]["load"]
    runs = machine_figures.get("merged", [])
    earlier = [{**m, "scenarios": [n for n in m["scenarios"] if n not in ran]} for m in runs]
    machine_figures["merged"] = [m for m in earlier if m["scenarios"]] + [
        {"scenarios": ran, "started_utc": fresh["machine"]["started_utc"], "versions": fresh["machine"]["versions"]}
    ]
    return merged


def main(argv: list[str] | None = None) -> int:
    """Run the chosen scenarios and write the two result files; exit 1 when ocivendir's fleet goal is not met."""
    args = _arguments(argv)
    if args.render:
        rendered = json.loads((args.out / "results.json").read_text())
        (args.out / "RESULTS.md").write_text(report.render(rendered))
        charts.write_charts(rendered, args.out)
        return 0
    # the venv's installed packages carry bytecode; compile the source tree too so start-up is measured fairly
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(ROOT / "cli")], check=True)
    tools = Tools.find(args.dist)
    results: dict[str, Any] = {"mode": "smoke" if args.smoke else "full", "machine": machine.describe(tools)}
    scratch = Path(tempfile.mkdtemp(prefix="ocivendir-bench-"))
    try:
        for name, runner in _runners(tools, args).items():
            if name not in args.only:
                results[name] = {"not_run": "not selected with --only"}
                continue
            with machine.scenario(results["machine"]["load"], name):
                results[name] = _run(name, runner, scratch / name)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    results["skipped"] = tools.skipped
    if args.merge:
        results = _merged(args.out / "results.json", results, args.only)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "results.json").write_text(json.dumps(results, indent=1) + "\n")
    (args.out / "RESULTS.md").write_text(report.render(results))
    charts.write_charts(results, args.out)
    met = results["fleet"].get("goal", {}).get("met", True)
    verdict = "not run" if "not_run" in results["fleet"] else "met" if met else "NOT MET"
    print(f"bench: wrote {args.out / 'RESULTS.md'} and results.json; fleet goal {verdict}",
          file=sys.stderr)  # fmt: skip
    return 0 if met else 1


if __name__ == "__main__":
    sys.exit(main())
