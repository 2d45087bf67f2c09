"""fs/dropbehind.py: a large file being written does not fill the page cache, and every byte given is written, in order.

A file that is to grow by 8 MiB or more goes around the page cache with O_DIRECT, in whole aligned blocks written by a
thread while the next fills; its first and last partial blocks go through the page cache. Where O_DIRECT is refused (by
the file system, or by a direct write part-way), each time a full window more is written the write-back of everything
written so far is asked for and what is written back is dropped. Small files are never touched. The cache's blob
download and the extraction of a large tree file both use it; without posix_fadvise and O_DIRECT nothing happens.
"""

from __future__ import annotations

import errno
import fcntl
import hashlib
import io
import os
import threading
import time
from pathlib import Path

import pytest

from ocivendir.errors import UnsafeArchive
from ocivendir.fs import dropbehind
from ocivendir.fs.dropbehind import DIRECT_FROM, WINDOW, DropBehind
from ocivendir.fs.extract import ExtractStats, TreePolicy, apply_layer
from ocivendir.fs.limits import ExtractLimits, Tally
from ocivendir.oci.reference import Digest
from ocivendir.registry.download import BlobFile
from ocivendir.serial import Serial
from tests.support.builders import Entry, tar_bytes

MiB = 1 << 20
O_DIRECT = getattr(os, "O_DIRECT", 0)  # 0 on macOS: the direct tests skip there


@pytest.fixture
def no_direct(monkeypatch: pytest.MonkeyPatch) -> None:
    """A platform without O_DIRECT: every write goes through the page cache."""
    monkeypatch.setattr(dropbehind, "_O_DIRECT", 0)


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


def test_without_o_direct_a_large_file_extracted_into_a_tree_drops_its_pages_behind_and_small_ones_are_left_alone(
    tmp_path: Path, advised: list, no_direct: None
) -> None:
    big = os.urandom(2 * WINDOW + 3 * MiB)
    _extract(tmp_path, [Entry("small.yml", b"a: 1\n"), Entry("big.bin", big), Entry("other.yml", b"b: 2\n")])
    assert (tmp_path / "big.bin").read_bytes() == big
    # the file's data comes in reads that need not fall on window boundaries: a window ends within the read after it
    (_, first, first_end), (_, second, second_end) = advised
    assert (first, second) == (0, 0)
    assert WINDOW <= first_end < WINDOW + MiB
    assert first_end + WINDOW <= second_end < first_end + WINDOW + MiB


def test_without_o_direct_a_large_blob_downloaded_into_the_cache_drops_its_pages_behind(
    tmp_path: Path, advised: list, no_direct: None
) -> None:
    data = os.urandom(2 * WINDOW + MiB)
    with BlobFile(str(tmp_path / "blob.partial"), Digest(hashlib.sha256(data).hexdigest()), len(data)) as blob:
        blob.prepare()
        for start in range(0, len(data), MiB):
            blob.append(data[start : start + MiB])
        blob.verify("blob")
    assert (tmp_path / "blob.partial").read_bytes() == data
    assert [(offset, length) for _, offset, length in advised] == [(0, WINDOW), (0, 2 * WINDOW)]


def _direct_refused_by(directory: Path) -> bool:
    if not O_DIRECT:
        return True
    try:
        fd = os.open(directory / "probe", os.O_WRONLY | os.O_CREAT | O_DIRECT, 0o600)
    except OSError:
        return True
    os.close(fd)
    return False


@pytest.fixture
def writes(monkeypatch: pytest.MonkeyPatch) -> list[tuple[int, bool]]:
    """Every os.write made, as (length, whether O_DIRECT was on for the descriptor); the real call is made too."""
    calls: list[tuple[int, bool]] = []
    real = os.write

    def spy(fd: int, data: bytes | memoryview) -> int:
        calls.append((len(data), bool(fcntl.fcntl(fd, fcntl.F_GETFL) & O_DIRECT)))
        return real(fd, data)

    monkeypatch.setattr(os, "write", spy)
    return calls


