"""Layers are applied safely, with imgpkg's modes and OCI whiteouts (imgpkg-bundles spec §5.4)."""

from __future__ import annotations

import io
import stat
from pathlib import Path

import pytest

from ocivendir.errors import UnsafeArchive
from ocivendir.fs.extract import ExtractStats, apply_layer, file_mode
from tests.support.builders import Entry, tar_bytes


def apply(stage: Path, entries: list[Entry], stats: ExtractStats | None = None) -> ExtractStats:
    stats = stats or ExtractStats()
    apply_layer(io.BytesIO(tar_bytes(entries)), stage, umask=0o022, stats=stats, what="layer")
    return stats


def mode(path: Path) -> int:
    return stat.S_IMODE(path.lstat().st_mode)


@pytest.mark.parametrize(
    ("tar_mode", "expected"),
    [(0o600, 0o644), (0o700, 0o755), (0o655, 0o655), (0o4755, 0o755), (0o2700, 0o755), (0o1777, 0o755),
     (0o400, 0o444), (0o640, 0o640)],
)  # fmt: skip
def test_file_modes_follow_imgpkg(tar_mode: int, expected: int) -> None:
    assert file_mode(tar_mode, 0o022) == expected


def test_regular_files_and_directories_are_written_with_imgpkg_modes(tmp_path: Path) -> None:
    stats = apply(
        tmp_path,
        [Entry(".", kind="dir", mode=0o700), Entry("config", kind="dir", mode=0o700),
         Entry("config/app.yml", b"app: 1\n", 0o600), Entry("run.sh", b"#!/bin/sh\n", 0o700),
         Entry("keep.txt", b"x", 0o655), Entry("suid", b"x", 0o4755)],
    )  # fmt: skip
    assert (tmp_path / "config/app.yml").read_bytes() == b"app: 1\n"
    assert mode(tmp_path / "config") == 0o755
    assert mode(tmp_path / "config/app.yml") == 0o644
    assert mode(tmp_path / "run.sh") == 0o755
    assert mode(tmp_path / "keep.txt") == 0o655
    assert mode(tmp_path / "suid") == 0o755
    assert (tmp_path / "run.sh").stat().st_mtime == 0
    assert stats.files == 4


def test_links_inside_the_tree_and_devices_are_skipped_and_counted(tmp_path: Path) -> None:
    stats = apply(
        tmp_path,
        [Entry("a.txt", b"a"), Entry("link", kind="symlink", target="a.txt"),
         Entry("sub/hard", kind="hardlink", target="a.txt"), Entry("pipe", kind="fifo")],
    )  # fmt: skip
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.txt"]
    assert stats.skipped == 3


@pytest.mark.parametrize(
    "entry",
    [
        Entry("../escape.txt", b"x"),
        Entry("/etc/passwd-copy", b"x"),
        Entry("a/../../escape.txt", b"x"),
        Entry("..\\escape.txt", b"x"),
        Entry("link", kind="symlink", target="/etc/passwd"),
        Entry("link", kind="symlink", target="../../outside"),
        Entry("sub/link", kind="symlink", target="../../outside"),
        Entry("hard", kind="hardlink", target="../outside"),
    ],
    ids=["dotdot", "absolute", "nested-dotdot", "backslash", "abs-symlink", "rel-symlink", "deep-symlink", "hard"],
)
def test_unsafe_entries_refuse_the_layer_and_write_nothing_outside(tmp_path: Path, entry: Entry) -> None:
    stage = tmp_path / "stage"
    stage.mkdir()
    with pytest.raises(UnsafeArchive) as caught:
        apply(stage, [entry])
    assert entry.name in str(caught.value)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["stage"]


def test_later_layers_win_and_whiteouts_remove(tmp_path: Path) -> None:
    stats = ExtractStats()
    apply(tmp_path, [Entry("a.txt", b"one"), Entry("b.txt", b"b"), Entry("d/x", b"x"), Entry("d/y", b"y")], stats)
    apply(tmp_path, [Entry("a.txt", b"two"), Entry(".wh.b.txt"), Entry("d/.wh..wh..opq"), Entry("d/z", b"z")], stats)
    assert (tmp_path / "a.txt").read_bytes() == b"two"
    assert not (tmp_path / "b.txt").exists()
    assert sorted(p.name for p in (tmp_path / "d").iterdir()) == ["z"]


def test_a_file_replaces_a_directory_from_an_earlier_layer(tmp_path: Path) -> None:
    apply(tmp_path, [Entry("x/inner", b"1")])
    apply(tmp_path, [Entry("x", b"now a file")])
    assert (tmp_path / "x").read_bytes() == b"now a file"


def test_garbage_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(UnsafeArchive, match="tar"):
        apply_layer(io.BytesIO(b"not a tar at all" * 100), tmp_path, umask=0o022, stats=ExtractStats(), what="layer")
