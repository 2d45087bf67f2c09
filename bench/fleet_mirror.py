"""Owns: the fleet behind a mirror — N node caches through one Distribution proxy-mode mirror vs straight to origin.

The Apps are the fleet's (bench/fleet_apps.py), each reconciled as kapp-controller does (bench/fleet.py) by ocivendir
with one cache per node (OCIVENDIR_CACHE_DIR, as the shared-cache overlay sets it). Nodes run one after another, so
the origin's access log gives each node's share of a round. Each mode starts from empty node caches (and the mirror
from empty storage): the online rounds, then one round with the origin stopped (the mirror still up). Every figure is
counted from the registries' own access logs.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.support.registry import Registry

from bench.accesslog import AccessLog, Traffic
from bench.fleet import Fleet, FleetTool, Variant
from bench.fleet_apps import CATEGORIES, App

Row = dict[str, Any]
MODES = ("direct", "mirror")


@dataclass(frozen=True)
class Nodes:
    """The fleet's nodes: the origin, the Apps each node reconciles, the `vendir`-named ocivendir, where they live."""

    origin: Registry
    apps: list[App]
    program: Path
    work: Path
    count: int

    def fleets(self, mode: str) -> list[Fleet]:
        """One Fleet per node, each with its own directory (and so its own cache) for this mode."""
        return [Fleet(self.origin, self.apps, self.work / mode / f"node{n:02}") for n in range(1, self.count + 1)]


def _registries_yaml(path: Path, origin: Registry, mirror: Registry) -> Path:
    """The nodes' registries.yaml: the origin's one mirror endpoint."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f'mirrors:\n  "{origin.host}":\n    endpoint: ["{mirror.url}"]\n')
    return path


def _mode(nodes: Nodes, mirror: Registry | None, online_rounds: int) -> Row:
    """The online rounds, then one with the origin stopped; with `mirror`, every node asks it first."""
    name = "direct" if mirror is None else "mirror"
    env: tuple[tuple[str, str], ...] = ()
    if mirror is not None:
        config = _registries_yaml(nodes.work / name / "registries.yaml", nodes.origin, mirror)
        env = (("OCIVENDIR_REGISTRY_CONFIG", str(config)),)
    variant = Variant("node", shared_cache=True, env=env)
    tool = FleetTool("ocivendir", nodes.program, ocivendir=True)
    fleets = nodes.fleets(name)
    mirror_log = AccessLog(mirror) if mirror is not None else None
    rounds = [_round(fleets, tool, variant, number, mirror_log, online=True) for number in range(1, online_rounds + 1)]
    nodes.origin.stop()
    try:
        rounds.append(_round(fleets, tool, variant, online_rounds + 1, mirror_log, online=False))
    finally:
        nodes.origin.restart()
    return {"rounds": rounds}


def _round(fleets: list[Fleet], tool: FleetTool, variant: Variant, number: int, mirror: AccessLog | None,
           *, online: bool) -> Row:  # fmt: skip
    """Every node reconciles every App once, one node after another."""
    origin = fleets[0].log
    origin_mark = origin.mark() if online else None
    mirror_mark = mirror.mark() if mirror is not None else None
    per_node = [fleet.round(tool, variant, number, online) for fleet in fleets]
    at_origin = origin.since(origin_mark) if origin_mark is not None else Traffic(0, 0, {}, ())
    at_mirror = mirror.since(mirror_mark) if mirror is not None and mirror_mark is not None else None
    failures = [failure for row in per_node for failure in row["failures"]]
    return {
        "round": number, "origin_up": online, "reconciles": sum(len(f.apps) for f in fleets),
        "ok": sum(r["ok"] for r in per_node), "ok_pinned": sum(r["ok_pinned"] for r in per_node),
        "ok_tag": sum(r["ok_tag"] for r in per_node),
        "origin_requests_per_node": [r["requests"] for r in per_node], **_figures("origin", at_origin),
        **(_figures("mirror", at_mirror) if at_mirror is not None else {}),
        "cpu_s": round(sum(r["cpu_s"] for r in per_node), 2), "failures": failures[:3],
    }  # fmt: skip


def _kind(path: str) -> str:
    """What a request was for: the `/v2/` ping, a manifest, a blob, a tag list."""
    if path.rstrip("/") == "/v2":
        return "ping"
    return next((kind for kind in ("manifests", "blobs", "tags") if f"/{kind}/" in path), "other")


def _figures(side: str, traffic: Traffic) -> Row:
    """Requests (by method and by kind), bytes, blob GETs and the most GETs any one blob had, as `<side>_...` keys."""
    blobs = Counter(path.rsplit("/", 1)[1] for path in traffic.gets if "/blobs/" in path)
    return {
        f"{side}_requests": traffic.requests, f"{side}_bytes": traffic.bytes,
        f"{side}_by_method": dict(sorted(traffic.by_method.items())),
        f"{side}_by_kind": dict(sorted(Counter(_kind(path) for path in traffic.paths).items())),
        f"{side}_blob_gets": sum(blobs.values()), f"{side}_most_gets_per_blob": max(blobs.values(), default=0),
    }  # fmt: skip


def scenario(origin: Registry, program: Path, published: tuple[list[App], int], work: Path, nodes: int,
             online_rounds: int) -> Row:  # fmt: skip
    """Both modes: the nodes straight to the origin, then through a fresh proxy-mode mirror of it."""
    apps, artifacts = published
    fleet = Nodes(origin, apps, program, work, nodes)
    modes = {"direct": _mode(fleet, None, online_rounds)}
    mirror = Registry(mode="plain", workdir=work / "mirror-registry", proxy_remote=origin.url).start()
    try:
        modes["mirror"] = _mode(fleet, mirror, online_rounds)
    finally:
        mirror.stop()
    tag_apps = sum(not app.pinned for app in apps)
    return {
        "nodes": nodes, "apps": len(apps), "tag_apps": tag_apps, "pinned_apps": len(apps) - tag_apps,
        "artifacts": artifacts, "online_rounds": online_rounds,
        "shape": {category: sum(app.category == category for app in apps) for category in CATEGORIES},
        "modes": modes,
    }  # fmt: skip
