"""Owns: the cache-at-scale scenario: `cache ls` and `cache prune --dry-run` over an index of N entries.

The index (10,000 entries in a full run) is seeded through its own recording call: one bundle manifest and one layer
per entry.
"""

from __future__ import annotations

import functools
import hashlib
from pathlib import Path
from typing import Any

from bench.measure import repeat, run
from bench.tools import Tools, clean_env
from ocivendir.cache.index import BlobRow, CacheIndex
from ocivendir.cache.store import BlobStore
from ocivendir.oci.reference import parse_digest


def _digest(text: str) -> str:
    return "sha256:" + hashlib.sha256(text.encode()).hexdigest()


def seed(root: Path, entries: int, now: float) -> None:
    """An index of `entries` refs, last used a minute apart (rows only: `cache ls` and `prune --dry-run` read no blobs).

    The spread over days gives an age-based prune something to choose.
    """
    BlobStore(root).ensure_layout()
    clock = [now]
    index = CacheIndex(root / "index.db", clock=lambda: clock[0])
    try:
        for number in range(entries):
            clock[0] = now - number * 60.0
            _record(index, number)
    finally:
        index.close()


def _record(index: CacheIndex, number: int) -> None:
    manifest = BlobRow(digest=parse_digest(_digest(f"manifest {number}")), size=500,
                       media_type="application/vnd.docker.distribution.manifest.v2+json")  # fmt: skip
    layer = BlobRow(digest=parse_digest(_digest(f"layer {number}")), size=100_000,
                    media_type="application/vnd.docker.image.rootfs.diff.tar.gzip")  # fmt: skip
    index.record_ref(f"registry.example.com/app{number}@{manifest.digest}", manifest, "bundle", [layer])


def scenario(tools: Tools, work: Path, reps: int, entries: int) -> dict[str, Any]:
    """`cache ls`, `cache ls --json` and two `cache prune --dry-run` forms over a seeded cache."""
    import time  # noqa: PLC0415

    root = work / "cache"
    seed(root, entries, time.time())
    env = clean_env(work / "home")
    base = [str(tools.ocivendir), "cache"]
    commands = {
        "cache ls": [*base, "ls", "--cache-dir", str(root)],
        "cache ls --json": [*base, "ls", "--cache-dir", str(root), "--json"],
        "cache prune --max-size 500MiB --dry-run": [*base, "prune", "--max-size", "500MiB", "--dry-run",
                                                    "--cache-dir", str(root)],
        "cache prune --older-than 72h --dry-run": [*base, "prune", "--older-than", "72h", "--dry-run", "--cache-dir",
                                                   str(root)],
    }  # fmt: skip
    rows = [{"command": name, **repeat(functools.partial(run, argv, env=env), reps).as_dict()}
            for name, argv in commands.items()]  # fmt: skip
    return {"entries": entries, "rows": rows}
