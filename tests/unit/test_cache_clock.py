"""A clock that ran ahead: every time the cache recorded in the future counts as expired, never as fresh."""

from __future__ import annotations

import hashlib
import json
import os
import time
from pathlib import Path

import pytest

from ocivendir.cache.index import BlobRow, CacheIndex
from ocivendir.cache.partials import stale_partials
from ocivendir.cache.prune import PrunePlan, prune
from ocivendir.cache.repair import verify
from ocivendir.cache.store import BlobStore
from ocivendir.oci.reference import Digest

YEAR = 365 * 86400.0


class Clock:
    """The index's clock, set by the test."""

    def __init__(self) -> None:
        self.now = 1_000_000_000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def cache(tmp_path: Path, clock: Clock) -> tuple[BlobStore, CacheIndex]:
    store = BlobStore(tmp_path / "cache")
    store.ensure_layout()
    return store, CacheIndex(tmp_path / "cache" / "index.db", clock=clock)


def _digest(data: bytes) -> Digest:
    return Digest(hashlib.sha256(data).hexdigest())


def _add(cache: tuple[BlobStore, CacheIndex], repo: str, blob: bytes) -> str:
    store, index = cache
    store.admit_bytes(_digest(blob), blob)
    row = BlobRow(digest=_digest(blob), size=len(blob), media_type="layer")
    manifest = json.dumps([str(row.digest)]).encode()
    store.admit_bytes(_digest(manifest), manifest)
    top = BlobRow(digest=_digest(manifest), size=len(manifest), media_type="application/vnd.oci.image.manifest.v1+json")
    index.record_ref(f"{repo}@{top.digest}", top, "image", [row])
    return repo


def test_an_entry_last_used_while_the_clock_ran_ahead_is_evicted_first_and_counts_as_old(
    cache: tuple[BlobStore, CacheIndex], clock: Clock
) -> None:
    """LRU order and --older-than measure from the last use; one dated a year ahead is the least recent of all."""
    store, index = cache
    clock.now += YEAR
    _add(cache, "r.io/ahead", b"a" * 3000)
    clock.now -= YEAR
    _add(cache, "r.io/today", b"t" * 3000)
    dry = prune(store, index, PrunePlan(max_size=index.unique_bytes() - 1, dry_run=True))
    assert [e.ref.split("@")[0] for e in dry.removed] == ["r.io/ahead"]
    old = prune(store, index, PrunePlan(older_than=7 * 86400.0))
    assert [e.ref.split("@")[0] for e in old.removed] == ["r.io/ahead"]
    assert [r.ref.split("@")[0] for r in index.refs()] == ["r.io/today"]


def _partial(store: BlobStore, data: bytes, *, ahead: float) -> Path:
    path = Path(store.partial_path(_digest(data)))
    path.write_bytes(data[: len(data) // 2])
    when = time.time() + ahead
    os.utime(path, (when, when))
    return path


def test_a_partial_dated_in_the_future_is_stale_and_reported_without_negative_days(
    cache: tuple[BlobStore, CacheIndex],
) -> None:
    """Its age cannot be told, so it is not kept for the next pull: prune and verify name it as dated in the future."""
    store, index = cache
    ahead = _partial(store, b"written while the clock ran ahead" * 100, ahead=YEAR)
    recent = _partial(store, b"written just now" * 100, ahead=0)
    assert [(path, why) for path, why, _ in stale_partials(store)] == [(str(ahead), "dated 365.0 days in the future")]
    everything = [why for _, why, _ in stale_partials(store, None)]
    assert not [why for why in everything if "-" in why], everything
    checked = verify(store, index, exclusive=True)
    assert checked.repairs == (f"would remove {ahead}: stale partial download (dated 365.0 days in the future)",)
    pruned = prune(store, index, PrunePlan())
    assert pruned.partials == (f"removed partial download {ahead} (dated 365.0 days in the future)",)
    assert not ahead.exists()
    assert recent.exists()
