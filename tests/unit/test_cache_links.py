"""Links, FIFOs and directories planted in a shared cache's `blobs/sha256/`, `tmp/` and `locks/` are never followed.

A shared cache directory is writable by every caller: nothing there is read, chmodded or created through a link.
"""

from __future__ import annotations

import hashlib
import os
import stat
from pathlib import Path

import pytest
from responses import RequestsMock

from ocivendir.cache.index import CacheIndex
from ocivendir.cache.store import BlobStore
from ocivendir.errors import CacheError, DigestMismatch
from ocivendir.fs.locks import file_lock, removable_lock
from ocivendir.oci.reference import Digest, parse_reference
from ocivendir.registry.client import ClientOptions, RegistryClient
from ocivendir.registry.credentials import Credential
from ocivendir.registry.retry import RetryPolicy

DATA = b"private bytes of someone else"
DIGEST = Digest(hashlib.sha256(DATA).hexdigest())


@pytest.fixture
def store(tmp_path: Path) -> BlobStore:
    made = BlobStore(tmp_path / "cache")
    made.ensure_layout()
    return made


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    path = tmp_path / "outside" / "victim.txt"
    path.parent.mkdir()
    path.write_bytes(DATA)
    path.chmod(0o600)
    return path


def test_a_symlink_where_a_blob_belongs_is_not_a_blob_and_is_never_read_through(
    store: BlobStore, outside: Path
) -> None:
    Path(store.path(DIGEST)).symlink_to(outside)  # even one pointing at the right bytes
    assert not store.has(DIGEST)
    assert not store.has(DIGEST, len(DATA))
    with pytest.raises(DigestMismatch, match="not a regular file"):
        store.read_verified(DIGEST, None, "reading")
    assert not Path(store.path(DIGEST)).is_symlink()  # the planted link is removed, its target is not touched
    assert outside.read_bytes() == DATA
    Path(store.path(DIGEST)).symlink_to(outside)
    with pytest.raises(DigestMismatch, match="not a regular file"), store.open_verified(DIGEST, len(DATA), "x") as r:
        r.read()
    Path(store.path(DIGEST)).symlink_to(outside)
    assert store.problem(DIGEST, len(DATA)) == "not a regular file"


def test_a_fifo_where_a_blob_belongs_is_not_present_and_cannot_hang_a_read(store: BlobStore) -> None:
    os.mkfifo(store.path(DIGEST))
    assert not store.has(DIGEST)  # a stat() that followed it would say "present, 0 bytes"
    with pytest.raises(DigestMismatch, match="not a regular file"):
        store.read_verified(DIGEST, None, "reading")  # opened non-blocking, then refused: no writer is waited for
    assert not Path(store.path(DIGEST)).exists()


def test_a_present_blob_is_replaced_by_a_verified_copy_when_reuse_says_no(store: BlobStore) -> None:
    def fill(tmp: str) -> None:
        Path(tmp).write_bytes(DATA)

    assert store.admit(DIGEST, len(DATA), fill, reuse=lambda: False)
    calls: list[str] = []
    assert store.admit(DIGEST, len(DATA), lambda tmp: (calls.append(tmp), fill(tmp))[-1], reuse=lambda: False)
    assert len(calls) == 1  # fetched again: the caller could not show it may have the present copy
    assert not store.admit(DIGEST, len(DATA), fill, reuse=lambda: True)
    assert store.read_verified(DIGEST, len(DATA), "x") == DATA


def test_a_temp_file_swapped_for_a_link_is_neither_chmodded_nor_published(store: BlobStore, outside: Path) -> None:
    def swap(tmp: str) -> None:
        Path(tmp).unlink(missing_ok=True)
        Path(tmp).symlink_to(outside)  # another user of the cache, racing the download

    with pytest.raises(CacheError, match="replaced by a link or other non-file"):
        store.admit(DIGEST, len(DATA), swap)
    assert stat.S_IMODE(outside.stat().st_mode) == 0o600  # a chmod through the link would have made it 0644
    assert not Path(store.path(DIGEST)).exists()
    assert not list(Path(store.tmp).iterdir())


