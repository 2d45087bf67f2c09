"""Golden syncs (tests/golden/): exact lock bytes and trees (mode, sha256, path), then `--locked` changes nothing."""

from __future__ import annotations

import hashlib
import os
import stat
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import run_cli
from tests.support.builders import Entry, Pusher, make_image

GOLDEN = Path(__file__).resolve().parents[1] / "golden"
FIXTURES: dict[str, Callable[[Pusher], dict[str, str]]] = {
    "kapp-controller-inline": lambda _pusher: {},
    "quoting": lambda pusher: {"quoting": _push(pusher, "golden/quoting", {"version.txt": "1.0"}, tag="1.0")},
    "filters": lambda pusher: {"filters": _push(pusher, "golden/filters", {
        "LICENSE": "mit", "config/app.yml": "a: 1\n", "config/skip.txt": "s", "config/deep/b.yml": "b"})},
    "trees": lambda pusher: {"trees": _push_entries(pusher, "golden/trees", TREE_ENTRIES)},
}  # fmt: skip
# empty directories (nested, and a directory emptied by excludePaths), directory entries with their own modes, entries
# after their files, links: the tree vendir 0.40.0 writes from this layer is tests/golden/trees/tree.txt
TREE_ENTRIES = [
    Entry("data/", kind="dir", mode=0o755), Entry("data/empty/", kind="dir", mode=0o755),
    Entry("x/", kind="dir", mode=0o755), Entry("x/y/", kind="dir", mode=0o755), Entry("x/y/z/", kind="dir", mode=0o755),
    Entry("x/y/f.txt", b"xy", 0o644), Entry("d750", kind="dir", mode=0o750), Entry("d750/f600", b"a", 0o600),
    Entry("d700", kind="dir", mode=0o700), Entry("d700/f640", b"b", 0o640), Entry("d755", kind="dir", mode=0o755),
    Entry("d755/f644", b"c", 0o644), Entry("d755/f755", b"d", 0o755), Entry("d711", kind="dir", mode=0o711),
    Entry("d711/f", b"e", 0o600), Entry("late/f", b"f", 0o600), Entry("late", kind="dir", mode=0o750),
    Entry("noentry/f", b"g", 0o600), Entry("abs", kind="symlink", target="/etc/hostname"),
    Entry("d750/rel", kind="symlink", target="f600"), Entry("d750/hard", kind="hardlink", target="d750/f600"),
]  # fmt: skip


def _push_entries(pusher: Pusher, repo: str, entries: list[Entry]) -> str:
    image = make_image(entries=entries)
    pusher.image(repo, image)
    return image.digest


def _push(pusher: Pusher, repo: str, files: dict[str, str], tag: str | None = None) -> str:
    image = make_image(files)
    pusher.image(repo, image, tag=tag)
    return image.digest


def fill(text: str, registry: str, digests: dict[str, str]) -> str:
    text = text.replace("{registry}", registry)
    for name, digest in digests.items():
        text = text.replace(f"{{digest:{name}}}", digest)
    return text


def tree(root: Path, tops: list[str]) -> str:
    lines = []
    for top in tops:
        for path in [root / top, *sorted((root / top).rglob("*"))]:
            mode = f"{stat.S_IMODE(path.lstat().st_mode):o}"
            digest = hashlib.sha256(path.read_bytes()).hexdigest()[:16] if path.is_file() else "-"
            lines.append(f"{mode} {digest} {path.relative_to(root)}")
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize("case", sorted(FIXTURES))
def test_golden_case(case: str, pusher: Pusher, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OCIVENDIR_CACHE_DIR", str(tmp_path / "cache"))
    work = tmp_path / "work"
    work.mkdir()
    digests = FIXTURES[case](pusher)
    host = pusher.registry.host
    (work / "vendir.yml").write_text(fill((GOLDEN / case / "vendir.yml").read_text(), host, digests))
    result = run_cli("sync", "--chdir", str(work))
    assert result.exit_code == 0, result.stderr
    expected_lock = fill((GOLDEN / case / "lock.yml").read_text(), host, digests)
    assert result.stdout == expected_lock
    assert (work / "vendir.lock.yml").read_text() == expected_lock
    tops = sorted(p.name for p in work.iterdir() if p.name not in {"vendir.yml", "vendir.lock.yml"})
    actual = tree(work, tops)
    golden_tree = GOLDEN / case / "tree.txt"
    if os.environ.get("GOLDEN_UPDATE") == "1":
        golden_tree.write_text(actual)
    assert actual == golden_tree.read_text()
    mtime = (work / "vendir.lock.yml").stat().st_mtime_ns
    locked = run_cli("sync", "--chdir", str(work), "--locked")
    assert locked.exit_code == 0, locked.stderr
    assert locked.stdout.endswith(expected_lock)
    assert (work / "vendir.lock.yml").stat().st_mtime_ns == mtime
    assert tree(work, tops) == actual
