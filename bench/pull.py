"""Owns: the cold-pull scenario: a large single-layer bundle and a bundle of many small files.

Pulled by ocivendir (fetch, verify, extract), `skopeo copy` (fetch and verify into a dir: layout, no extraction) and
`imgpkg pull` when IMGPKG_BIN is set; wall, CPU, peak RSS and the registry's traffic per pull.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.support.registry import Registry

from bench import seed
from bench.accesslog import AccessLog, Traffic, counting
from bench.measure import repeat, run
from bench.tools import Tools, clean_env


@dataclass(frozen=True)
class Case:
    """One artifact to pull: a single-layer bundle of `size_mib`, or a bundle of `files` small files."""

    name: str
    size_mib: int = 0
    files: int = 0


def cases(smoke: bool) -> list[Case]:
    """The artifacts of a full run (100 MiB, 1 GiB, 2,000 files) or a smoke run (small ones of each kind)."""
    if smoke:
        return [Case("2 MiB single-layer bundle", size_mib=2), Case("8 MiB single-layer bundle", size_mib=8),
                Case("100-file bundle", files=100)]  # fmt: skip
    return [Case("100 MiB single-layer bundle", size_mib=100), Case("1 GiB single-layer bundle", size_mib=1024),
            Case("2,000-file bundle", files=2000)]  # fmt: skip


def _commands(tools: Tools, ref: str, out: Path, cache: Path) -> dict[str, list[str]]:
    commands = {"ocivendir": [str(tools.ocivendir), "pull", "-b", ref, "-o", str(out), "--cache-dir", str(cache), "-q"]}
    if tools.skopeo:
        commands["skopeo"] = [str(tools.skopeo), "copy", "--quiet", "--src-tls-verify=false", f"docker://{ref}",
                              f"dir:{out}"]  # fmt: skip
    if tools.imgpkg:
        commands["imgpkg"] = [str(tools.imgpkg), "pull", "-b", ref, "-o", str(out)]
    return commands


def _cold(registry: Registry, argv: list[str], work: Path, reps: int) -> dict[str, Any]:
    """Measure one tool's cold pull: output and cache removed before every repetition."""
    traffic: list[Traffic] = []
    env = clean_env(work / "home")
    once = counting(AccessLog(registry), lambda: run(argv, env=env), traffic)

    def before() -> None:
        for name in ("out", "cache", "home"):
            shutil.rmtree(work / name, ignore_errors=True)
        (work / "home").mkdir()

    measured = repeat(once, reps, before)
    before()
    return {**measured.as_dict(), "requests": traffic[-1].requests, "bytes": traffic[-1].bytes}


def scenario(registry: Registry, tools: Tools, work: Path, reps: int, smoke: bool) -> dict[str, Any]:
    """Every case, every tool; ratios of each tool's median wall against ocivendir's."""
    results: list[dict[str, Any]] = []
    for number, case in enumerate(cases(smoke)):
        ref = _push(registry, case, number, work)
        commands = _commands(tools, ref, work / "out", work / "cache")
        measured = {name: _cold(registry, argv, work, reps) for name, argv in commands.items()}
        results.append({"name": case.name, "ref": ref, "tools": measured})
    skipped = {name: why for name, why in tools.skipped.items() if name in {"skopeo", "imgpkg"}}
    return {"cases": results, "skipped": skipped,
            "notes": "skopeo copy to a dir: layout fetches and verifies but does not extract; ocivendir and imgpkg "
                     "extract the bundle into a directory"}  # fmt: skip


def _push(registry: Registry, case: Case, number: int, work: Path) -> str:
    if case.files:
        return seed.many_files_bundle(registry, f"pull/files{number}", case.files)
    work.mkdir(parents=True, exist_ok=True)
    return seed.big_bundle(registry, f"pull/big{number}", case.size_mib << 20, work)
