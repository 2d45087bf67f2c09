"""registry/download.py on a tmp dir: kept bytes, appends, failures, links and Content-Range.

Kept bytes are hashed again, appends land in order (on a thread for large blobs), a failure stops the file at a
prefix, and Content-Range is parsed strictly.
"""

from __future__ import annotations

import hashlib
import os
import threading
from pathlib import Path

import pytest

from ocivendir.errors import DigestMismatch
from ocivendir.oci.reference import Digest
from ocivendir.registry import download
from ocivendir.registry.download import BlobFile, NotAFile, range_start

SMALL = os.urandom(300_000)
LARGE = os.urandom((8 << 20) + 12345)  # written on the thread


def digest_of(data: bytes) -> Digest:
    return Digest(hashlib.sha256(data).hexdigest())


@pytest.mark.parametrize("data", [SMALL, LARGE], ids=["small", "large"])
def test_kept_bytes_are_hashed_again_and_shown_first_then_the_rest_is_appended(tmp_path: Path, data: bytes) -> None:
    path = tmp_path / "blob.partial"
    path.write_bytes(data[:100_000])
    seen: list[tuple[int, int]] = []
    with BlobFile(
        str(path), digest_of(data), len(data), lambda offset, chunk: seen.append((offset, len(chunk)))
    ) as blob:
        assert blob.prepare() == 100_000
        assert blob.prepare() == 100_000  # read once
        for start in range(100_000, len(data), 1 << 20):
            blob.append(data[start : start + (1 << 20)])
        blob.verify("blob")
        assert blob.matches
    assert path.read_bytes() == data
    assert seen[0] == (0, 100_000)
    assert [offset for offset, _ in seen] == sorted(offset for offset, _ in seen)
    assert sum(size for _, size in seen) == len(data)


def test_a_file_longer_than_the_blob_is_emptied_and_a_mismatch_is_reported(tmp_path: Path) -> None:
    path = tmp_path / "blob.partial"
    path.write_bytes(SMALL + b"more")
    with BlobFile(str(path), digest_of(SMALL), len(SMALL)) as blob:
        assert blob.prepare() == 0
        assert path.stat().st_size == 0
        blob.append(b"x" * len(SMALL))
        assert not blob.matches
        with pytest.raises(DigestMismatch, match="expected digest"):
            blob.verify("blob")
        blob.restart()
        blob.append(SMALL[:10])
        with pytest.raises(DigestMismatch, match=f"expected {len(SMALL)} bytes, got 10"):
            blob.verify("blob")
    assert path.read_bytes() == SMALL[:10]


def test_a_failure_on_the_writing_thread_is_raised_and_the_file_stays_a_prefix(tmp_path: Path) -> None:
    path = tmp_path / "blob.partial"
    calls = []

    def fail_on_third(offset: int, chunk: bytes) -> None:
        calls.append(offset)
        if len(calls) == 3:
            raise OSError(28, "No space left on device")

    def fill() -> None:
        with BlobFile(str(path), digest_of(LARGE), len(LARGE), progress=lambda done: fail_on_third(done, b"")) as blob:
            blob.prepare()
            for start in range(0, len(LARGE), 1 << 20):
                blob.append(LARGE[start : start + (1 << 20)])
            blob.verify("blob")

    with pytest.raises(OSError, match="No space left"):
        fill()
    kept = path.read_bytes()
    assert len(kept) == 3 << 20  # the third chunk was written before its progress callback failed; nothing after it
    assert LARGE.startswith(kept)


def test_a_large_blobs_chunks_reach_the_chunk_callback_from_the_appending_thread_in_order(tmp_path: Path) -> None:
    """The tee's extractor gets each chunk as it is received, not once the blob's thread has written and hashed it.

    So inflating the layer overlaps hashing it instead of following it, one hand-over fewer per chunk. A callback that
    fails stops the download there: the chunk it refused is not queued, and the file holds a prefix of the blob.
    """
    seen: list[tuple[int, int]] = []
    threads: set[int] = set()

    def shown(offset: int, chunk: bytes) -> None:
        threads.add(threading.get_ident())
        seen.append((offset, len(chunk)))
        if offset >= 5 << 20:
            raise OSError(28, "No space left on device")

    path = tmp_path / "blob.partial"

    def fill() -> None:
        with BlobFile(str(path), digest_of(LARGE), len(LARGE), shown) as blob:
            blob.prepare()
            for start in range(0, len(LARGE), 1 << 20):
                blob.append(LARGE[start : start + (1 << 20)])

    with pytest.raises(OSError, match="No space left"):
        fill()
    assert threads == {threading.get_ident()}
    assert seen == [(n << 20, 1 << 20) for n in range(6)]
    kept = path.read_bytes()
    assert len(kept) == 5 << 20  # the five chunks before the refused one, all written
    assert LARGE.startswith(kept)


def test_a_link_or_fifo_is_never_written_through(tmp_path: Path) -> None:
    target = tmp_path / "elsewhere"
    target.write_bytes(b"keep")
    (tmp_path / "link").symlink_to(target)
    with pytest.raises(OSError, match=r"link|loop|Too many"):
        BlobFile(str(tmp_path / "link"), digest_of(SMALL), len(SMALL))
    os.mkfifo(tmp_path / "fifo")
    with pytest.raises(NotAFile):
        BlobFile(str(tmp_path / "fifo"), digest_of(SMALL), len(SMALL))
    assert target.read_bytes() == b"keep"


@pytest.mark.parametrize(
    ("header", "start"),
    [
        ("bytes 100-999/1000", 100),
        ("bytes 0-999/1000", 0),
        ("bytes 100-999/*", 100),
        ("BYTES 100-999/1000", 100),
        ("bytes 100-999/2000", None),  # another blob's size
        ("bytes 100-1000/1000", None),  # past the end
        ("bytes 500-100/1000", None),
        ("bytes -100/1000", None),
        ("items 100-999/1000", None),
        ("bytes 1e2-999/1000", None),
        ("", None),
    ],
)
def test_content_range_is_read_strictly(header: str, start: int | None) -> None:
    assert range_start(header, 1000) == start


def test_the_thread_is_used_only_for_large_blobs(tmp_path: Path) -> None:
    with BlobFile(str(tmp_path / "a"), digest_of(SMALL), len(SMALL)) as small:
        assert small._behind is None
    with BlobFile(str(tmp_path / "b"), digest_of(LARGE), len(LARGE)) as large:
        assert large._behind is not None
    assert len(LARGE) >= download._BEHIND_FROM
