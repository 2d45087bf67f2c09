"""A many-directory sync killed at any step of its swap: after the next run, even a failing one, all old or all new.

Never some directories new and the rest old (issue 34.5), SIGKILL and SIGTERM alike.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.conftest import run_cli
from tests.support.builders import Pusher, make_image
from tests.support.registry import Registry

HEAD = "apiVersion: vendir.k14s.io/v1alpha1\nkind: Config\n"
IMAGES = [f"vendor/d{n}" for n in range(5)]
TARGETS = [*IMAGES, "vendor/local", "other/values"]  # two parents: a journal copy in each

# `sync` in a process of its own that dies by `signo` just before the `at`-th rename, exchange or removal of its swap
KILLED_AT = textwrap.dedent("""\
    import os, sys
    from ocivendir.commands import main
    from ocivendir.fs import swap, swapset
    at, signo, count = int(sys.argv[1]), int(sys.argv[2]), [-1]
    def counted(real):
        def call(*args):
            if count[0] >= 0:
                if count[0] == at:
                    os.kill(os.getpid(), signo)
                count[0] += 1
            return real(*args)
        return call
    def swap_all(pairs):
        count[0] = 0
        real_swap_all(pairs)
    real_swap_all, swapset.swap_all = swapset.swap_all, swap_all
    os.rename = counted(os.rename)
    swap.exchange = swapset.exchange = counted(swap.exchange)
    swapset.remove_tree, swapset.remove_file = counted(swapset.remove_tree), counted(swapset.remove_file)
    main(sys.argv[3:], "ocivendir")
    """)


def config(version: str, refs: dict[str, str], extra: str = "") -> str:
    directories = [
        f"- path: {path}\n  contents:\n  - path: .\n    image: {{url: '{refs[version]}'}}\n" for path in IMAGES
    ]
    directories.append(f"- path: vendor/local\n  contents:\n  - path: .\n    directory: {{path: src-{version}}}\n")
    directories.append(
        f"- path: other/values\n  contents:\n  - path: .\n    inline: {{paths: {{version.txt: {version}}}}}\n"
    )
    if extra:
        directories.append(f"- path: vendor/extra\n  contents:\n  - path: .\n    image: {{url: '{extra}'}}\n")
    return HEAD + "directories:\n" + "".join(directories)


def versions(work: Path) -> set[str]:
    """The version each target holds, once no leftover of a run is beside them."""
    leftovers = [p.name for d in ("vendor", "other") for p in (work / d).iterdir() if ".ocivendir-" in p.name]
    assert leftovers == [], leftovers
    return {(work / target / "version.txt").read_text() for target in TARGETS}


def killed(work: Path, cache: Path, at: int, signo: int) -> int:
    done = subprocess.run(
        [sys.executable, "-c", KILLED_AT, str(at), str(signo), "sync", "--chdir", str(work), "-q"],
        capture_output=True, text=True, check=False, timeout=120,
        env={**os.environ, "OCIVENDIR_CACHE_DIR": str(cache), "OCIVENDIR_SERVER": "off"},
    )  # fmt: skip
    assert done.returncode in {0, -signo}, done.stderr
    return done.returncode


def sync(work: Path, text: str) -> int:
    (work / "vendir.yml").write_text(text)
    return run_cli("sync", "--chdir", str(work), "-q").exit_code


def test_a_kill_at_every_step_of_the_swap_then_a_failing_run_leaves_all_old_or_all_new(
    own_registry: Registry, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cache, work = tmp_path / "cache", tmp_path / "work"
    monkeypatch.setenv("OCIVENDIR_CACHE_DIR", str(cache))
    pusher = Pusher(own_registry)
    refs = {
        v: pusher.image("kills/app", make_image({"version.txt": v, "pad.bin": v * 100_000})) for v in ("old", "new")
    }
    extra = pusher.image("kills/extra", make_image({"never.txt": "fetched"}))
    for version in ("old", "new"):
        (work / f"src-{version}").mkdir(parents=True)
        (work / f"src-{version}/version.txt").write_text(version)
    assert sync(work, config("new", refs)) == 0  # both versions in the cache: the runs below need no registry
    assert sync(work, config("old", refs)) == 0
    own_registry.stop()  # from here on, only `vendor/extra` would need it: the run that names it fails
    failing = config("new", refs, extra=extra)

    # steps 0-1 write the journal's copies, 2-15 exchange each target's trees then rename its old one aside: a kill
    # before the last exchange (14) is done rolls the set back, any later one forward
    outcomes = {}
    step = 0
    while True:
        signo = signal.SIGTERM if step in {7, 14, 15} else signal.SIGKILL
        (work / "vendir.yml").write_text(config("new", refs))
        if killed(work, cache, step, signo) == 0:
            break
        if step == 7:  # a run whose config does not even load touches nothing: the journal and old trees wait
            assert sync(work, HEAD + "directories: [") == 2
            assert list((work / "vendor").glob(".*.ocivendir-swap-*"))
            assert list((work / "vendor").glob(".*.ocivendir-old-*"))
        assert sync(work, failing) == 1
        outcomes[step] = versions(work)
        assert sync(work, config("old", refs)) == 0
        assert versions(work) == {"old"}
        step += 1
    assert versions(work) == {"new"}
    assert outcomes == {s: {"old"} if s <= 14 else {"new"} for s in range(step)}
    assert step > 16  # the kills after the last rename (while old trees and the journal are removed) roll forward


def test_a_run_that_holds_only_part_of_a_killed_set_refuses_and_the_interrupted_config_recovers_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cache, work = tmp_path / "cache", tmp_path / "work"
    work.mkdir()
    monkeypatch.setenv("OCIVENDIR_CACHE_DIR", str(cache))

    def inline(version: str, paths: tuple[str, ...] = ("v", "w")) -> str:
        return (
            HEAD
            + "directories:\n"
            + "".join(
                f"- path: {path}\n  contents:\n  - path: c\n    inline: {{paths: {{version.txt: {version}}}}}\n"
                for path in paths
            )
        )

    def held() -> dict[str, str]:
        return {p: (work / p / "c/version.txt").read_text() for p in ("v", "w")}

    assert sync(work, inline("old")) == 0
    (work / "vendir.yml").write_text(inline("new"))
    assert killed(work, cache, 3, signal.SIGKILL) == -signal.SIGKILL  # the journal, then v exchanged, renamed aside
    assert held() == {"v": "new", "w": "old"}
    before = sorted(str(p) for p in work.rglob("*"))
    for argv in (["-d", "v/c"], []):  # `-d` holds v only; a config that dropped w holds v only
        (work / "vendir.yml").write_text(inline("newer", ("v",)) if not argv else inline("newer"))
        result = run_cli("sync", "--chdir", str(work), *argv)
        assert result.exit_code == 1, result.stderr
        assert "Recovering an interrupted sync: swap journal" in result.stderr
        assert "also names" in result.stderr
        assert "which this run does not replace" in result.stderr
        assert sorted(str(p) for p in work.rglob("*")) == before
    assert sync(work, inline("newer")) == 0
    assert held() == {"v": "newer", "w": "newer"}
    assert sorted(p.name for p in work.iterdir()) == ["v", "vendir.lock.yml", "vendir.yml", "w"]
