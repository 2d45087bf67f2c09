"""The cache on a tmp dir: admission, verified reads, listing, LRU pruning under locks, and verify/repair."""

from __future__ import annotations

import hashlib
import json
import os
import time
from pathlib import Path

import pytest

from ocivendir.cache.index import BlobRow, CacheIndex
from ocivendir.cache.prune import PrunePlan, list_entries, prune, prune_to_budget
from ocivendir.cache.repair import verify
from ocivendir.cache.store import BlobStore, LayoutEntry
from ocivendir.errors import DigestMismatch
from ocivendir.fs.locks import LockBusy, file_lock
from ocivendir.oci.reference import Digest


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


MANIFEST_TYPE = "application/vnd.oci.image.manifest.v1+json"


def digest_of(data: bytes) -> Digest:
    return Digest(hashlib.sha256(data).hexdigest())


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def cache(tmp_path: Path, clock: Clock) -> tuple[BlobStore, CacheIndex]:
    store = BlobStore(tmp_path / "cache")
    store.ensure_layout()
    return store, CacheIndex(tmp_path / "cache" / "index.db", clock=clock)


def add(cache: tuple[BlobStore, CacheIndex], ref: str, blobs: list[bytes], kind: str = "image") -> Digest:
    store, index = cache
    rows = []
    for blob in blobs:
        store.admit_bytes(digest_of(blob), blob)
        rows.append(BlobRow(digest=digest_of(blob), size=len(blob), media_type="layer"))
    manifest = json.dumps([str(r.digest) for r in rows]).encode()
    store.admit_bytes(digest_of(manifest), manifest)
    top = BlobRow(
        digest=digest_of(manifest), size=len(manifest), media_type="application/vnd.oci.image.manifest.v1+json"
    )
    index.record_ref(f"{ref}@{top.digest}", top, kind, rows)
    return top.digest


def test_admission_verifies_and_publishes_by_rename(cache: tuple[BlobStore, CacheIndex]) -> None:
    store, _ = cache
    with pytest.raises(DigestMismatch):
        store.admit_bytes(digest_of(b"a"), b"b")
    assert not any(Path(store.blobs).iterdir())
    assert store.admit_bytes(digest_of(b"a"), b"a") is True
    assert store.admit_bytes(digest_of(b"a"), b"a") is False
    assert list(Path(store.tmp).iterdir()) == []


def test_a_temp_file_left_by_a_killed_run_is_never_served_and_is_cleaned_by_the_next_holder(
    cache: tuple[BlobStore, CacheIndex],
) -> None:
    store, _ = cache
    data = b"payload" * 100
    digest = digest_of(data)
    (Path(store.tmp) / f"{digest.hex}-deadbeef").write_bytes(data[:10])
    assert not store.has(digest)
    store.admit_bytes(digest, data)
    assert Path(store.path(digest)).read_bytes() == data
    assert list(Path(store.tmp).iterdir()) == []


def test_reads_are_reverified_and_a_corrupt_blob_is_dropped(cache: tuple[BlobStore, CacheIndex]) -> None:
    store, _ = cache
    data = b"x" * 5000
    digest = digest_of(data)
    store.admit_bytes(digest, data)
    Path(store.path(digest)).write_bytes(data[:-1] + b"y")
    with pytest.raises(DigestMismatch), store.open_verified(digest, len(data), "test") as reader:
        reader.read()
    assert not store.has(digest)


def test_ls_lists_refs_most_recent_first_with_unique_byte_totals(
    cache: tuple[BlobStore, CacheIndex], clock: Clock
) -> None:
    shared = b"s" * 1000
    add(cache, "r.io/aa", [shared, b"a" * 10])
    clock.now += 10
    add(cache, "r.io/bb", [shared, b"b" * 5000], kind="bundle")
    result = list_entries(*cache)
    assert [e.ref.split("@")[0] for e in result.entries] == ["r.io/bb", "r.io/aa"]
    assert result.totals.entries == 2
    assert result.totals.bytes == sum(b.size for b in cache[1].iter_blobs())
    assert [e.ref.split("@")[0] for e in list_entries(*cache, kinds=["bundle"]).entries] == ["r.io/bb"]
    assert list_entries(*cache, sort="size").entries[0].ref.startswith("r.io/bb")


