"""A cache on a full or read-only filesystem (a sized emptyDir, a seeded cache mounted read-only), on a real tmpfs.

Warm content needs no write: it is served, as vendir serves it. Only a call that must write fails, and it says why
(the filesystem is full, or read-only), names the path and the filesystem, and never advises rebuilding or removing
the index, which would destroy verdicts and grants for nothing.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from ocivendir.cache.index import TOUCH_INTERVAL, CacheIndex
from tests.conftest import CliResult, run_cli
from tests.support.builders import Pusher, make_image, publish_bundle
from tests.support.mounts import Mount, fill, small_tmpfs, starve
from tests.support.registry import Registry

HEAD = "apiVersion: vendir.k14s.io/v1alpha1\nkind: Config\n"
REPAIR_ADVICE = ("verify --repair", "remove the cache")


@pytest.fixture
def mounted(tmp_path: Path) -> Mount:
    with small_tmpfs(tmp_path / "cache", "2m") as mount:
        yield mount


def _sync(work: Path, cache: Path, image: str) -> CliResult:
    work.mkdir(exist_ok=True)
    config = HEAD + f"directories:\n- path: vendor\n  contents:\n  - path: image\n    image: {{url: '{image}'}}\n"
    (work / "vendir.yml").write_text(config)
    return run_cli("sync", "--chdir", str(work), "--cache-dir", str(cache))


def _pull(image: str, out: Path, cache: Path) -> CliResult:
    return run_cli("pull", "-i", image, "-o", str(out), "--cache-dir", str(cache))


def _warm(pusher: Pusher, repo_prefix: str, tmp_path: Path, cache: Path) -> str:
    """A small image, synced and pulled once into the cache."""
    image = pusher.image(f"{repo_prefix}/small", make_image({"small.txt": "warm\n"}))
    assert _sync(tmp_path / "work", cache, image).exit_code == 0
    assert _pull(image, tmp_path / "first", cache).exit_code == 0
    return image


def _partials(cache: Path) -> list[str]:
    return [p.name for p in (cache / "tmp").iterdir() if p.name.endswith(".partial")]


def test_a_full_cache_serves_warm_digest_pinned_syncs_and_pulls_and_lists(
    pusher: Pusher, repo_prefix: str, tmp_path: Path, mounted: Mount, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Even when the entry's last use is due to be recorded again: that write is skipped, the content is served."""
    cache = mounted.path
    image = _warm(pusher, repo_prefix, tmp_path, cache)
    fill(cache)
    monkeypatch.setattr(CacheIndex, "now", property(lambda _: time.time() + 2 * TOUCH_INTERVAL))
    synced = _sync(tmp_path / "work", cache, image)
    assert synced.exit_code == 0, synced.stderr
    assert (tmp_path / "work/vendor/image/small.txt").read_text() == "warm\n"
    pulled = _pull(image, tmp_path / "second", cache)
    assert pulled.exit_code == 0, pulled.stderr
    assert (tmp_path / "second/small.txt").read_text() == "warm\n"
    listed = run_cli("cache", "ls", "--cache-dir", str(cache))
    assert listed.exit_code == 0, listed.stderr
    assert image in listed.stdout


def test_new_content_on_a_full_cache_fails_naming_the_full_filesystem_and_never_advises_removing_the_index(
    pusher: Pusher, repo_prefix: str, tmp_path: Path, mounted: Mount
) -> None:
    """ENOSPC by its name, with the file and the filesystem's mount point; the hint frees space, not the index."""
    cache = mounted.path
    _warm(pusher, repo_prefix, tmp_path, cache)
    fill(cache)
    cold = pusher.image(f"{repo_prefix}/cold", make_image({"cold.txt": "new content\n"}))
    failed = _pull(cold, tmp_path / "cold", cache)
    assert failed.exit_code == 1
    assert "no space left on device" in failed.stderr
    assert f"on the filesystem mounted at '{cache}'" in failed.stderr
    assert "cache prune --max-size" in failed.stderr
    assert not [advice for advice in (*REPAIR_ADVICE, "writable") if advice in failed.stderr], failed.stderr
    assert not (tmp_path / "cold").exists()


