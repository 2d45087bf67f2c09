"""Layers are applied safely: modes, directory rules, links skipped, OCI whiteouts, bounds (imgpkg-bundles spec §5.4)."""

from __future__ import annotations

import io
import os
import re
import stat
from pathlib import Path

import pytest

from ocivendir.errors import UnsafeArchive
from ocivendir.fs.extract import ExtractStats, TreePolicy, apply_layer, file_mode
from ocivendir.fs.limits import DIRECTORY_BYTES, MAX_DEPTH, MAX_HEADER_CHAIN, ExtractLimits, Tally
from tests.support.builders import Entry, base256, padded, pax_chain, pax_header, pax_record, raw_header, tar_bytes

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable

    from ocivendir.fs.extract import DirectoryRule

SENTINEL = b"must survive"


def apply(stage: Path, entries: list[Entry], stats: ExtractStats | None = None, *,
          directories: DirectoryRule = "parents", limits: ExtractLimits | None = None) -> ExtractStats:  # fmt: skip
    policy = TreePolicy(umask=0o022, directories=directories, limits=limits or ExtractLimits())
    stats = stats or ExtractStats(tally=Tally(policy.limits))
    apply_layer(io.BytesIO(tar_bytes(entries)), stage, policy=policy, stats=stats, what="layer")
    return stats


def mode(path: Path) -> int:
    return stat.S_IMODE(path.lstat().st_mode)


def listing(root: Path) -> dict[str, int]:
    """Every path under root with its mode (directories end in '/')."""
    found = {}
    for base, dirs, files in os.walk(root):
        for name in dirs:
            found[os.path.relpath(Path(base, name), root) + "/"] = mode(Path(base, name))
        for name in files:
            found[os.path.relpath(Path(base, name), root)] = mode(Path(base, name))
    return found


@pytest.fixture
def fenced(tmp_path: Path) -> Path:
    """A stage with sentinel files beside it and in the directory above it."""
    (tmp_path / "sentinel.txt").write_bytes(SENTINEL)
    stage = tmp_path / "out" / "stage"
    stage.mkdir(parents=True)
    (tmp_path / "out" / "beside.txt").write_bytes(SENTINEL)
    return stage


def sentinels_survive(stage: Path) -> None:
    assert (stage.parent.parent / "sentinel.txt").read_bytes() == SENTINEL
    assert (stage.parent / "beside.txt").read_bytes() == SENTINEL
    assert stage.is_dir()


@pytest.mark.parametrize(
    ("tar_mode", "expected"),
    [(0o600, 0o644), (0o700, 0o755), (0o655, 0o655), (0o4755, 0o755), (0o2700, 0o755), (0o1777, 0o755),
     (0o400, 0o444), (0o640, 0o640)],
)  # fmt: skip
def test_file_modes_follow_imgpkg(tar_mode: int, expected: int) -> None:
    assert file_mode(tar_mode, 0o022) == expected


def test_regular_files_are_written_with_imgpkg_modes(tmp_path: Path) -> None:
    stats = apply(
        tmp_path,
        [Entry(".", kind="dir", mode=0o700), Entry("config", kind="dir", mode=0o700),
         Entry("config/app.yml", b"app: 1\n", 0o600), Entry("run.sh", b"#!/bin/sh\n", 0o700),
         Entry("keep.txt", b"x", 0o655), Entry("suid", b"x", 0o4755)],
    )  # fmt: skip
    assert (tmp_path / "config/app.yml").read_bytes() == b"app: 1\n"
    assert listing(tmp_path) == {"config/": 0o755, "config/app.yml": 0o644, "run.sh": 0o755, "keep.txt": 0o655,
                                 "suid": 0o755}  # fmt: skip
    assert (tmp_path / "run.sh").stat().st_mtime == 0
    assert stats.files == 4
    assert stats.tally.entries == 6
    assert stats.tally.bytes == len(b"app: 1\n") + len(b"#!/bin/sh\n") + 2 + DIRECTORY_BYTES  # `config` (`.` was there)


EMPTY_DIRS = [Entry("data/", kind="dir", mode=0o755), Entry("data/empty/", kind="dir", mode=0o755),
              Entry("x/", kind="dir", mode=0o755), Entry("x/y/", kind="dir", mode=0o755),
              Entry("x/y/z/", kind="dir", mode=0o755), Entry("f.txt", b"f", 0o644)]  # fmt: skip