def test_prune_evicts_least_recently_used_first_and_keeps_shared_blobs(
    cache: tuple[BlobStore, CacheIndex], clock: Clock
) -> None:
    store, index = cache
    shared = b"s" * 1000
    add(cache, "r.io/old", [shared, b"o" * 3000])
    clock.now += 10
    add(cache, "r.io/mid", [shared, b"m" * 3000])
    clock.now += 10
    add(cache, "r.io/new", [b"n" * 3000])
    result = prune(store, index, PrunePlan(max_size=index.unique_bytes() - 1))
    assert [e.ref.split("@")[0] for e in result.removed] == ["r.io/old"]
    assert store.has(digest_of(shared))
    assert not store.has(digest_of(b"o" * 3000))
    assert result.bytes_freed > 3000


def test_prune_dry_run_changes_nothing(cache: tuple[BlobStore, CacheIndex], clock: Clock) -> None:
    store, index = cache
    add(cache, "r.io/one", [b"1" * 100])
    clock.now += 8 * 86400
    before = sorted(p.name for p in Path(store.blobs).iterdir())
    result = prune(store, index, PrunePlan(older_than=7 * 86400, dry_run=True))
    assert len(result.removed) == 1
    assert result.bytes_freed > 100
    assert sorted(p.name for p in Path(store.blobs).iterdir()) == before
    assert len(index.refs()) == 1


def test_prune_skips_an_entry_in_use_by_a_running_sync(cache: tuple[BlobStore, CacheIndex]) -> None:
    store, index = cache
    manifest = add(cache, "r.io/busy", [b"busy" * 100])
    ref = f"r.io/busy@{manifest}"
    lock = store.lock_path(f"entry-{hashlib.sha256(ref.encode()).hexdigest()}")
    with file_lock(lock, shared=True):
        result = prune(store, index, PrunePlan(everything=True))
    assert result.removed == ()
    assert result.skipped_in_use == (ref,)
    assert prune(store, index, PrunePlan(everything=True)).removed[0].ref == ref


def test_prune_keeps_a_blob_that_a_run_fetched_again_after_its_rows_went(
    cache: tuple[BlobStore, CacheIndex], monkeypatch: pytest.MonkeyPatch
) -> None:
    store, index = cache
    layer = b"again" * 100
    add(cache, "r.io/app", [layer])
    removed = index.remove_refs

    def racing(refs: list[str]) -> list[Digest]:
        orphans = removed(refs)
        index.possess("r.io/app", [digest_of(layer)])  # a sync fetched it again, under the blob's lock, in between
        return orphans

    monkeypatch.setattr(index, "remove_refs", racing)
    result = prune(store, index, PrunePlan(everything=True))
    assert len(result.removed) == 1
    assert store.has(digest_of(layer))  # the run that recorded it will use it: never deleted under it
    manifests = [p for p in Path(store.blobs).iterdir() if p.name != digest_of(layer).hex]
    assert manifests == []  # the rest of the entry went