def test_a_blob_larger_than_the_free_space_leaves_no_partial_and_later_fetches_work(
    pusher: Pusher, repo_prefix: str, tmp_path: Path, mounted: Mount
) -> None:
    """Its partial would keep the filesystem full and fail every later cold fetch: it is dropped."""
    cache = mounted.path
    _warm(pusher, repo_prefix, tmp_path, cache)
    big = pusher.image(f"{repo_prefix}/big", make_image({"big.bin": os.urandom(3 * 1024 * 1024)}))
    failed = _pull(big, tmp_path / "big", cache)
    assert failed.exit_code == 1
    assert "no space left on device" in failed.stderr
    assert f"{cache / 'tmp'}/" in failed.stderr  # the file the write was refused for
    assert _partials(cache) == []
    later = pusher.image(f"{repo_prefix}/later", make_image({"later.txt": "fits\n"}))
    fetched = _pull(later, tmp_path / "later", cache)
    assert fetched.exit_code == 0, fetched.stderr


# a served call's worker keeps the index open, and Linux refuses to remount its filesystem read-only (EBUSY): the calls
# that precede a remount stay in this process, whose kept connections the remount closes first
_HERE = pytest.mark.in_process


@_HERE
def test_a_read_only_cache_serves_warm_calls_and_a_call_that_must_write_is_told_to_make_it_writable(
    pusher: Pusher, repo_prefix: str, tmp_path: Path, mounted: Mount
) -> None:
    """A seeded cache mounted read-only (an air-gapped node): syncs, pulls and `cache ls` work; new content fails."""
    cache = mounted.path
    image = _warm(pusher, repo_prefix, tmp_path, cache)
    cold = pusher.image(f"{repo_prefix}/cold", make_image({"cold.txt": "new content\n"}))
    mounted.read_only()
    synced = _sync(tmp_path / "work", cache, image)
    assert synced.exit_code == 0, synced.stderr
    pulled = _pull(image, tmp_path / "second", cache)
    assert pulled.exit_code == 0, pulled.stderr
    assert (tmp_path / "second/small.txt").read_text() == "warm\n"
    listed = run_cli("cache", "ls", "--cache-dir", str(cache))
    assert listed.exit_code == 0, listed.stderr
    assert image in listed.stdout
    failed = _pull(cold, tmp_path / "cold", cache)
    assert failed.exit_code == 1
    assert "read-only file system" in failed.stderr
    assert f"make '{cache}' writable" in failed.stderr
    assert not [advice for advice in REPAIR_ADVICE if advice in failed.stderr], failed.stderr
    pruned = run_cli("cache", "prune", "--all", "--cache-dir", str(cache))
    assert pruned.exit_code == 1
    assert f"make '{cache}' writable" in pruned.stderr
    assert not (tmp_path / "cold").exists()


@_HERE
def test_a_read_only_cache_serves_a_tag_and_rechecks_a_bundles_verdict_without_recording_them(
    registry: Registry, pusher: Pusher, repo_prefix: str, tmp_path: Path, mounted: Mount
) -> None:
    """What a warm call only records (a tag's answer, a verdict, the scheme that worked) is skipped, not fatal."""
    cache = mounted.path
    pusher.image(f"{repo_prefix}/tagged", make_image({"t.txt": "tagged\n"}), tag="v1")
    tag = f"{registry.host}/{repo_prefix}/tagged:v1"
    bundle = publish_bundle(pusher, repo_prefix, images=1).ref(registry)
    assert _pull(tag, tmp_path / "tag", cache).exit_code == 0
    assert run_cli("pull", "-b", bundle, "-o", str(tmp_path / "b"), "--cache-dir", str(cache)).exit_code == 0
    mounted.read_only()
    by_tag = _pull(tag, tmp_path / "tag-again", cache)
    assert by_tag.exit_code == 0, by_tag.stderr
    assert (tmp_path / "tag-again/t.txt").read_text() == "tagged\n"
    rechecked = run_cli("pull", "-b", bundle, "-o", str(tmp_path / "b-again"), "--cache-dir", str(cache),
                        "--relocation-recheck", "0")  # fmt: skip
    assert rechecked.exit_code == 0, rechecked.stderr


