"""Owns: the verify-relocation scenario: `verify-relocation --each-image` of a bundle naming N images.

A relocated bundle by tag (200 images in a full run) with its content cached: 1 HEAD to resolve the tag plus one HEAD
probe per image.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

from tests.support.builders import Pusher, publish_bundle, relocate
from tests.support.registry import Registry

from bench.accesslog import AccessLog, Traffic, counting
from bench.measure import repeat, run
from bench.tools import Tools, clean_env


def scenario(registry: Registry, tools: Tools, work: Path, reps: int, images: int) -> dict[str, Any]:
    """The check with the default pool and with `--concurrency 1`, each with the registry's traffic per run."""
    pusher = Pusher(registry)
    published = publish_bundle(pusher, "verify", images=images)
    relocate(pusher, published, "verify/relocated", with_locations=False)
    env = clean_env(work / "home")
    base = [str(tools.ocivendir), "verify-relocation", "-b", f"{registry.host}/verify/relocated:v1", "--each-image",
            "--cache-dir", str(work / "cache"), "-q"]  # fmt: skip
    warm = run(base, env=env)
    if warm.code != 0:
        raise RuntimeError(f"verify-relocation failed: {warm.stderr[-2000:]}")
    log = AccessLog(registry)
    rows = []
    for label, argv in (("default pool", base), ("--concurrency 1", [*base, "--concurrency", "1"])):
        traffic: list[Traffic] = []
        once = counting(log, functools.partial(run, argv, env=env), traffic)
        rows.append({"command": f"verify-relocation --each-image, {label}", **repeat(once, reps).as_dict(),
                     "requests": traffic[-1].requests})  # fmt: skip
    return {"images": images, "rows": rows}
