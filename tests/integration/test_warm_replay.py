"""A process serving calls lays a small cached layer down from memory: the same tree, and damage still found.

Each pull runs in this one process (`in_process`, as a reused worker runs them); trees are compared byte for byte,
with modes and mtimes. A spy counts the blob reads that are verified (`BlobStore.open_verified`).
"""

from __future__ import annotations

import os
import stat
import time
from pathlib import Path

import pytest

from ocivendir.cache.store import BlobStore
from ocivendir.fs import fileid, replay
from ocivendir.fs.tarread import Member
from tests.conftest import run_cli
from tests.support.builders import Pusher, make_image
from tests.support.registry import Registry

FILES = {"config/app.yml": "app: demo\n", "README.md": "sample\n", "bin/run.sh": "#!/bin/sh\n"}


def _tree(root: Path) -> dict[str, tuple[int, int, bytes]]:
    """Every entry under root: mode and, for files, mtime (ns) and bytes (a directory's mtime is when it was made)."""
    found = {}
    for path in sorted(root.rglob("*")):
        info = path.lstat()
        regular = stat.S_ISREG(info.st_mode)
        found[str(path.relative_to(root))] = (info.st_mode, info.st_mtime_ns if regular else 0,
                                              path.read_bytes() if regular else b"")  # fmt: skip
    return found


@pytest.fixture(autouse=True)
def settled_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """Blobs written seconds ago count as settled (`fs/fileid.py`): these pulls follow each other within a second."""
    monkeypatch.setattr(fileid, "SETTLED_NS", 0)


@pytest.fixture
def reads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The blobs read (and verified) from the cache's files."""
    seen: list[str] = []
    opened = BlobStore.open_verified

    def counted(store: BlobStore, digest: object, size: int, what: str) -> object:
        seen.append(str(digest))
        return opened(store, digest, size, what)  # type: ignore[arg-type]

    monkeypatch.setattr(BlobStore, "open_verified", counted)
    return seen


def _pull(ref: str, out: Path, cache: Path) -> None:
    done = run_cli("pull", "-i", ref, "-o", str(out), "--cache-dir", str(cache))
    assert done.exit_code == 0, done.stderr


@pytest.mark.in_process
@pytest.mark.parametrize("umask", [0o022, 0o077])
def test_a_replayed_layer_lays_down_the_very_tree_a_read_one_does(
    registry: Registry, pusher: Pusher, repo_prefix: str, tmp_path: Path, reads: list[str], umask: int
) -> None:
    image = make_image(FILES)
    ref = pusher.image(f"{repo_prefix}/img", image)
    cache = tmp_path / "cache"
    _pull(ref, tmp_path / "cold", cache)
    old = os.umask(umask)
    try:
        _pull(ref, tmp_path / "read", cache)  # from the cache's file: kept
        replay.forget_all()
        _pull(ref, tmp_path / "read-again", cache)
        layer_reads = len(reads)
        _pull(ref, tmp_path / "replayed", cache)
    finally:
        os.umask(old)
    assert len(reads) == layer_reads  # no layer read from disk
    replayed = _tree(tmp_path / "replayed")
    assert replayed == _tree(tmp_path / "read-again") == _tree(tmp_path / "read")
    assert replayed["config/app.yml"][0] & 0o777 == 0o666 & ~umask


