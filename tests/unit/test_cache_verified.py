"""cache/verified.py: a small blob read and verified once is given again from memory, while its file is unchanged.

Only while the file at its path is the one that was read: anything done to the file sends the next read to disk,
where it is checked as before.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from ocivendir.cache import verified
from ocivendir.cache.store import BlobStore
from ocivendir.errors import DigestMismatch
from ocivendir.fs import fileid
from ocivendir.oci.reference import Digest

MANIFEST = b'{"schemaVersion":2,"layers":[]}' * 10


def digest_of(data: bytes) -> Digest:
    return Digest(hashlib.sha256(data).hexdigest())


@pytest.fixture
def store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[BlobStore]:
    """A fresh cache whose blobs count as settled at once (the rule itself: the last test)."""
    monkeypatch.setattr(fileid, "SETTLED_NS", 0)
    verified.forget_all()
    made = BlobStore(tmp_path / "cache")
    made.ensure_layout()
    yield made
    verified.forget_all()


@pytest.fixture
def opened(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The paths os.open is asked to open from now on (a read from disk opens the blob)."""
    seen: list[str] = []
    real = os.open

    def counting(path: str, *args: object, **kwargs: object) -> int:
        seen.append(os.fspath(path))
        return real(path, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(os, "open", counting)
    return seen


def test_a_second_read_of_a_verified_small_blob_opens_nothing(store: BlobStore, opened: list[str]) -> None:
    digest = digest_of(MANIFEST)
    store.admit_bytes(digest, MANIFEST)
    opened.clear()
    assert store.read_verified(digest, None, "test") == MANIFEST
    assert opened == [store.path(digest)]
    assert store.read_verified(digest, len(MANIFEST), "test") == MANIFEST
    assert opened == [store.path(digest)]  # the second read: one lstat, no open


def test_a_blob_rewritten_in_place_with_its_mtime_restored_is_read_again_and_dropped_as_corrupt(
    store: BlobStore,
) -> None:
    digest = digest_of(MANIFEST)
    store.admit_bytes(digest, MANIFEST)
    store.read_verified(digest, None, "test")
    path = Path(store.path(digest))
    before = path.stat()
    time.sleep(0.05)  # past the kernel's coarse timestamp tick: settled, as a blob from an earlier call is
    path.write_bytes(MANIFEST.replace(b"2", b"3"))  # same size, same inode
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))  # ctime cannot be given back
    with pytest.raises(DigestMismatch, match="is corrupt"):
        store.read_verified(digest, None, "test")
    assert not store.has(digest)


def test_a_blob_replaced_by_another_file_is_read_from_that_file(store: BlobStore, opened: list[str]) -> None:
    digest = digest_of(MANIFEST)
    store.admit_bytes(digest, MANIFEST)
    store.read_verified(digest, None, "test")
    path = Path(store.path(digest))
    shutil.copy(path, f"{path}.new")
    Path(f"{path}.new").replace(path)  # the same bytes, another inode
    opened.clear()
    assert store.read_verified(digest, None, "test") == MANIFEST
    assert opened == [store.path(digest)]


@pytest.mark.parametrize("change", ["removed", "a symlink to a good copy"])
def test_a_blob_removed_or_turned_into_a_link_is_not_served_from_memory(
    store: BlobStore, tmp_path: Path, change: str
) -> None:
    digest = digest_of(MANIFEST)
    store.admit_bytes(digest, MANIFEST)
    store.read_verified(digest, None, "test")
    path = Path(store.path(digest))
    if change == "removed":
        path.unlink()
    else:
        copy = tmp_path / "copy"
        shutil.copy(path, copy)
        path.unlink()
        path.symlink_to(copy)
    with pytest.raises(DigestMismatch):
        store.read_verified(digest, None, "test")


def test_a_read_of_another_size_than_asked_goes_to_disk_and_fails_there(store: BlobStore) -> None:
    digest = digest_of(MANIFEST)
    store.admit_bytes(digest, MANIFEST)
    store.read_verified(digest, None, "test")
    with pytest.raises(DigestMismatch, match="is corrupt"):
        store.read_verified(digest, len(MANIFEST) + 1, "test")


def test_a_blob_larger_than_the_bound_is_always_read_from_disk(store: BlobStore, opened: list[str]) -> None:
    data = b"x" * (verified.MAX_BLOB + 1)
    digest = digest_of(data)
    store.admit_bytes(digest, data)
    opened.clear()
    for _ in range(2):
        assert store.read_verified(digest, len(data), "test") == data
    assert opened == [store.path(digest)] * 2


def test_a_blob_that_failed_its_check_is_never_kept(store: BlobStore) -> None:
    digest = digest_of(MANIFEST)
    store.admit_bytes(digest, MANIFEST)
    Path(store.path(digest)).write_bytes(b"tampered")
    with pytest.raises(DigestMismatch):
        store.read_verified(digest, None, "test")
    assert verified.kept(store.path(digest)) is None


def test_a_blob_written_within_the_settling_time_is_read_from_disk_until_it_settles(
    store: BlobStore, opened: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A change within one tick of the kernel's clock could leave the identity as it was: not trusted yet."""
    monkeypatch.setattr(fileid, "SETTLED_NS", 3600 * 10**9)
    digest = digest_of(MANIFEST)
    store.admit_bytes(digest, MANIFEST)
    opened.clear()
    for _ in range(2):
        assert store.read_verified(digest, None, "test") == MANIFEST
    assert opened == [store.path(digest)] * 2
