"""Staged swaps, atomic writes and recovery: a target is always its old tree, its new tree, or recoverable."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from ocivendir.fs import swap
from ocivendir.fs.swap import (
    OLD,
    STAGE,
    atomic_write,
    new_sibling,
    swap_in,
    write_if_changed,
)
from ocivendir.fs.swapping import recover


def make_tree(given: str | Path, marker: str) -> Path:
    path = Path(given)
    path.mkdir(parents=True)
    (path / "marker").write_text(marker)
    return path


def test_swap_in_replaces_and_keeps_the_old_tree_aside(tmp_path: Path) -> None:
    target = make_tree(tmp_path / "out", "old")
    stage = make_tree(new_sibling(target, STAGE), "new")
    old = swap_in(stage, target)
    assert (target / "marker").read_text() == "new"
    assert old is not None
    assert Path(old, "marker").read_text() == "old"
    assert not stage.exists()


def test_swap_into_a_missing_target_is_a_plain_rename(tmp_path: Path) -> None:
    stage = make_tree(new_sibling(tmp_path / "out", STAGE), "new")
    assert swap_in(stage, tmp_path / "out") is None
    assert (tmp_path / "out/marker").read_text() == "new"


def test_recover_restores_an_old_tree_left_by_a_kill_and_removes_stages(tmp_path: Path) -> None:
    target = tmp_path / "out"
    make_tree(new_sibling(target, OLD), "old")
    make_tree(new_sibling(target, STAGE), "half")
    recover(target)
    assert (target / "marker").read_text() == "old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]
    make_tree(new_sibling(target, OLD), "older")
    recover(target)
    assert (target / "marker").read_text() == "old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]


def test_atomic_write_keeps_the_mode_and_new_files_are_0600(tmp_path: Path) -> None:
    path = tmp_path / "lock.yml"
    atomic_write(path, b"one")
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    path.chmod(0o644)
    atomic_write(path, b"two")
    assert path.read_bytes() == b"two"
    assert stat.S_IMODE(path.stat().st_mode) == 0o644
    assert sorted(p.name for p in tmp_path.iterdir()) == ["lock.yml"]


def test_write_if_changed_keeps_the_mtime_and_writes_devices_in_place(tmp_path: Path) -> None:
    path = tmp_path / "lock.yml"
    assert write_if_changed(path, b"same") is True
    before = path.stat().st_mtime_ns
    assert write_if_changed(path, b"same") is False
    assert path.stat().st_mtime_ns == before
    assert write_if_changed(Path("/dev/null"), b"anything") is True
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
    try:
        assert write_if_changed(fifo, b"through the fifo") is True
        assert os.read(reader, 100) == b"through the fifo"
    finally:
        os.close(reader)
    assert stat.S_ISFIFO(fifo.lstat().st_mode)
    link = tmp_path / "link.yml"
    link.symlink_to(path)
    write_if_changed(link, b"via link")
    assert link.is_symlink()
    assert path.read_bytes() == b"via link"


def test_trees_are_exchanged_in_one_step_through_renameat2(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "f").write_text("a")
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "f").write_text("b")
    assert swap.exchange(str(tmp_path / "a"), str(tmp_path / "b")) is True
    assert ((tmp_path / "a" / "f").read_text(), (tmp_path / "b" / "f").read_text()) == ("b", "a")


def test_without_renameat2_a_swap_renames_twice(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(swap, "_renameat2", lambda: None)
    target, stage = tmp_path / "target", tmp_path / "stage"
    target.mkdir()
    (target / "old.txt").write_text("old")
    stage.mkdir()
    (stage / "new.txt").write_text("new")
    old = swap.swap_in(stage, target)
    assert old is not None
    assert [p.name for p in target.iterdir()] == ["new.txt"]
    assert [p.name for p in Path(old).iterdir()] == ["old.txt"]


def test_a_lock_file_that_is_not_a_regular_file_is_written_without_resolving_its_path(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """kapp-controller's `--lock-file /dev/null`: written in place, with no realpath walk of /dev."""
    monkeypatch.setattr(os.path, "realpath", lambda *_args, **_kwargs: pytest.fail("resolved"))
    assert write_if_changed("/dev/null", b"lock") is True


def test_a_link_to_dev_null_stays_a_link_and_dev_null_stays_a_device(tmp_path: Path) -> None:
    link = tmp_path / "lock.yml"
    link.symlink_to("/dev/null")
    assert write_if_changed(link, b"lock") is True
    assert link.is_symlink()
    assert stat.S_ISCHR(Path("/dev/null").stat().st_mode)
