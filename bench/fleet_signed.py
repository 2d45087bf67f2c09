"""Owns: the signed fleet — the fleet's rounds with signature verification (`OCIVENDIR_POLICY`) beside the same without.

Every artifact the fleet's Apps extract is signed as cosign does (the `.sig` image in its own repository, relocated
copies included; tests/support/cosign.py) with one P-256 key, and one ClusterImagePolicy names every fleet repository
with that key. The same Apps are reconciled by ocivendir as kapp-controller runs them (bench/fleet.py, one cache per
App), once with the policy and once without, interleaved round by round so machine noise hits both; then one round
with the registry stopped. The goal: warm rounds with verification cost 0 requests more than without, and at most
1.1x the CPU (user+sys of every reconcile, summed over the warm rounds).
"""

from __future__ import annotations

import urllib.request
from pathlib import Path
from typing import Any

from tests.support.builders import Pusher
from tests.support.cosign import Key, policy, sign
from tests.support.registry import Registry

from bench.fleet import Fleet, FleetTool, Variant
from bench.fleet_apps import App

Row = dict[str, Any]
CPU_BUDGET = 1.1  # verified warm rounds may cost at most this times the CPU of the same rounds unverified
_ACCEPT = "application/vnd.oci.image.manifest.v1+json, application/vnd.docker.distribution.manifest.v2+json"


def _digest(registry: Registry, app: App) -> str:
    """The manifest digest an App extracts (a tag's, asked of the registry with one HEAD)."""
    if "@" in app.ref:
        return app.ref.split("@", 1)[1]
    tag = app.ref.rsplit(":", 1)[1]
    request = urllib.request.Request(
        f"{registry.url}/v2/{app.repo}/manifests/{tag}", method="HEAD", headers={"Accept": _ACCEPT}
    )
    with urllib.request.urlopen(request, timeout=30) as response:
        return str(response.headers["Docker-Content-Digest"])


def sign_fleet(registry: Registry, apps: list[App], key: Key) -> int:
    """Sign every distinct artifact the Apps extract, in the repository they extract it from; how many."""
    targets = {(app.repo, _digest(registry, app)) for app in apps}
    pusher = Pusher(registry)
    for repo, digest in sorted(targets):
        sign(pusher, repo, digest, key)
    return len(targets)


def scenario(registry: Registry, program: Path, published: tuple[list[App], int], work: Path, rounds: int) -> Row:
    """The online rounds with and without the policy (interleaved), then one round each with the registry stopped."""
    apps, artifacts = published
    key = Key.make("p256")
    signed = sign_fleet(registry, apps, key)
    path = work / "policy.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(policy("fleet", f"{registry.host}/fleet/**", key))
    variants = (Variant("unsigned"), Variant("signed", env=(("OCIVENDIR_POLICY", str(path)),)))
    fleet, tool = Fleet(registry, apps, work), FleetTool("ocivendir", program, ocivendir=True)
    figures: dict[str, list[Row]] = {variant.name: [] for variant in variants}
    for number in range(1, rounds + 1):
        for variant in variants if number % 2 else reversed(variants):
            figures[variant.name].append(fleet.round(tool, variant, number, online=True))
    registry.stop()
    try:
        for variant in variants:
            figures[variant.name].append(fleet.round(tool, variant, rounds + 1, online=False))
    finally:
        registry.restart()
    tag_apps = sum(not app.pinned for app in apps)
    return {
        "apps": len(apps), "tag_apps": tag_apps, "pinned_apps": len(apps) - tag_apps, "artifacts": artifacts,
        "signed_artifacts": signed, "online_rounds": rounds, "cpu_budget": CPU_BUDGET,
        "variants": {name: {"rounds": rows} for name, rows in figures.items()},
        "goal": goal(figures["unsigned"], figures["signed"], len(apps) - tag_apps),
    }  # fmt: skip


def goal(unsigned: list[Row], signed: list[Row], pinned_apps: int) -> Row:
    """0 extra requests in every warm round, at most CPU_BUDGET x the CPU over them, every App verified and served."""
    warm = [(plain, checked) for plain, checked in zip(unsigned, signed, strict=True)
            if plain["online"] and plain["round"] > 1]  # fmt: skip
    checks = [{"round": checked["round"], "check": "extra requests with verification", "expected": 0,
               "measured": checked["requests"] - plain["requests"],
               "met": checked["requests"] == plain["requests"]} for plain, checked in warm]  # fmt: skip
    base, verified = sum(p["cpu_s"] for p, _ in warm), sum(c["cpu_s"] for _, c in warm)
    cpu = round(verified / base, 3) if base else 0.0
    checks.append({"round": "warm", "check": "CPU with verification ÷ without", "expected": f"≤ {CPU_BUDGET}",
                   "measured": cpu, "met": bool(base) and cpu <= CPU_BUDGET})  # fmt: skip
    served = [row["ok"] for row in signed if row["online"]]
    checks.append({"round": "online", "check": "reconciles ok with verification", "expected": signed[0]["ok"],
                   "measured": min(served), "met": min(served) == max(served) == unsigned[0]["ok"]})  # fmt: skip
    offline = signed[-1]["ok_pinned"]
    checks.append({"round": signed[-1]["round"], "check": "digest-pinned Apps served offline, verified",
                   "expected": pinned_apps, "measured": offline, "met": offline == pinned_apps})  # fmt: skip
    return {"met": all(check["met"] for check in checks), "cpu_ratio": cpu, "checks": checks}
