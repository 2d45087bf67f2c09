"""Trees of any depth are removed without recursion and without following links (fs/remove.py)."""

from __future__ import annotations

from pathlib import Path

from ocivendir.fs.remove import remove_tree
from tests.support.builders import deep_directory


def test_a_tree_2100_levels_deep_is_removed(tmp_path: Path) -> None:
    deep_directory(tmp_path / "stage", 2100)
    remove_tree(tmp_path / "stage")
    assert list(tmp_path.iterdir()) == []


def test_links_are_removed_never_followed(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "keep.txt").write_text("keep")
    tree = tmp_path / "tree"
    (tree / "a" / "b").mkdir(parents=True)
    (tree / "a" / "to-dir").symlink_to(outside)
    (tree / "a" / "b" / "to-file").symlink_to(outside / "keep.txt")
    (tree / "a" / "locked").mkdir(mode=0o000)
    remove_tree(tree)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["outside"]
    assert (outside / "keep.txt").read_text() == "keep"
    link = tmp_path / "link"
    link.symlink_to(outside)
    remove_tree(link)
    assert (outside / "keep.txt").exists()
    remove_tree(tmp_path / "missing")
