"""The tee extractor: a layer applied while it downloads, stepping aside on a restart, never blocking a download."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from ocivendir.engine.stream import TeeExtractor
from ocivendir.errors import UnsafeArchive
from ocivendir.fs.extract import ExtractStats, TreePolicy, apply_layer
from tests.support.builders import Entry, tar_bytes


def extractor(dest: Path) -> TeeExtractor:
    def apply(pipe: io.RawIOBase) -> None:
        apply_layer(pipe, dest, policy=TreePolicy(), stats=ExtractStats(), what="layer")  # type: ignore[arg-type]

    return TeeExtractor(apply, dest)


def feed(tee: TeeExtractor, data: bytes, size: int = 1000) -> None:
    for offset in range(0, len(data), size):
        tee.feed(offset, data[offset : offset + size])


def test_a_layer_is_applied_as_its_chunks_arrive(tmp_path: Path) -> None:
    data = tar_bytes([Entry("a.txt", b"a" * 5000), Entry("d/b.txt", b"b")])
    tee = extractor(tmp_path)
    feed(tee, data)
    assert tee.finish(complete=True) is True
    assert (tmp_path / "a.txt").read_bytes() == b"a" * 5000
    assert (tmp_path / "d/b.txt").read_bytes() == b"b"


def test_an_empty_chunk_from_the_download_is_not_the_end_of_the_layer(tmp_path: Path) -> None:
    """A zero-length chunk is skipped by the pipe: its readers take b"" for the end of the stream.

    Handed on, the tar reader stopped there: at a block boundary the rest of the layer was silently left out, and the
    tee reported the layer applied.
    """
    data = tar_bytes([Entry("a.txt", b"a" * 1024), Entry("b.txt", b"b")])
    tee = extractor(tmp_path)
    tee.feed(0, data[:1536])  # a.txt's header and data, up to a block boundary
    tee.feed(1536, b"")
    tee.feed(1536, data[1536:])
    assert tee.finish(complete=True) is True
    assert (tmp_path / "b.txt").read_bytes() == b"b"


def test_a_download_that_starts_over_makes_the_tee_step_aside(tmp_path: Path) -> None:
    data = tar_bytes([Entry("a.txt", b"a" * 50_000)])
    tee = extractor(tmp_path)
    feed(tee, data[:20_000])
    feed(tee, data)  # offset 0 again: a retry
    assert tee.finish(complete=True) is False


def test_an_unsafe_layer_fails_after_the_download_without_blocking_it(tmp_path: Path) -> None:
    data = tar_bytes([Entry("../evil", b"x"), *[Entry(f"f{n}", b"y" * 10_000) for n in range(50)]])
    tee = extractor(tmp_path / "stage")
    (tmp_path / "stage").mkdir()
    feed(tee, data, size=512)
    with pytest.raises(UnsafeArchive):
        tee.finish(complete=True)
    assert not (tmp_path / "evil").exists()


def test_nothing_fed_means_the_caller_extracts(tmp_path: Path) -> None:
    assert extractor(tmp_path).finish(complete=False) is False
