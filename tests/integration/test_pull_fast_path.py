"""`pull`'s click-free fast path against a real registry: a command line gives through it exactly what click gives.

Exit code, stdout, stderr, the output tree and the registry's access log, cold and then warm, in ocivendir and imgpkg
modes, for good command lines and bad ones (commands/pullargs.py; flagscan.py).
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.conftest import run_cli
from tests.integration.test_pull import tree
from tests.support.builders import Pusher, make_image, publish_bundle, relocate
from tests.support.registry import Registry

CASES = [
    ["-b", "{copy}", "-o", "{out}"],
    ["-b", "{bundle}", "-o", "{out}", "-r", "--json"],
    ["--bundle={bundle}", "--output", "{out}", "--registry-retry-count", "2", "--concurrency=1", "--tty"],
    ["-i", "{tag}", "-o", "{out}", "-q"],
    ["--image={image}", "--output={out}", "-v", "--column", "x", "-y"],
    ["--lock", "{lock}", "-o", "{out}", "--json"],
    ["-i", "{bundle}", "-o", "{out}", "--image-is-bundle-check", "false"],
    ["-b", "{image}", "-o", "{out}"],
    ["-i", "{bundle}", "-o", "{out}", "--json"],
    ["-b", "{bundle}", "-o", "{out}", "--image-is-bundle-check=false"],
    ["-b", "{bundle}"],
    ["-b", "{bundle}", "-o", "."],
    ["-b", "{bundle}", "-i", "{image}", "-o", "{out}"],
    ["-i", "{image}", "-r", "-o", "{out}"],
    ["-b", "not a reference", "-o", "{out}"],
    ["-i", "{missing}", "-o", "{out}", "--json"],
    ["-i", "{missing}", "-o", "/dev/null"],
    ["-i", "{tag}", "-o", "{out}", "--cache-max-size", "lots"],
    ["-i", "{tag}", "-o", "{out}", "--registry-retry-count", "0"],
    ["-i", "{tag}", "-o", "{out}", "--offline"],
    ["-b", "{bundle}", "-o", "{out}", "--nope"],
]  # fmt: skip


@pytest.fixture(scope="module")
def places(registry: Registry, tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """The references and the BundleLock every case may name (published once: the cases only read them)."""
    pusher, prefix = Pusher(registry), "fast-path"
    published = publish_bundle(pusher, prefix, images=1)
    relocate(pusher, published, f"{prefix}/copy")
    lock = tmp_path_factory.mktemp("fast-path") / "bundle.lock.yml"
    lock.write_text(
        f"apiVersion: imgpkg.carvel.dev/v1alpha1\nkind: BundleLock\nbundle:\n  image: {published.ref(registry)}\n"
    )
    return {
        "bundle": published.ref(registry),
        "copy": published.ref(registry, f"{prefix}/copy"),
        "image": pusher.image(f"{prefix}/img", make_image({"a.yml": "a"}), tag="v1"),
        "tag": f"{registry.host}/{prefix}/img:v1",
        "missing": f"{registry.host}/{prefix}/nothing",
        "lock": str(lock),
    }


def _twice(registry: Registry, args: list[str], prog: str, out: Path) -> list[object]:
    """Cold then warm: each run's exit code, stdout, stderr, output tree and requests, from an empty cache."""
    seen: list[object] = []
    for _ in range(2):
        mark = registry.mark()
        result = run_cli("pull", *args, prog=prog)
        seen.append((result, tree(out) if out.is_dir() else None, registry.since(mark)))
    return seen


@pytest.mark.parametrize("prog", ["ocivendir", "imgpkg"])
@pytest.mark.parametrize("case", CASES, ids=[" ".join(c) for c in CASES])
@pytest.mark.in_process  # it patches the fast path away between its two calls: both must run where the patch is
def test_a_command_line_gives_through_the_fast_path_what_it_gives_through_click(
    registry: Registry, places: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, prog: str,
    case: list[str],
) -> None:  # fmt: skip
    out, cache = tmp_path / "out", tmp_path / "cache"
    args = [arg.format(**places, out=out) for arg in case]
    monkeypatch.setenv("OCIVENDIR_CACHE_DIR", str(cache))
    monkeypatch.chdir(tmp_path)
    fast = _twice(registry, args, prog, out)
    shutil.rmtree(cache, ignore_errors=True)
    shutil.rmtree(out, ignore_errors=True)
    monkeypatch.setattr("ocivendir.commands.pullargs.parse_pull", lambda _args: None)
    click = _twice(registry, args, prog, out)
    assert fast == click