def test_pull_makes_directories_only_as_parents_of_entries_as_imgpkg_does(tmp_path: Path) -> None:
    apply(tmp_path, EMPTY_DIRS)
    assert listing(tmp_path) == {"data/": 0o755, "x/": 0o755, "x/y/": 0o755, "f.txt": 0o644}


def test_sync_makes_directory_entries_with_vendirs_modes(tmp_path: Path) -> None:
    apply(
        tmp_path,
        [Entry("d750", kind="dir", mode=0o750), Entry("d750/f600", b"a", 0o600),
         Entry("d700", kind="dir", mode=0o700), Entry("d700/f640", b"a", 0o640),
         Entry("d755", kind="dir", mode=0o755), Entry("d755/f644", b"a", 0o644), Entry("d755/f755", b"a", 0o755),
         Entry("d711", kind="dir", mode=0o711), Entry("d711/f", b"a", 0o600),
         Entry("late/f", b"a", 0o600), Entry("late", kind="dir", mode=0o750), Entry("noentry/f", b"a", 0o600),
         Entry("suid", kind="dir", mode=0o4750), Entry("empty", kind="dir", mode=0o750)],
        directories="entries",
    )  # fmt: skip
    assert listing(tmp_path) == {  # measured with vendir 0.40.0 on the same layer (umask 022)
        "d750/": 0o750, "d750/f600": 0o644, "d700/": 0o755, "d700/f640": 0o640, "d755/": 0o755,
        "d755/f644": 0o644, "d755/f755": 0o755, "d711/": 0o711, "d711/f": 0o644, "late/": 0o755, "late/f": 0o644,
        "noentry/": 0o755, "noentry/f": 0o644, "suid/": 0o750, "empty/": 0o750,
    }  # fmt: skip


def test_a_lower_layers_directory_keeps_its_mode_under_a_later_entry(tmp_path: Path) -> None:
    stats = ExtractStats()
    apply(tmp_path, [Entry("d", kind="dir", mode=0o750), Entry("d/a", b"a")], stats, directories="entries")
    apply(tmp_path, [Entry("d", kind="dir", mode=0o777), Entry("d/b", b"b")], stats, directories="entries")
    assert mode(tmp_path / "d") == 0o750
    assert sorted(p.name for p in (tmp_path / "d").iterdir()) == ["a", "b"]


@pytest.mark.parametrize("directories", ["parents", "entries"])
def test_every_link_and_device_is_skipped_and_counted(tmp_path: Path, directories: DirectoryRule) -> None:
    stats = apply(
        tmp_path,
        [Entry("a.txt", b"a"), Entry("link", kind="symlink", target="a.txt"),
         Entry("abs", kind="symlink", target="/etc/hostname"), Entry("esc", kind="symlink", target="../../outside"),
         Entry("sub/deep", kind="symlink", target="../../../../outside"),
         Entry("sub/hard", kind="hardlink", target="a.txt"), Entry("hard-out", kind="hardlink", target="../x"),
         Entry("pipe", kind="fifo")],
        directories=directories,
    )  # fmt: skip
    assert listing(tmp_path) == {"a.txt": 0o644, "sub/": 0o755}  # a link's parent is made, as imgpkg makes it
    assert stats.skipped == 7
    assert not any(Path(base, n).is_symlink() for base, dirs, names in os.walk(tmp_path) for n in dirs + names)


def test_a_link_replaces_what_a_lower_layer_had_at_its_path(tmp_path: Path) -> None:
    stats = ExtractStats()
    apply(tmp_path, [Entry("a.txt", b"a"), Entry("b.txt", b"b")], stats)
    apply(tmp_path, [Entry("a.txt", kind="symlink", target="/etc/passwd")], stats)
    assert listing(tmp_path) == {"b.txt": 0o644}


@pytest.mark.parametrize(
    "entry",
    [
        Entry("../escape.txt", b"x"),
        Entry("/etc/passwd-copy", b"x"),
        Entry("a/../../escape.txt", b"x"),
        Entry("..\\escape.txt", b"x"),
    ],
    ids=["dotdot", "absolute", "nested-dotdot", "backslash"],
)
def test_unsafe_entries_refuse_the_layer_and_write_nothing_outside(fenced: Path, entry: Entry) -> None:
    with pytest.raises(UnsafeArchive) as caught:
        apply(fenced, [entry])
    assert entry.name in str(caught.value)
    assert sorted(p.name for p in fenced.parent.iterdir()) == ["beside.txt", "stage"]
    sentinels_survive(fenced)