def _write_in_chunks(path: Path, data: bytes, start: int, sizes: list[int], *, flush_every: int = 0) -> int:
    """Write `data[start:]` after a prefix of `start` bytes, in chunks of the sizes given in turn, then flush.

    The descriptor's status flags once flushed are returned.
    """
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.write(fd, data[:start])
        behind, position, count = DropBehind(fd, start, len(data)), start, 0
        while position < len(data):
            chunk = data[position : position + sizes[count % len(sizes)]]
            position += len(chunk)
            behind.write(chunk)
            count += 1
            if flush_every and count % flush_every == 0:
                behind.flush()  # the cache's blob is flushed when a broken download is checked, then written on
        behind.flush()
        return fcntl.fcntl(fd, fcntl.F_GETFL)
    finally:
        os.close(fd)


@pytest.mark.parametrize("start", [0, 1, 4095, 4096, 12345])
@pytest.mark.parametrize("flush_every", [0, 7])
def test_a_large_file_gets_every_byte_in_order_whatever_its_start_chunks_and_flushes(
    tmp_path: Path, start: int, flush_every: int
) -> None:
    data = os.urandom(start + 3 * DIRECT_FROM + 777)
    _write_in_chunks(tmp_path / "f", data, start, [1, 100, 4096, 65536, MiB, 3 * MiB, 777_777], flush_every=flush_every)
    assert (tmp_path / "f").read_bytes() == data


def test_a_large_file_goes_around_the_page_cache_in_whole_blocks_and_its_ends_through_it(
    tmp_path: Path, writes: list[tuple[int, bool]]
) -> None:
    if _direct_refused_by(tmp_path):
        pytest.skip("this file system refuses O_DIRECT")
    data = os.urandom(DIRECT_FROM + 3 * MiB + 5)
    flags = _write_in_chunks(tmp_path / "f", data, 100, [MiB])
    assert (tmp_path / "f").read_bytes() == data
    assert flags & O_DIRECT == 0  # off again once flushed
    direct = [length for length, on in writes if on]
    plain = [length for length, on in writes[1:] if not on]  # after the prefix written by the test
    assert direct
    assert all(length % 4096 == 0 for length in direct)
    assert plain[0] == 4096 - 100  # up to the first aligned offset
    assert sum(direct) + sum(plain) == len(data) - 100
    assert 0 < plain[-1] < 4096  # the last partial block


def test_a_small_file_never_goes_around_the_page_cache(tmp_path: Path, writes: list[tuple[int, bool]]) -> None:
    _write_in_chunks(tmp_path / "f", os.urandom(DIRECT_FROM - 1), 0, [MiB])
    assert not any(on for _, on in writes)


def test_a_file_system_that_refuses_o_direct_gets_every_byte_through_the_page_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, writes: list[tuple[int, bool]], advised: list
) -> None:
    if not O_DIRECT:
        pytest.skip("no O_DIRECT on this platform")
    real = fcntl.fcntl

    def refusing(fd: int, command: int, argument: int = 0) -> int:
        if command == fcntl.F_SETFL and argument & O_DIRECT:
            raise OSError(errno.EINVAL, "Invalid argument")
        return real(fd, command, argument)

    monkeypatch.setattr(dropbehind.fcntl, "fcntl", refusing)
    data = os.urandom(WINDOW + 3 * MiB)
    _write_in_chunks(tmp_path / "f", data, 0, [MiB])
    assert (tmp_path / "f").read_bytes() == data
    assert not any(on for _, on in writes)
    assert advised  # and its pages dropped behind instead


def _fail_direct_write(monkeypatch: pytest.MonkeyPatch, which: int, error: int = errno.EIO, *,
                       short: bool = False) -> list[int]:  # fmt: skip
    """The `which`-th direct os.write fails with `error` (or, `short`, writes only 3 blocks), once.

    Every other write is made. The direct writes counted so far are returned, in a list kept up to date.
    """
    real, count = os.write, [0]

    def write(fd: int, data: bytes | memoryview) -> int:
        if fcntl.fcntl(fd, fcntl.F_GETFL) & O_DIRECT:
            count[0] += 1
            if count[0] == which:
                if short:
                    return real(fd, memoryview(data)[:12288])
                raise OSError(error, os.strerror(error))
        return real(fd, data)

    monkeypatch.setattr(os, "write", write)
    return count


