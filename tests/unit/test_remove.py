"""Trees of any depth are removed without recursion and without following links (fs/remove.py)."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from ocivendir.fs import remove
from ocivendir.fs.remove import remove_tree
from tests.support.builders import deep_directory

_SCANDIR = os.scandir


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


def test_a_directory_moved_out_of_the_tree_while_it_is_emptied_stops_the_removal_there(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # someone who may write in the tree (a group-writable one) moves the directory being emptied into a directory of
    # theirs beside the user's own: climbing `..` from it would then empty the user's same-named directory there
    shared = tmp_path / "shared"
    (shared / "precious").mkdir(parents=True)
    (shared / "precious" / "keep.txt").write_text("the user's")
    old = tmp_path / "old"
    (old / "precious").mkdir(parents=True)
    (old / "slow").mkdir()
    (old / "slow" / "f").write_text("")
    moved = (old / "slow").stat().st_ino
    empty = remove._empty_files

    def emptied_while_moved(directory: int) -> list[str]:
        if os.fstat(directory).st_ino == moved:
            (old / "slow").rename(shared / "slow")
        return empty(directory)

    monkeypatch.setattr(remove, "_empty_files", emptied_while_moved)
    monkeypatch.setattr(remove.os, "scandir", lambda fd: _in_order(fd, last="slow"))
    with pytest.raises(OSError, match="slow was moved out of the tree being removed"):
        remove_tree(old)
    assert (shared / "precious" / "keep.txt").read_text() == "the user's"
    assert (old / "precious").is_dir()  # not reached: the walk stopped before going on


def _in_order(fd: int, *, last: str) -> Iterator[os.DirEntry[str]]:
    """The entries of a directory, `last` listed last (the walk takes subdirectories from the end)."""
    with _SCANDIR(fd) as entries:
        listed = sorted(entries, key=lambda entry: entry.name == last)
    return contextlib.nullcontext(iter(listed))  # type: ignore[return-value]
