"""What the cache holds beyond its entries: unreferenced blobs and partial downloads count, and prune reclaims them.

A fetch that failed after downloading, or a killed prune, leaves blob files no entry records. They verify: they are
no damage, so `cache verify` reports them as unreferenced and exits 0, and `--repair` keeps them (deleting them would
only download them again). Reclaiming them is the prune's business, and so is reclaiming partial downloads, which
count against the size budget too.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

from ocivendir.cache.index import CacheIndex
from ocivendir.cache.prune import prune_to_budget
from ocivendir.cache.store import BlobStore
from tests.conftest import run_cli
from tests.support.builders import Pusher, make_image


def _cached(pusher: Pusher, repo_prefix: str, tmp_path: Path) -> tuple[Path, str]:
    cache = tmp_path / "cache"
    image = pusher.image(f"{repo_prefix}/img", make_image({"a.txt": "entry\n"}))
    assert run_cli("pull", "-i", image, "-o", str(tmp_path / "out"), "--cache-dir", str(cache)).exit_code == 0
    return cache, image


def _loose_blob(cache: Path, data: bytes) -> Path:
    """A verified blob file that no entry records (as a failed fetch or a killed prune leaves one)."""
    path = cache / "blobs/sha256" / hashlib.sha256(data).hexdigest()
    path.write_bytes(data)
    return path


def _partial(cache: Path, data: bytes) -> Path:
    """A fresh partial download holding half of a blob."""
    path = cache / "tmp" / f"{hashlib.sha256(data).hexdigest()}.partial"
    path.write_bytes(data[: len(data) // 2])
    return path


def _entries_bytes(cache: Path) -> int:
    listed = json.loads(run_cli("cache", "ls", "--cache-dir", str(cache), "--json").stdout)
    return int(listed["result"]["totals"]["bytes"])


def test_verify_reports_verified_unreferenced_blobs_without_failing_and_repair_keeps_them(
    pusher: Pusher, repo_prefix: str, tmp_path: Path
) -> None:
    cache, _ = _cached(pusher, repo_prefix, tmp_path)
    loose = _loose_blob(cache, b"downloaded, then the fetch failed" * 100)
    checked = run_cli("cache", "verify", "--cache-dir", str(cache))
    assert checked.exit_code == 0, checked.stdout
    assert f"unreferenced blob {loose}: verified, no entry needs it" in checked.stdout
    assert "0 problems, 1 unreferenced blobs" in checked.stdout
    repaired = run_cli("cache", "verify", "--repair", "--cache-dir", str(cache), "--json")
    assert repaired.exit_code == 0
    doc = json.loads(repaired.stdout)["result"]
    assert (doc["repairs"], len(doc["unreferenced"])) == ([], 1)
    assert loose.exists()


def test_prune_to_a_size_reclaims_unreferenced_blobs_and_partials_before_any_entry(
    pusher: Pusher, repo_prefix: str, tmp_path: Path
) -> None:
    """--max-size counts every byte held: loose blobs and fresh partials go first, the entry stays within it."""
    cache, image = _cached(pusher, repo_prefix, tmp_path)
    loose = _loose_blob(cache, os.urandom(20_000))
    partial = _partial(cache, os.urandom(40_000))
    size = _entries_bytes(cache)
    dry = run_cli("cache", "prune", "--max-size", str(size), "--dry-run", "--cache-dir", str(cache), "--json")
    assert dry.exit_code == 0
    planned = json.loads(dry.stdout)["result"]
    assert (planned["removed"], planned["bytes_freed"]) == ([], 40_000)
    assert loose.exists()
    assert partial.exists()
    pruned = run_cli("cache", "prune", "--max-size", str(size), "--cache-dir", str(cache), "--json")
    assert pruned.exit_code == 0
    result = json.loads(pruned.stdout)["result"]
    assert result["unreferenced"] == [f"removed unreferenced blob {loose} (no entry needs it)"]
    assert [line.split(" (")[0] for line in result["partials"]] == [f"removed partial download {partial}"]
    assert (result["removed"], result["bytes_freed"]) == ([], 40_000)
    assert not loose.exists()
    assert not partial.exists()
    listed = json.loads(run_cli("cache", "ls", "--cache-dir", str(cache), "--json").stdout)
    assert [e["ref"] for e in listed["result"]["entries"]] == [image]


def test_the_automatic_budget_counts_partial_downloads(pusher: Pusher, repo_prefix: str, tmp_path: Path) -> None:
    cache, image = _cached(pusher, repo_prefix, tmp_path)
    partial = _partial(cache, os.urandom(40_000))
    store = BlobStore(cache)
    index = CacheIndex(cache / "index.db")
    try:
        pruned = prune_to_budget(store, index, _entries_bytes(cache) + 1000, keep=[image])
    finally:
        index.close()
    assert pruned is not None
    assert not partial.exists()