@pytest.mark.in_process
def test_a_blob_damaged_after_it_was_kept_is_read_again_and_its_damage_found(
    registry: Registry, pusher: Pusher, repo_prefix: str, tmp_path: Path, reads: list[str]
) -> None:
    image = make_image(FILES)
    ref = pusher.image(f"{repo_prefix}/img", image)
    cache = tmp_path / "cache"
    _pull(ref, tmp_path / "one", cache)
    _pull(ref, tmp_path / "two", cache)
    layer = next(path for path in (cache / "blobs/sha256").iterdir() if path.name in {d.split(":")[1] for d in reads})
    data = layer.read_bytes()
    time.sleep(0.05)  # past the kernel's coarse timestamp tick, as a later call's damage would be
    layer.chmod(0o600)
    layer.write_bytes(data[:-1] + bytes([data[-1] ^ 1]))  # same size, same inode
    before = len(reads)
    done = run_cli("pull", "-i", ref, "-o", str(tmp_path / "three"), "--cache-dir", str(cache), "--offline")
    assert len(reads) > before  # read from disk again
    assert done.exit_code != 0  # offline: the damaged blob is found and cannot be fetched again
    assert "mismatch" in done.stderr.lower() or "corrupt" in done.stderr.lower(), done.stderr
    assert not (tmp_path / "three").exists()


def test_what_is_kept_is_bounded_and_members_are_never_shared() -> None:
    replay.forget_all()
    blob = Path(__file__)
    member_data = b"x" * (replay.MAX_LAYER // 2)
    for number in range(replay.MAX_TOTAL // len(member_data) + 3):
        replay.remember(
            f"layer{number}", str(blob), ((Member("a", "", b"0", 0o644, len(member_data), 0), member_data),)
        )
    assert replay.recall("layer0", str(blob)) is None  # the least recently used went first
    kept = replay.recall(f"layer{number}", str(blob))
    assert kept is not None
    first = kept.next()
    again = replay.recall(f"layer{number}", str(blob))
    assert again is not None
    second = again.next()
    assert first is not None
    assert second is not None
    assert first is not second
    first.name = "changed"
    assert second.name == "a"
    os.utime(blob)  # the file is not the one kept with it any more
    assert replay.recall(f"layer{number}", str(blob)) is None
    replay.forget_all()


def _empty_members(count: int) -> bytes:
    """A tar of `count` empty directories: no data at all, and a blob that gzips to a few KiB."""
    import io  # noqa: PLC0415
    import tarfile  # noqa: PLC0415

    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.USTAR_FORMAT) as archive:
        for number in range(count):
            entry = tarfile.TarInfo(f"d{number}")
            entry.type = tarfile.DIRTYPE
            archive.addfile(entry)
    return buffer.getvalue()


def test_a_layer_of_many_empty_members_is_not_kept_its_members_count_as_data_does() -> None:
    """A small blob can inflate to a million members with no data: each costs memory, so each counts."""
    import io  # noqa: PLC0415

    members = replay.MAX_LAYER // replay.MEMBER_COST + 1
    archive = replay.Recording(io.BytesIO(_empty_members(members)))
    assert sum(1 for _ in archive) == members
    assert archive.kept() is None


def test_layers_of_empty_members_are_dropped_once_their_members_pass_the_total() -> None:
    """The memo's bound holds for members without data: the least recently used layer goes first."""
    replay.forget_all()
    blob = str(Path(__file__))
    members = replay.MAX_LAYER // replay.MEMBER_COST // 2
    kept = tuple((Member(f"d{n}", "", b"5", 0o755, 0, 0), b"") for n in range(members))
    for number in range(2 * replay.MAX_TOTAL // replay.MAX_LAYER + 3):
        replay.remember(f"layer{number}", blob, kept)
    assert replay.recall("layer0", blob) is None
    assert replay.recall(f"layer{number}", blob) is not None
    replay.forget_all()


def test_a_layer_blob_written_within_the_settling_time_is_not_kept_yet(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A change within one tick of the kernel's clock could leave the identity as it was: not trusted yet."""
    monkeypatch.setattr(fileid, "SETTLED_NS", 3600 * 10**9)
    replay.forget_all()
    blob = tmp_path / "blob"
    blob.write_bytes(b"just written")
    replay.remember("layer", str(blob), ((Member("a", "", b"0", 0o644, 1, 0), b"x"),))
    assert replay.recall("layer", str(blob)) is None
    replay.forget_all()