@pytest.mark.parametrize("name", [".wh...", "a/.wh...", ".wh..", "a/.wh..", ".wh.", "a/b/.wh..."])
def test_a_whiteout_naming_dot_dotdot_or_nothing_refuses_the_layer(fenced: Path, name: str) -> None:
    (fenced / "a" / "b").mkdir(parents=True)
    (fenced / "a" / "b" / "lower.txt").write_bytes(SENTINEL)
    with pytest.raises(UnsafeArchive, match="refusing whiteout"):
        apply(fenced, [Entry(name)])
    assert (fenced / "a" / "b" / "lower.txt").read_bytes() == SENTINEL
    sentinels_survive(fenced)


def test_later_layers_win_and_whiteouts_remove(tmp_path: Path) -> None:
    stats = ExtractStats()
    apply(tmp_path, [Entry("a.txt", b"one"), Entry("b.txt", b"b"), Entry("d/x", b"x"), Entry("d/y", b"y")], stats)
    apply(tmp_path, [Entry("a.txt", b"two"), Entry(".wh.b.txt"), Entry("d/.wh..wh..opq"), Entry("d/z", b"z")], stats)
    assert (tmp_path / "a.txt").read_bytes() == b"two"
    assert not (tmp_path / "b.txt").exists()
    assert sorted(p.name for p in (tmp_path / "d").iterdir()) == ["z"]


def test_a_whiteout_hides_lower_layers_only_never_its_own_layers_entries(tmp_path: Path) -> None:
    stats = ExtractStats()
    apply(tmp_path, [Entry("d/lower", b"l"), Entry("e/lower", b"l"), Entry("gone.txt", b"g")], stats)
    apply(
        tmp_path,
        [Entry("d/own", b"o"), Entry(".wh.d"), Entry("own.txt", b"o"), Entry(".wh.own.txt"),
         Entry("e", kind="dir", mode=0o755), Entry(".wh.e"), Entry(".wh.gone.txt"), Entry("z/.wh..wh..opq")],
        stats,
    )  # fmt: skip
    assert listing(tmp_path) == {"d/": 0o755, "d/own": 0o644, "own.txt": 0o644, "e/": 0o755}


def test_a_file_replaces_a_directory_from_an_earlier_layer_and_back(tmp_path: Path) -> None:
    stats = ExtractStats()
    apply(tmp_path, [Entry("x/inner", b"1")], stats)
    apply(tmp_path, [Entry("x", b"now a file")], stats)
    assert (tmp_path / "x").read_bytes() == b"now a file"
    apply(tmp_path, [Entry("x/again", b"2")], stats)
    assert listing(tmp_path) == {"x/": 0o755, "x/again": 0o644}


def test_garbage_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(UnsafeArchive, match="tar"):
        apply_layer(io.BytesIO(b"not a tar at all" * 100), tmp_path, policy=TreePolicy(), stats=ExtractStats(),
                    what="layer")  # fmt: skip


def test_a_path_nested_past_the_depth_bound_is_refused_before_it_is_made(fenced: Path) -> None:
    deep = "/".join(["d"] * 2100)
    with pytest.raises(UnsafeArchive, match=re.escape(f"nested 2101 levels deep (at most {MAX_DEPTH})")):
        apply(fenced, [Entry(f"{deep}/f.txt", b"x")])
    assert list(fenced.iterdir()) == []
    sentinels_survive(fenced)


def test_a_name_longer_than_a_file_name_may_be_is_refused(fenced: Path) -> None:
    with pytest.raises(UnsafeArchive, match="longer than 255 bytes"):
        apply(fenced, [Entry("x" * 256, b"x")])
    assert list(fenced.iterdir()) == []


def test_an_oversized_extended_header_is_refused_before_it_is_read(fenced: Path) -> None:
    with pytest.raises(UnsafeArchive, match=re.escape("extended header of 2.0 MiB")):
        apply(fenced, [Entry("x" * (2 << 20), b"x")])
    assert list(fenced.iterdir()) == []


def test_a_chain_of_extended_headers_is_refused_before_it_exhausts_the_stack(fenced: Path) -> None:
    policy = TreePolicy()
    stats = ExtractStats(tally=Tally(policy.limits))
    apply_layer(io.BytesIO(pax_chain(MAX_HEADER_CHAIN)), fenced, policy=policy, stats=stats, what="layer")
    assert (fenced / "f.txt").read_bytes() == b"hi"  # a chain as long as the bound is read
    (fenced / "f.txt").unlink()
    for count in (MAX_HEADER_CHAIN + 1, 3000):  # 3000: RecursionError before the bound
        with pytest.raises(UnsafeArchive, match=re.escape(f"more than {MAX_HEADER_CHAIN} extended headers in a row")):
            apply_layer(io.BytesIO(pax_chain(count)), fenced, policy=policy, stats=stats, what="layer")
    assert list(fenced.iterdir()) == []
    sentinels_survive(fenced)


