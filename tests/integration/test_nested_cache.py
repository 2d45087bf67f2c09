"""Nested bundles come from the cache like the top one: `pull -r` and `recursive: true` at every depth.

Digest-pinned means immutable at every depth: once a two-level nesting (outer → middle → inner) has been fetched and
verified, a warm re-run makes no request, and works offline and with the registry stopped — relocated (all copied
into one repository, as `imgpkg copy` leaves it) or not.
"""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from tests.conftest import run_cli
from tests.support.builders import Published, Pusher, make_bundle, publish_two_level, relocate_chain
from tests.support.registry import Registry

HEAD = "apiVersion: vendir.k14s.io/v1alpha1\nkind: Config\n"


def snapshot(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() if p.is_file() else b"" for p in sorted(root.rglob("*"))}


def build(registry: Registry, shape: str) -> tuple[str, list[Published]]:
    """The reference to pull for a shape of the tree, and the chain (innermost first).

    `relocated`: the whole tree copied into one repository; `original`: nothing copied; `mixed`: an original outer
    bundle naming a relocated copy of the middle one (which then finds its own nested bundle by the locations image).
    """
    pusher = Pusher(registry)
    chain = publish_two_level(pusher, "nest")
    if shape == "relocated":
        relocate_chain(pusher, chain, "nest/mirror")
        return chain[-1].ref(registry, "nest/mirror"), chain
    if shape == "mixed":
        relocate_chain(pusher, chain[:2], "nest/mirror")
        middle = chain[1].ref(registry, "nest/mirror")
        outer = make_bundle({"outer.yml": "mixed\n"}, [middle, *list(chain[-1].images)[1:]])
        return pusher.image("nest/mixed", outer, "v1"), chain
    return chain[-1].ref(registry), chain


def pull(ref: str, out: Path, cache: Path, *extra: str) -> dict[str, object]:
    result = run_cli("pull", "-b", ref, "-r", "-o", str(out), "--cache-dir", str(cache), "--json", *extra)
    assert result.exit_code == 0, result.stderr
    return json.loads(result.stdout)["result"]  # type: ignore[no-any-return]


def sync(work: Path, ref: str, cache: Path, *extra: str) -> dict[str, object]:
    (work / "vendir.yml").write_text(
        HEAD
        + textwrap.dedent(f"""\
        directories:
        - path: vendor
          contents:
          - path: app
            imgpkgBundle: {{image: "{ref}", recursive: true}}
        """)
    )
    result = run_cli("sync", "--chdir", str(work), "--cache-dir", str(cache), "--json", *extra)
    assert result.exit_code == 0, result.stderr
    return json.loads(result.stdout)["result"]  # type: ignore[no-any-return]


def nested_dirs(root: Path, chain: list[Published]) -> list[Path]:
    return [root / ".imgpkg/bundles" / f"sha256-{p.bundle.hex}" for p in chain[:-1]]


SHAPES = pytest.mark.parametrize("shape", ["relocated", "original", "mixed"])


@SHAPES
def test_pull_r_of_a_two_level_nesting_is_served_warm_offline_and_with_the_registry_stopped(
    own_registry: Registry, tmp_path: Path, shape: str
) -> None:
    ref, chain = build(own_registry, shape)
    cache = tmp_path / "cache"
    pull(ref, tmp_path / "cold", cache)
    cold = snapshot(tmp_path / "cold")
    assert all((d / ".imgpkg/images.yml").is_file() for d in nested_dirs(tmp_path / "cold", chain))
    marker = "nest/inner/img0@" if shape == "original" else "nest/mirror@"
    assert marker in (nested_dirs(tmp_path / "cold", chain)[0] / ".imgpkg/images.yml").read_text()

    mark = own_registry.mark()
    warm = pull(ref, tmp_path / "warm", cache)
    assert own_registry.since(mark) == []
    assert warm["requests"]["total"] == 0  # type: ignore[index]
    assert snapshot(tmp_path / "warm") == cold

    pull(ref, tmp_path / "offline", cache, "--offline")
    assert snapshot(tmp_path / "offline") == cold
    own_registry.stop()
    pull(ref, tmp_path / "stopped", cache)
    assert snapshot(tmp_path / "stopped") == cold


@SHAPES
def test_recursive_sync_of_a_two_level_nesting_is_served_warm_offline_and_with_the_registry_stopped(
    own_registry: Registry, tmp_path: Path, shape: str
) -> None:
    ref, chain = build(own_registry, shape)
    cache, work = tmp_path / "cache", tmp_path / "work"
    work.mkdir()
    sync(work, ref, cache)
    app = work / "vendor/app"
    cold = snapshot(app)
    assert len([d for d in nested_dirs(app, chain) if d.is_dir()]) == 2

    mark = own_registry.mark()
    warm = sync(work, ref, cache)
    assert own_registry.since(mark) == []
    assert warm["requests"]["total"] == 0  # type: ignore[index]
    assert snapshot(app) == cold

    sync(work, ref, cache, "--offline")
    assert snapshot(app) == cold
    own_registry.stop()
    sync(work, ref, cache)
    assert snapshot(app) == cold
