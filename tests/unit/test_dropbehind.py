"""fs/dropbehind.py: a large file being written does not fill the page cache.

Each time a full window more is written, the write-back of everything written so far is asked for and what is written
back is dropped (a window still being written back is asked again next time); small files are never touched. The
cache's blob download and the extraction of a large tree file both use it; without posix_fadvise nothing happens.
"""

from __future__ import annotations

import hashlib
import io
import os
from pathlib import Path

import pytest

from ocivendir.fs import dropbehind
from ocivendir.fs.dropbehind import WINDOW, DropBehind
from ocivendir.fs.extract import ExtractStats, TreePolicy, apply_layer
from ocivendir.fs.limits import ExtractLimits, Tally
from ocivendir.oci.reference import Digest
from ocivendir.registry.download import BlobFile
from tests.support.builders import Entry, tar_bytes

MiB = 1 << 20


@pytest.fixture
def advised(monkeypatch: pytest.MonkeyPatch) -> list[tuple[int, int, int]]:
    """Every POSIX_FADV_DONTNEED asked for, as (fd, offset, length); the real call is made too."""
    calls: list[tuple[int, int, int]] = []
    real = os.posix_fadvise

    def spy(fd: int, offset: int, length: int, advice: int) -> None:
        assert advice == os.POSIX_FADV_DONTNEED
        calls.append((fd, offset, length))
        real(fd, offset, length, advice)

    monkeypatch.setattr(dropbehind, "_ADVISE", spy)
    return calls


def test_each_full_window_asks_to_drop_everything_written_so_far(tmp_path: Path, advised: list) -> None:
    with (tmp_path / "f").open("wb") as out:
        behind = DropBehind(out.fileno())
        for end in (MiB, WINDOW - 1, WINDOW, WINDOW + MiB, 2 * WINDOW + 5, 3 * WINDOW + 5, 3 * WINDOW + 6):
            behind.wrote(end)
        ranges = [(offset, offset + length) for _, offset, length in advised]
    assert ranges == [(0, WINDOW), (0, 2 * WINDOW + 5), (0, 3 * WINDOW + 5)]


def test_without_posix_fadvise_nothing_is_asked_and_writing_goes_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(dropbehind, "_ADVISE", None)
    big = os.urandom(WINDOW + MiB)
    _extract(tmp_path, [Entry("big.bin", big)])
    assert (tmp_path / "big.bin").read_bytes() == big


def test_a_window_counts_from_the_offset_writing_starts_at(tmp_path: Path, advised: list) -> None:
    with (tmp_path / "f").open("wb") as out:
        behind = DropBehind(out.fileno(), start=10 * MiB)
        behind.wrote(10 * MiB + WINDOW - 1)
        assert advised == []
        behind.wrote(10 * MiB + WINDOW)
    assert [(offset, length) for _, offset, length in advised] == [(10 * MiB, WINDOW)]


def _extract(stage: Path, entries: list[Entry]) -> None:
    policy = TreePolicy(umask=0o022, directories="parents", limits=ExtractLimits())
    apply_layer(io.BytesIO(tar_bytes(entries)), stage, policy=policy, stats=ExtractStats(tally=Tally(policy.limits)),
                what="layer")  # fmt: skip


def test_a_large_file_extracted_into_a_tree_drops_its_pages_behind_and_small_ones_are_left_alone(
    tmp_path: Path, advised: list
) -> None:
    big = os.urandom(2 * WINDOW + 3 * MiB)
    _extract(tmp_path, [Entry("small.yml", b"a: 1\n"), Entry("big.bin", big), Entry("other.yml", b"b: 2\n")])
    assert (tmp_path / "big.bin").read_bytes() == big
    # the file's data comes in reads that need not fall on window boundaries: a window ends within the read after it
    (_, first, first_end), (_, second, second_end) = advised
    assert (first, second) == (0, 0)
    assert WINDOW <= first_end < WINDOW + MiB
    assert first_end + WINDOW <= second_end < first_end + WINDOW + MiB


def test_a_large_blob_downloaded_into_the_cache_drops_its_pages_behind(tmp_path: Path, advised: list) -> None:
    data = os.urandom(2 * WINDOW + MiB)
    with BlobFile(str(tmp_path / "blob.partial"), Digest(hashlib.sha256(data).hexdigest()), len(data)) as blob:
        blob.prepare()
        for start in range(0, len(data), MiB):
            blob.append(data[start : start + MiB])
        blob.verify("blob")
    assert (tmp_path / "blob.partial").read_bytes() == data
    assert [(offset, length) for _, offset, length in advised] == [(0, WINDOW), (0, 2 * WINDOW)]