@pytest.mark.parametrize("answer", ["refused", "short"])
def test_a_direct_write_refused_or_cut_short_part_way_is_continued_in_order_through_the_page_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, answer: str
) -> None:
    if _direct_refused_by(tmp_path):
        pytest.skip("this file system refuses O_DIRECT")
    direct = _fail_direct_write(monkeypatch, which=3, error=errno.EINVAL, short=answer == "short")
    data = os.urandom(2 * DIRECT_FROM)
    _write_in_chunks(tmp_path / "f", data, 0, [MiB + 1])
    assert (tmp_path / "f").read_bytes() == data
    assert direct[0] == 3  # nothing went around the page cache after that


def test_a_failed_direct_write_is_raised_and_the_file_holds_a_prefix_of_the_bytes_given(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    if _direct_refused_by(tmp_path):
        pytest.skip("this file system refuses O_DIRECT")
    _fail_direct_write(monkeypatch, which=2, error=errno.ENOSPC)
    data = os.urandom(2 * DIRECT_FROM)
    with pytest.raises(OSError, match="No space left"):
        _write_in_chunks(tmp_path / "f", data, 0, [MiB])
    kept = (tmp_path / "f").read_bytes()
    assert 0 < len(kept) < len(data)
    assert data.startswith(kept)


def test_a_file_whose_layer_breaks_off_part_way_is_no_longer_written_once_its_descriptor_is_closed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The writer thread is stopped before the descriptor is closed: its number may be another file's next."""
    real_write, real_close = os.write, os.close
    events: list[tuple[str, int]] = []

    def slow_write(fd: int, data: bytes | memoryview) -> int:
        if threading.current_thread() is not threading.main_thread():
            time.sleep(0.05)  # a slow disk: the thread is still writing when the layer's error is raised
        events.append(("write", fd))
        return real_write(fd, data)

    def close(fd: int) -> None:
        events.append(("close", fd))
        real_close(fd)

    monkeypatch.setattr(os, "write", slow_write)
    monkeypatch.setattr(os, "close", close)
    whole = tar_bytes([Entry("big.bin", os.urandom(DIRECT_FROM + 4 * MiB))])
    running = set(threading.enumerate())
    with pytest.raises(UnsafeArchive, match="unexpected end of data"):
        _extract_stream(tmp_path, io.BytesIO(whole[: 512 + DIRECT_FROM]))  # the data stops 4 MiB short
    for thread in set(threading.enumerate()) - running:
        thread.join(timeout=2)  # a thread left writing has had the time to write after the close
    closed = [fd for event, fd in events if event == "close"]
    assert closed
    for fd in closed:
        last_close = max(i for i, event in enumerate(events) if event == ("close", fd))
        assert ("write", fd) not in events[last_close:]


def _extract_stream(stage: Path, stream: io.BytesIO) -> None:
    policy = TreePolicy(umask=0o022, directories="parents", limits=ExtractLimits())
    apply_layer(stream, stage, policy=policy, stats=ExtractStats(tally=Tally(policy.limits)), what="layer")


def test_after_a_failed_flush_nothing_more_is_written_and_the_file_stays_a_prefix(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    if _direct_refused_by(tmp_path):
        pytest.skip("this file system refuses O_DIRECT")
    data = os.urandom(DIRECT_FROM + 3 * MiB + 12345)
    fd = os.open(tmp_path / "f", os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        behind = DropBehind(fd, 0, len(data))
        _fail_direct_write(monkeypatch, which=5)  # the last full buffer: a later write or the flush sees the failure
        with pytest.raises(OSError, match="Input/output"):  # noqa: PT012 - whichever comes after the failed write
            for at in range(0, len(data), MiB):
                behind.write(data[at : at + MiB])
            behind.flush()
        with pytest.raises(OSError, match="Input/output"):
            behind.flush()  # as BlobFile.__exit__ flushes after verify's flush raised: the same failure, no write
        with pytest.raises(OSError, match="Input/output"):
            behind.write(b"more")
        behind.close()
    finally:
        os.close(fd)
    kept = (tmp_path / "f").read_bytes()
    assert len(kept) == 4 * 2 * MiB  # the four buffers before the failed one
    assert data.startswith(kept)


def test_a_blob_whose_last_direct_write_fails_keeps_a_prefix_for_the_next_attempt(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    if _direct_refused_by(tmp_path):
        pytest.skip("this file system refuses O_DIRECT")
    data = os.urandom(DIRECT_FROM + 3 * MiB + 12345)
    path = tmp_path / "blob.partial"
    running = set(threading.enumerate())
    digest = Digest(hashlib.sha256(data).hexdigest())
    with (  # noqa: PT012 - the failure may surface at any of these
        pytest.raises(OSError, match="Input/output"),
        BlobFile(str(path), digest, len(data)) as blob,
    ):
        blob.prepare()
        _fail_direct_write(monkeypatch, which=5)
        for at in range(0, len(data), MiB):
            blob.append(data[at : at + MiB])
        blob.verify("blob")
    assert data.startswith(path.read_bytes())
    assert set(threading.enumerate()) <= running  # no thread of the blob's left behind


def test_a_large_file_written_and_closed_leaves_no_thread_and_no_descriptor_behind(tmp_path: Path) -> None:
    if _direct_refused_by(tmp_path):
        pytest.skip("this file system refuses O_DIRECT")
    running, descriptors = set(threading.enumerate()), set(Path("/proc/self/fd").iterdir())
    fd = os.open(tmp_path / "f", os.O_WRONLY | os.O_CREAT, 0o600)
    behind = DropBehind(fd, 0, 64 * MiB)
    behind.write(os.urandom(5 * MiB))  # then the caller fails: it closes, without flushing
    behind.close()
    os.close(fd)
    assert set(threading.enumerate()) <= running
    assert set(Path("/proc/self/fd").iterdir()) <= descriptors


def test_a_direct_write_refused_part_way_sends_the_rest_through_the_page_cache_dropped_behind(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, advised: list
) -> None:
    if _direct_refused_by(tmp_path):
        pytest.skip("this file system refuses O_DIRECT")
    _fail_direct_write(monkeypatch, which=1, error=errno.EINVAL)
    data = os.urandom(3 * WINDOW)
    _write_in_chunks(tmp_path / "f", data, 0, [MiB])
    assert (tmp_path / "f").read_bytes() == data
    ends = [offset + length for _, offset, length in advised]
    assert len(ends) >= 2
    assert ends[-1] >= 2 * WINDOW


def test_a_writer_failure_reaches_the_filler_even_before_the_writer_thread_has_recorded_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The failed write's buffer is back in the pool before its thread records the failure: the filler takes it."""
    if _direct_refused_by(tmp_path):
        pytest.skip("this file system refuses O_DIRECT")
    real_emit = DropBehind._emit

    def slow_to_record(self: DropBehind, *item: object) -> None:
        try:
            real_emit(self, *item)  # type: ignore[arg-type]
        except OSError:
            time.sleep(0.2)  # the filler runs in this gap
            raise

    monkeypatch.setattr(DropBehind, "_emit", slow_to_record)
    _fail_direct_write(monkeypatch, which=1)
    fd = os.open(tmp_path / "f", os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o600)
    behind, failures = DropBehind(fd, 0, 4 * DIRECT_FROM), []

    def fill() -> None:
        try:
            for _ in range(4 * DIRECT_FROM // MiB):
                behind.write(os.urandom(MiB))
            behind.flush()
        except OSError as exc:
            failures.append(exc)

    filler = threading.Thread(target=fill, daemon=True)
    filler.start()
    filler.join(timeout=10)
    try:
        assert not filler.is_alive(), "the filler waits forever for a buffer"
        assert [exc.errno for exc in failures] == [errno.EIO]
    finally:
        behind.close()
        os.close(fd)


def test_an_interrupted_close_leaves_no_descriptor_behind_once_the_writer_thread_stops(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Ctrl-C during the join: the thread closes its own descriptor when it stops."""
    if _direct_refused_by(tmp_path):
        pytest.skip("this file system refuses O_DIRECT")
    descriptors = set(Path("/proc/self/fd").iterdir())
    fd = os.open(tmp_path / "f", os.O_WRONLY | os.O_CREAT, 0o600)
    behind = DropBehind(fd, 0, 64 * MiB)
    behind.write(os.urandom(5 * MiB))

    def interrupted(self: Serial) -> None:
        self._queue.put(None)
        raise KeyboardInterrupt

    monkeypatch.setattr(Serial, "close", interrupted)
    with pytest.raises(KeyboardInterrupt):
        behind.close()
    os.close(fd)
    deadline = time.monotonic() + 5
    while set(Path("/proc/self/fd").iterdir()) - descriptors and time.monotonic() < deadline:
        time.sleep(0.01)
    assert set(Path("/proc/self/fd").iterdir()) <= descriptors