def test_a_new_cache_directory_is_laid_out_without_a_sync_and_a_crash_s_empty_markers_are_written_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The marker is a constant and the empty `index.json` is rewritten durably with the first ref: no fsync for them.

    What a crash may leave of a file written without fsync is an empty one: the next run writes it again.
    """
    synced: list[int] = []
    real_fsync = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: synced.append(fd) or real_fsync(fd))
    store = BlobStore(tmp_path / "cache")
    store.ensure_layout()
    assert synced == []
    root = Path(store.root)
    assert (root / "oci-layout").read_text() == '{"imageLayoutVersion":"1.0.0"}'
    assert json.loads((root / "index.json").read_text())["manifests"] == []
    for name in ("oci-layout", "index.json"):
        (root / name).write_bytes(b"")
    store.ensure_layout()
    assert (root / "oci-layout").read_text() == '{"imageLayoutVersion":"1.0.0"}'
    assert json.loads((root / "index.json").read_text())["manifests"] == []
    store.write_index_json(lambda: [LayoutEntry(ref=f"r.io/a@{digest_of(b'm')}", digest=digest_of(b"m"),
                                                media_type=MANIFEST_TYPE, size=1)])  # fmt: skip
    assert len(synced) == 2  # a listing that names refs is durable: the file, then its directory


def test_index_json_lists_what_the_index_holds_when_its_lock_is_taken(cache: tuple[BlobStore, CacheIndex]) -> None:
    store, index = cache
    add(cache, "r.io/one", [b"1" * 10])
    asked_under_lock = []

    def entries() -> list[LayoutEntry]:
        try:
            with file_lock(store.lock_path("index-json"), timeout=0):
                asked_under_lock.append(False)
        except LockBusy:
            asked_under_lock.append(True)
        return index.layout_entries()

    store.write_index_json(entries)
    assert asked_under_lock == [True]
    names = [m["annotations"]["org.opencontainers.image.ref.name"] for m in
             json.loads((Path(store.root) / "index.json").read_text())["manifests"]]  # fmt: skip
    assert [n.split("@")[0] for n in names] == ["r.io/one"]


def test_the_automatic_budget_prunes_to_ninety_percent_only_once_exceeded(
    cache: tuple[BlobStore, CacheIndex], clock: Clock
) -> None:
    store, index = cache
    for number in range(10):
        add(cache, f"r.io/e{number}", [bytes([number]) * 1000])
        clock.now += 1
    total = index.unique_bytes()
    assert prune_to_budget(store, index, total, keep=()) is None
    result = prune_to_budget(store, index, total - 1, keep=())
    assert result is not None
    assert index.unique_bytes() <= int((total - 1) * 0.9)
    assert result.removed[0].ref.startswith("r.io/e0@")


def test_verify_removes_truncated_blobs_with_the_refs_that_need_them(cache: tuple[BlobStore, CacheIndex]) -> None:
    store, index = cache
    layer = b"L" * 4096
    add(cache, "r.io/app", [layer])
    add(cache, "r.io/other", [b"fine"])
    Path(store.path(digest_of(layer))).write_bytes(layer[:100])
    dry = verify(store, index)
    assert dry.consistent is False
    assert len(index.refs()) == 2
    result = verify(store, index, repair=True)
    assert result.consistent is True
    assert any("truncated" in r and "r.io/app@" in r for r in result.repairs)
    assert [r.ref.split("@")[0] for r in index.refs()] == ["r.io/other"]
    assert verify(store, index).repairs == ()


def test_listing_ten_thousand_entries_is_one_query(cache: tuple[BlobStore, CacheIndex]) -> None:
    store, index = cache
    statements = []
    now = time.time()
    for number in range(10_000):
        digest = f"sha256:{number:064x}"
        statements += [
            ("INSERT INTO blobs VALUES (?,?,?,?,?)", (digest, 100, "m", now, now)),
            ("INSERT INTO edges VALUES (?,?)", (digest, digest)),
            (
                "INSERT INTO refs VALUES (?,?,?,?,?,?,?)",
                (f"r.io/x{number}@{digest}", digest, "image", MANIFEST_TYPE, 100, now, now),
            ),
        ]
    index._write(statements, repository=None)
    result = list_entries(store, index)
    assert result.totals.entries == 10_000
    assert result.totals.bytes == 1_000_000
    planned = prune(store, index, PrunePlan(max_size=500_000, dry_run=True))
    assert len(planned.removed) == 5_000


def test_verify_finds_and_repair_removes_junk_damaged_orphans_stale_files_and_a_broken_layout(
    cache: tuple[BlobStore, CacheIndex],
) -> None:
    """An orphan blob that verifies is no damage: reported as unreferenced, kept for `cache prune`."""
    store, index = cache
    kept = add(cache, "r.io/keep", [b"kept" * 100])
    orphan = b"nobody needs me"
    (Path(store.blobs) / digest_of(orphan).hex).write_bytes(orphan)
    (Path(store.blobs) / digest_of(b"other bytes").hex).write_bytes(b"damaged")
    (Path(store.blobs) / "notes.txt").write_text("junk")
    (Path(store.blobs) / ("b" * 64)).mkdir()
    (Path(store.blobs).parent / "sha512").mkdir()
    (Path(store.tmp) / f"{'c' * 64}-dead01").write_bytes(b"partial")
    (Path(store.locks) / f"target-{'d' * 64}").write_bytes(b"")
    (Path(store.locks) / f"blob-{'e' * 64}").mkdir()
    (Path(store.root) / "index.json").write_text("{broken")
    (Path(store.root) / "oci-layout").write_text("{}")
    (Path(store.root) / "mine.txt").write_text("left alone")
    report = verify(store, index, exclusive=True)
    assert report.consistent is False
    assert len(report.repairs) == 8  # the target's lock file is no damage: a killed pull's, taken by its next run
    assert (Path(store.blobs) / "notes.txt").exists()  # reporting changes nothing
    assert verify(store, index).repairs == ()  # without the cache to itself only blobs are re-hashed
    fixed = verify(store, index, repair=True, exclusive=True)
    assert fixed.consistent is True
    assert len(fixed.repairs) == 9  # and repairing removes it too
    assert not (Path(store.locks) / f"target-{'d' * 64}").exists()
    assert verify(store, index, exclusive=True).repairs == ()
    assert (
        fixed.unreferenced
        == report.unreferenced
        == (
            f"unreferenced blob {store.path(digest_of(orphan))}: verified, no entry needs it (cache prune reclaims it)",
        )
    )
    assert Path(store.path(digest_of(orphan))).read_bytes() == orphan
    assert not Path(store.path(digest_of(b"other bytes"))).exists()
    assert sorted(p.name for p in Path(store.blobs).parent.iterdir()) == ["sha256"]
    assert list(Path(store.tmp).iterdir()) == []
    assert not (Path(store.locks) / f"blob-{'e' * 64}").exists()
    assert (Path(store.root) / "mine.txt").exists()
    assert [e.ref.split("@")[0] for e in list_entries(store, index).entries] == ["r.io/keep"]
    assert store.has(kept)


def _partials(store: BlobStore) -> dict[str, bytes]:
    """Partial downloads in tmp/, by digest hex."""
    return {p.name.removesuffix(".partial"): p.read_bytes() for p in Path(store.tmp).glob("*.partial")}


def _plant_partial(store: BlobStore, data: bytes, age_days: float = 0) -> Path:
    path = Path(store.partial_path(digest_of(data)))
    path.write_bytes(data[: len(data) // 2])
    when = time.time() - age_days * 86400
    os.utime(path, (when, when))
    return path


def test_prune_removes_stale_partial_downloads_and_keeps_recent_ones_and_those_being_written(
    cache: tuple[BlobStore, CacheIndex],
) -> None:
    store, index = cache
    recent = _plant_partial(store, b"recent blob" * 100)
    old = _plant_partial(store, b"old blob" * 100, age_days=8)
    busy = _plant_partial(store, b"being downloaded" * 100, age_days=30)
    cached = b"published, not yet cleaned" * 100
    add(cache, "r.example/a", [cached])
    finished = _plant_partial(store, cached)
    dry = prune(store, index, PrunePlan(dry_run=True))
    assert [line.split(" (")[0] for line in dry.partials] == [
        f"would remove partial download {p}" for p in sorted([str(old), str(busy), str(finished)])
    ]
    assert len(_partials(store)) == 4
    with file_lock(store.lock_path(f"blob-{busy.name.removesuffix('.partial')}")):  # a pull is resuming it
        result = prune(store, index, PrunePlan())
    assert sorted(result.partials) == sorted([
        f"removed partial download {old} (not written for 8.0 days)",
        f"removed partial download {finished} (its blob is cached)",
    ])  # fmt: skip
    assert result.bytes_freed >= len(b"old blob" * 100) // 2
    assert sorted(_partials(store)) == sorted([recent.name[:64], busy.name[:64]])
    assert prune(store, index, PrunePlan(older_than=86400.0)).partials == (
        f"removed partial download {busy} (not written for 30.0 days)",
    )
    assert prune(store, index, PrunePlan(everything=True)).partials == (
        f"removed partial download {recent} (not written for 0.0 days)",
    )
    assert _partials(store) == {}


def test_verify_keeps_a_recent_partial_download_for_the_next_pull_and_repair_removes_stale_ones(
    cache: tuple[BlobStore, CacheIndex],
) -> None:
    store, index = cache
    recent = _plant_partial(store, b"recent blob" * 100)
    old = _plant_partial(store, b"old blob" * 100, age_days=8)
    checked = verify(store, index, exclusive=True)
    assert f"would remove {old}: stale partial download (not written for 8.0 days)" in checked.repairs
    assert not [line for line in checked.repairs if str(recent) in line]
    repaired = verify(store, index, repair=True, exclusive=True)
    assert f"removed {old}: stale partial download (not written for 8.0 days)" in repaired.repairs
    assert sorted(_partials(store)) == [recent.name[:64]]


def test_an_existing_layout_is_checked_with_one_lstat_per_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every call opens the cache: a layout already there costs no mkdir; a directory removed since is made again."""
    store = BlobStore(tmp_path / "cache")
    store.ensure_layout()
    made: list[str] = []
    real_mkdir = os.mkdir
    monkeypatch.setattr(os, "mkdir", lambda path, *a, **k: made.append(str(path)) or real_mkdir(path, *a, **k))
    store.ensure_layout()
    assert made == []
    Path(store.tmp).rmdir()
    store.ensure_layout()
    assert made == [store.tmp]
    assert Path(store.tmp).is_dir()