def test_a_sparse_member_is_refused_without_writing_its_declared_size(fenced: Path) -> None:
    with pytest.raises(UnsafeArchive, match=re.escape("refusing sparse entry 'big.img' (18.6 GiB declared)")):
        apply(fenced, [Entry("ok.txt", b"ok"), Entry("big.img", kind="sparse", declared=20 * 10**9)])
    assert listing(fenced) == {"ok.txt": 0o644}


def test_expansion_past_the_size_limit_stops_before_the_entry_is_written(fenced: Path) -> None:
    limits = ExtractLimits(max_bytes=10_000)
    stats = ExtractStats(tally=Tally(limits))
    with pytest.raises(UnsafeArchive, match=re.escape("past the limit of 9.8 KiB")) as caught:
        apply(fenced, [Entry(f"f{n}", b"x" * 3000) for n in range(10)], stats, limits=limits)
    assert caught.value.hint is not None
    assert "--max-extract-size" in caught.value.hint
    written = sum(p.stat().st_size for p in fenced.iterdir())
    assert written == stats.tally.bytes == 9000


def test_the_size_limit_counts_every_layer_of_the_image(fenced: Path) -> None:
    limits = ExtractLimits(max_bytes=5000)
    stats = ExtractStats(tally=Tally(limits))
    apply(fenced, [Entry("a", b"x" * 3000)], stats, limits=limits)
    with pytest.raises(UnsafeArchive, match="past the limit"):
        apply(fenced, [Entry(".wh.a"), Entry("b", b"x" * 3000)], stats, limits=limits)


@pytest.mark.parametrize("carrier", [
    raw_header(".wh.gone", size=6000),  # a whiteout is never written, but its data is still decompressed
    raw_header("odd", kind=b"Z", size=6000),  # an unknown type: skipped, its data read past
])  # fmt: skip
def test_data_that_is_skipped_counts_against_the_size_limit_as_written_data_does(fenced: Path, carrier: bytes) -> None:
    limits = ExtractLimits(max_bytes=10_000)
    data = raw_header("a", size=5000) + padded(b"x" * 5000) + carrier + padded(b"y" * 6000) + END
    with pytest.raises(UnsafeArchive, match=re.escape("past the limit of 9.8 KiB")):
        apply_layer(io.BytesIO(data), fenced, policy=TreePolicy(limits=limits), stats=ExtractStats(tally=Tally(limits)),
                    what="layer")  # fmt: skip


def test_extended_headers_count_against_the_size_limit_as_data_does(fenced: Path) -> None:
    """A million members carrying 1 MiB of pax comments each were inflated with no bound but the compression ratio."""
    limits = ExtractLimits(max_bytes=5000)
    stats = ExtractStats(tally=Tally(limits))
    data = b"".join(pax_header(pax_record("comment", "c" * 3000)) + raw_header(f"e{n}") for n in range(3)) + END
    with pytest.raises(UnsafeArchive, match=re.escape("past the limit of 4.9 KiB")):
        apply_layer(io.BytesIO(data), fenced, policy=TreePolicy(limits=limits), stats=stats, what="layer")
    assert stats.tally.bytes <= limits.max_bytes


def test_more_entries_than_the_limit_are_refused(fenced: Path) -> None:
    limits = ExtractLimits(max_entries=50)
    with pytest.raises(UnsafeArchive, match="more than 50 entries"):
        apply(fenced, [Entry(f"e{n}", kind="dir") for n in range(1000)], limits=limits, directories="entries")
    assert len(list(fenced.iterdir())) == 50


def test_directories_made_as_parents_count_toward_the_entry_limit(fenced: Path) -> None:
    """Directories made only because a path runs through them are entries too.

    One 512-byte header named `u1/a/a/…/f` (255 bytes) made 127 directories and counted one entry: a million headers
    made 127 million directories (and held every path in memory) under a limit of a million entries.
    """
    limits = ExtractLimits(max_entries=50)
    stats = ExtractStats(tally=Tally(limits))
    with pytest.raises(UnsafeArchive, match="more than 50 entries"):
        apply(fenced, [Entry(f"u{n}/" + "a/" * 20 + "f", b"x") for n in range(10)], stats, limits=limits)
    assert sum(len(dirs) + len(files) for _, dirs, files in os.walk(fenced)) < stats.tally.entries == 51