@pytest.mark.parametrize("lock", [file_lock, removable_lock])
def test_a_link_planted_where_a_lock_file_belongs_is_replaced_not_followed(
    store: BlobStore, tmp_path: Path, lock: object
) -> None:
    target = tmp_path / "outside-new-file"
    path = Path(store.lock_path(f"blob-{DIGEST.hex}"))
    path.symlink_to(target)  # dangling: opening it with O_CREAT would create the target as the victim
    with lock(path):  # type: ignore[operator]
        assert not target.exists()
        assert path.is_file()
        assert not path.is_symlink()
    assert not target.exists()


@pytest.mark.parametrize("name", ["tmp", "locks", "blobs/sha256", "blobs"])
def test_a_cache_directory_replaced_by_a_link_is_made_a_directory_again(tmp_path: Path, name: str) -> None:
    root = tmp_path / "cache"
    BlobStore(root).ensure_layout()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    planted = root / name
    planted.rename(tmp_path / "moved")
    planted.symlink_to(elsewhere, target_is_directory=True)
    store = BlobStore(root)
    store.ensure_layout()
    assert planted.is_dir()
    assert not planted.is_symlink()
    store.admit(DIGEST, len(DATA), lambda tmp: Path(tmp).write_bytes(DATA))
    assert store.read_verified(DIGEST, len(DATA), "x") == DATA
    assert list(elsewhere.iterdir()) == []


def test_possession_is_per_repository_and_goes_with_the_blob(tmp_path: Path) -> None:
    index = CacheIndex(tmp_path / "index.db")
    other = Digest("b" * 64)
    index.possess("r.io/team/app", [DIGEST, other])
    assert index.held("r.io/team/app", [DIGEST, other, Digest("c" * 64)]) == {DIGEST, other}
    assert index.held("r.io/team/other", [DIGEST]) == frozenset()
    assert index.held("evil.io/team/app", [DIGEST]) == frozenset()
    many = [Digest(hashlib.sha256(str(n).encode()).hexdigest()) for n in range(1200)]
    index.possess("r.io/big", many)
    assert index.held("r.io/big", many) == frozenset(many)  # more digests than SQLite takes parameters at once
    index.forget_blob(DIGEST)
    assert index.held("r.io/team/app", [DIGEST, other]) == {other}
    index.close()


def test_a_download_is_never_written_through_a_link_put_where_its_temp_file_was(
    store: BlobStore, outside: Path, rsps: RequestsMock
) -> None:
    options = ClientOptions(retry=RetryPolicy(attempts=1, sleep=lambda _s: None), ssl_cert_file="/nonexistent",
                            ssl_cert_dir="/nonexistent")  # fmt: skip
    client = RegistryClient(options, lambda _r, _p, **_: Credential())

    outside.write_bytes(b"a file of the user running ocivendir")

    def plant_then_fetch(tmp: str) -> None:
        Path(tmp).unlink()
        Path(tmp).symlink_to(outside)  # another user of the cache, racing the download
        client.fetch_blob_to(parse_reference(f"r.example.com/team/app@{DIGEST}").repository, DIGEST, len(DATA), tmp)

    # the download's file is opened before any request: the link is refused and nothing is asked of the registry
    with pytest.raises(CacheError, match="not followed"):
        store.admit(DIGEST, len(DATA), plant_then_fetch)
    assert len(rsps.calls) == 0
    assert outside.read_bytes() == b"a file of the user running ocivendir"  # not truncated, not overwritten
    assert not Path(store.path(DIGEST)).exists()


def test_a_huge_file_planted_where_a_small_blob_belongs_is_refused_by_its_size_and_never_read(
    store: BlobStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A sparse file of a TiB costs its planter nothing; read whole (to be hashed) it would take a TiB of memory."""
    with Path(store.path(DIGEST)).open("wb") as planted:
        planted.truncate(1 << 40)
    asked: list[int] = []
    real_read = os.read

    def read(fd: int, length: int) -> bytes:
        asked.append(length)
        assert length <= 1 << 20, "a read of the planted file's whole size"
        return real_read(fd, length)

    monkeypatch.setattr(os, "read", read)
    with pytest.raises(DigestMismatch, match="is corrupt"):
        store.read_verified(DIGEST, len(DATA), "reading")
    assert asked == []
    assert not Path(store.path(DIGEST)).exists()  # removed, as any corrupt blob is