def test_a_full_target_filesystem_is_named_with_the_file_and_its_mount_point(
    pusher: Pusher, repo_prefix: str, tmp_path: Path
) -> None:
    """ENOSPC while a layer is written into the target names the file, not only the system's words."""
    big = pusher.image(f"{repo_prefix}/big", make_image({"big.bin": os.urandom(3 * 1024 * 1024)}))
    with small_tmpfs(tmp_path / "target", "1m") as target:
        failed = _pull(big, target.path / "out", tmp_path / "cache")
        assert failed.exit_code == 1
        assert f"/big.bin': no space left on device (on the filesystem mounted at '{target.path}')" in failed.stderr
        assert not (target.path / "out").exists()


def test_prune_to_a_size_frees_a_cache_filled_by_a_partial_download(
    pusher: Pusher, repo_prefix: str, tmp_path: Path, mounted: Mount
) -> None:
    """A sized emptyDir filled by a download left behind: `cache prune --max-size 0` frees it all, entries included."""
    cache = mounted.path
    image = _warm(pusher, repo_prefix, tmp_path, cache)
    partial = fill(cache / "tmp").rename(cache / "tmp" / f"{'a' * 64}.partial")
    pruned = run_cli("cache", "prune", "--max-size", "0", "--cache-dir", str(cache), "--json")
    assert pruned.exit_code == 0, pruned.stderr
    assert [e["ref"] for e in json.loads(pruned.stdout)["result"]["removed"]] == [image]
    assert not partial.exists()
    assert _pull(image, tmp_path / "again", cache).exit_code == 0


def test_a_cache_out_of_inodes_serves_warm_syncs_and_pulls(pusher: Pusher, repo_prefix: str, tmp_path: Path) -> None:
    """No lock file can be made for a target there: targets are locked elsewhere, and the content is served."""
    with small_tmpfs(tmp_path / "cache", "2m", inodes=200) as mounted:
        image = _warm(pusher, repo_prefix, tmp_path, mounted.path)
        starve(mounted.path)
        synced = _sync(tmp_path / "work", mounted.path, image)
        assert synced.exit_code == 0, synced.stderr
        pulled = _pull(image, tmp_path / "second", mounted.path)
        assert pulled.exit_code == 0, pulled.stderr
        assert (tmp_path / "second/small.txt").read_text() == "warm\n"


@_HERE
def test_repairing_or_pruning_a_read_only_cache_fails_with_the_hint_and_verify_still_reports(
    pusher: Pusher, repo_prefix: str, tmp_path: Path, mounted: Mount
) -> None:
    cache = mounted.path
    _warm(pusher, repo_prefix, tmp_path, cache)
    (cache / "blobs/sha256/notes.txt").write_text("junk")
    stale = cache / "tmp" / f"{'b' * 64}.partial"
    stale.write_bytes(b"half")
    os.utime(stale, (time.time() - 30 * 86400,) * 2)
    mounted.read_only()
    checked = run_cli("cache", "verify", "--cache-dir", str(cache))
    assert checked.exit_code == 1
    assert "notes.txt: junk" in checked.stdout
    for command in (("verify", "--repair"), ("prune",)):
        failed = run_cli("cache", *command, "--cache-dir", str(cache))
        assert failed.exit_code == 1, command
        assert "read-only file system" in failed.stderr
        assert f"make '{cache}' writable" in failed.stderr, failed.stderr