END = bytes(1024)
CRAFTED = {
    "a bad checksum after the first member": (
        raw_header("ok.txt", size=2) + padded(b"ok") + raw_header("more.txt", size=1)[:-1] + b"!" + padded(b"x") + END,
        "corrupt tar archive: bad checksum in the header at byte 1024",
    ),
    "a pax size tarfile would read as 0": (
        pax_header(pax_record("size", "0x400")) + raw_header("carrier.txt") + raw_header("smuggled.txt", size=2)
        + padded(b"hi") + END,
        "not a tar archive: invalid pax size '0x400'",
    ),
    "a NUL in a pax path": (pax_header(pax_record("path", "a\0b")) + raw_header("f.txt") + END, "with a NUL byte"),
    "an mtime no clock holds": (raw_header("f.txt", size=1, patch={136: base256(1 << 70)}) + padded(b"x") + END,
                                "out of range"),
    "data cut short": (raw_header("ok.txt", size=2) + padded(b"ok") + raw_header("cut.txt", size=9000) + b"x" * 4000,
                       "corrupt tar archive: unexpected end of data"),
}  # fmt: skip


@pytest.mark.parametrize(("data", "message"), CRAFTED.values(), ids=CRAFTED.keys())
def test_a_crafted_archive_refuses_the_layer_with_a_clear_error(fenced: Path, data: bytes, message: str) -> None:
    with pytest.raises(UnsafeArchive, match=re.escape(message)):
        apply_layer(io.BytesIO(data), fenced, policy=TreePolicy(), stats=ExtractStats(), what="layer")
    assert not (fenced / "smuggled.txt").exists()
    assert not (fenced / "f.txt").exists()
    sentinels_survive(fenced)


def test_a_fresh_stage_is_laid_down_without_looking_at_each_path_first(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Nothing is there yet in a new stage: each file is created and each directory made at once (O_EXCL, mkdir)."""
    looked: list[str] = []
    for name in ("lstat", "stat"):
        real = getattr(os, name)

        def counting(
            path: str, *args: object, real: Callable[..., os.stat_result] = real, **kwargs: object
        ) -> os.stat_result:
            looked.append(os.fspath(path))
            return real(path, *args, **kwargs)

        monkeypatch.setattr(os, name, counting)
    apply(tmp_path, [Entry("config", kind="dir", mode=0o755), Entry("config/app.yml", b"a"), Entry("README.md", b"r")],
          directories="entries")  # fmt: skip
    monkeypatch.undo()
    assert [path for path in looked if path.startswith(f"{tmp_path}/")] == []
    assert listing(tmp_path) == {"config/": 0o755, "config/app.yml": 0o644, "README.md": 0o644}


@pytest.mark.parametrize("directories", ["parents", "entries"])
def test_a_link_already_at_a_files_or_directorys_path_is_replaced_never_followed(
    tmp_path: Path, directories: DirectoryRule
) -> None:
    stage, outside = tmp_path / "stage", tmp_path / "outside"
    stage.mkdir()
    (stage / "f").symlink_to(outside / "f")  # dangling: O_EXCL refuses it, and it is removed first
    (stage / "d").symlink_to(outside)
    apply(stage, [Entry("f", b"x"), Entry("d", kind="dir", mode=0o755), Entry("d/g", b"y")], directories=directories)
    assert not outside.exists()
    assert listing(stage) == {"d/": 0o755, "d/g": 0o644, "f": 0o644}


def test_every_directory_made_counts_a_block_against_the_size_limit(fenced: Path) -> None:
    # 100,000 `dN/x` empty files in a 0.9 MiB layer made a 393 MiB tree under --max-extract-size 1Mi: directories,
    # named or implied, counted nothing (adversarial review)
    limits = ExtractLimits(max_bytes=10 * DIRECTORY_BYTES)
    stats = ExtractStats(tally=Tally(limits))
    with pytest.raises(UnsafeArchive, match=re.escape("entry 'd10/' (4 KiB) would expand the image past the limit")):
        apply(fenced, [Entry(f"d{n}/x") for n in range(50)], stats, limits=limits)
    assert stats.tally.bytes == 10 * DIRECTORY_BYTES
    assert len(list(fenced.iterdir())) == 10
    again = ExtractStats(tally=Tally(limits))  # a later layer's paths through directories already made: no new block
    apply(fenced, [Entry(f"d{n}/y") for n in range(10)], again, limits=limits)
    assert again.tally.bytes == 0
