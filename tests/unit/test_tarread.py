"""The tar reader reads what tarfile reads (differential), and refuses what an attacker would craft."""

from __future__ import annotations

import io
import random
import re
import tarfile
from collections.abc import Callable
from typing import Literal

import pytest

from ocivendir.fs.limits import MAX_HEADER, MAX_HEADER_CHAIN, MAX_PAX_RECORDS
from ocivendir.fs.tarread import BLOCK, TarFormatError, TarReader
from tests.support.builders import base256, padded, pax_header, pax_record, raw_header

END = bytes(2 * BLOCK)
TYPES = (tarfile.REGTYPE, tarfile.DIRTYPE, tarfile.SYMTYPE, tarfile.LNKTYPE, tarfile.FIFOTYPE, tarfile.CHRTYPE,
         tarfile.BLKTYPE, tarfile.CONTTYPE)  # fmt: skip
NAMES = ("a.txt", "dir/b.yml", "ünï/cödé ✓.txt", "x" * 99, "deep/" * 30 + "f", "y" * 180, "z/" * 60 + "long" * 40,
         "with space/and\ttab", "trailing/", "./dot/./x", "\udcff\udcfebinary", "链接/文件")  # fmt: skip


class Trickle:
    """A stream that hands out its bytes in small random pieces, as a pipe or a decompressor may."""

    def __init__(self, data: bytes, rng: random.Random) -> None:
        self.data, self.at, self.rng = data, 0, rng

    def read(self, size: int = -1) -> bytes:
        size = len(self.data) if size < 0 else size
        piece = self.data[self.at : self.at + min(size, self.rng.randint(1, 3000))]
        self.at += len(piece)
        return piece


def through_tarfile(data: bytes) -> list[tuple[object, ...]]:
    found: list[tuple[object, ...]] = []
    with tarfile.open(fileobj=io.BytesIO(data), mode="r|") as archive:
        for info in archive:
            handle = archive.extractfile(info) if info.isreg() else None
            found.append((info.name, info.linkname, info.type, info.mode, info.size, info.mtime,
                          handle.read() if handle else b""))  # fmt: skip
    return found


def through_reader(stream: object, *, views: bool = False) -> list[tuple[object, ...]]:
    """What the reader finds; with `views`, the data read as views of its buffer (as extraction reads it)."""
    reader = TarReader(stream)  # type: ignore[arg-type]
    found: list[tuple[object, ...]] = []
    for member in reader:
        read = (lambda: bytes(reader.view(700))) if views else reader.read
        data = b"".join(iter(read, b"")) if member.isreg() else b""
        found.append((member.name, member.linkname, member.type, member.mode, member.size, member.mtime, data))
    return found


def generated(seed: int) -> bytes:
    """A random archive tarfile writes: any format, every member type, long and odd names, sizes around blocks."""
    rng = random.Random(seed)  # noqa: S311 - reproducible archives, not secrets
    fmt: Literal[0, 1, 2] = rng.choice((tarfile.USTAR_FORMAT, tarfile.GNU_FORMAT, tarfile.PAX_FORMAT))
    buffer = io.BytesIO()
    headers = {"comment": f"global {seed}"} if fmt == tarfile.PAX_FORMAT and rng.random() < 0.5 else {}
    with tarfile.open(fileobj=buffer, mode="w", format=fmt, pax_headers=headers) as archive:
        for index in range(rng.randint(0, 12)):
            info = tarfile.TarInfo(f"{index}-{rng.choice(NAMES)}")
            info.type = rng.choice(TYPES)
            info.mode = rng.choice((0o644, 0o755, 0o600, 0o4755, 0o1777))
            info.mtime = rng.choice((0, 1_700_000_000, 8**11 + 5, 1.5)) if fmt != tarfile.USTAR_FORMAT else 12345
            if info.type in (tarfile.SYMTYPE, tarfile.LNKTYPE):
                info.linkname = rng.choice(NAMES)
            data = rng.randbytes(rng.choice((0, 1, 511, 512, 513, 5000, (1 << 20) + 17)))
            if info.type in (tarfile.REGTYPE, tarfile.CONTTYPE):
                info.size = len(data)
            try:
                info.tobuf(fmt, "utf-8", "surrogateescape")
            except ValueError:
                continue  # a name or link ustar cannot hold (addfile would leave half a member)
            archive.addfile(info, io.BytesIO(data) if info.size else None)
    return buffer.getvalue() + (rng.randbytes(rng.randint(1, 700)) if rng.random() < 0.3 else b"")


def outcome(read: Callable[[], list[tuple[object, ...]]]) -> list[tuple[object, ...]] | str:
    try:
        return read()
    except (tarfile.TarError, TarFormatError):
        return "error"


@pytest.mark.parametrize("seed", range(80))
def test_generated_archives_read_as_tarfile_reads_them(seed: int) -> None:
    data = generated(seed)
    expected = outcome(lambda: through_tarfile(data))
    assert outcome(lambda: through_reader(io.BytesIO(data))) == expected
    assert outcome(lambda: through_reader(Trickle(data, random.Random(seed)))) == expected  # noqa: S311
    assert outcome(lambda: through_reader(Trickle(data, random.Random(seed)), views=True)) == expected  # noqa: S311


def test_an_empty_archive_has_no_members_and_an_empty_stream_is_not_an_archive() -> None:
    assert through_reader(io.BytesIO(tarfile_bytes([]))) == through_tarfile(tarfile_bytes([])) == []
    assert through_reader(io.BytesIO(bytes(BLOCK))) == []  # one block of zeros then the end of the stream
    with pytest.raises(TarFormatError, match="empty file"):
        through_reader(io.BytesIO(b""))


def tarfile_bytes(members: list[tuple[tarfile.TarInfo, bytes]], fmt: int = tarfile.GNU_FORMAT) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=fmt) as archive:
        for info, data in members:
            archive.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def test_base256_numbers_and_v7_directories_read_as_tarfile_reads_them() -> None:
    data = (raw_header("big", size=3, patch={124: base256(3), 136: base256(-86400), 100: base256(0o640, 8)})
            + padded(b"abc")
            + raw_header("v7dir/", kind=b"\0", patch={257: bytes(8)})  # no magic: a v7 header, a file named 'x/'
            + raw_header("file-after", size=2, patch={257: b"ustar  \0"}) + padded(b"hi") + END)  # fmt: skip
    expected = through_tarfile(data)
    assert [(m[0], m[2], m[4], m[5]) for m in expected] == [("big", b"0", 3, -86400), ("v7dir", b"5", 0, 0),
                                                            ("file-after", b"0", 2, 0)]  # fmt: skip
    assert through_reader(io.BytesIO(data)) == expected


def test_a_checksum_computed_with_signed_bytes_is_accepted_as_tarfile_accepts_it() -> None:
    block = bytearray(raw_header("caf\xe9.txt".encode("latin-1").decode("utf-8", "surrogateescape"), size=1))
    signed = sum(b - 256 if b > 127 else b for b in block[:148] + block[156:]) + 256
    block[148:156] = b"%06o\0 " % signed
    data = bytes(block) + padded(b"x") + END
    assert through_reader(io.BytesIO(data)) == through_tarfile(data)
    assert len(through_reader(io.BytesIO(data))) == 1


def test_pax_and_gnu_long_names_apply_in_tarfiles_order() -> None:
    long_name = ("L" * 150).encode()
    data = (raw_header("././@LongLink", kind=b"L", size=len(long_name) + 1) + padded(long_name + b"\0")
            + pax_header(pax_record("path", "from-pax") + pax_record("mtime", "7.25") + pax_record("size", "4"))
            + raw_header("short", size=0) + padded(b"data")
            + pax_header(pax_record("path", "global/") + pax_record("comment", "c"), kind=b"g")
            + raw_header("hidden-by-global") + END)  # fmt: skip
    expected = through_tarfile(data)
    assert [(m[0], m[4], m[5], m[6]) for m in expected] == [("L" * 150, 4, 7.25, b"data"), ("global", 0, 0, b"")]
    assert through_reader(io.BytesIO(data)) == expected


def test_a_pax_size_decides_where_the_data_ends_so_a_header_inside_it_is_only_data() -> None:
    smuggled = raw_header("../../etc/evil", size=4) + padded(b"evil")
    data = pax_header(pax_record("size", str(len(smuggled)))) + raw_header("carrier", size=0) + smuggled + END
    members = through_reader(io.BytesIO(data))
    assert [(m[0], m[6]) for m in members] == [("carrier", smuggled)]
    assert members == through_tarfile(data)


def test_a_nul_in_a_header_name_ends_it_as_tarfile_ends_it() -> None:
    data = raw_header("safe", size=1, patch={0: b"safe\0/../../../escape"}) + padded(b"x") + END
    assert [m[0] for m in through_reader(io.BytesIO(data))] == ["safe"] == [m[0] for m in through_tarfile(data)]


HOSTILE = {
    "bad checksum after a member": (
        raw_header("ok", size=1) + padded(b"x") + raw_header("../evil")[:148] + b"0000000\0" + bytes(356),
        "bad checksum in the header at byte 1024",
    ),
    "data past the end of the stream": (raw_header("big", size=5000) + b"x" * 3000, "unexpected end of data"),
    "padding past the end of the stream": (raw_header("f", size=3) + b"abc", "unexpected end of data"),
    "truncated header": (raw_header("f", size=0) + raw_header("g")[:300], "truncated header at byte 512"),
    "negative base-256 size": (raw_header("neg", patch={124: base256(-1024)}) + END, "negative size -1024"),
    "not octal": (raw_header("x", patch={124: b"0000000001a\0"}) + END, "not octal"),
    "zeros then a header": (bytes(BLOCK) + raw_header("hidden") + END, "a block of zeros not followed by another"),
    "pax size that is not decimal": (pax_header(pax_record("size", "0x10")) + raw_header("f") + END,
                                     "invalid pax size '0x10'"),
    "negative pax size": (pax_header(pax_record("size", "-1")) + raw_header("f") + END, "invalid pax size '-1'"),
    "pax path with a NUL": (pax_header(pax_record("path", "ok\0/../../x")) + raw_header("f") + END,
                            "invalid pax path with a NUL byte"),
    "pax size of 5,000 digits": (pax_header(pax_record("size", "1" * 5000)) + raw_header("f") + END,
                                 "invalid pax size '1111"),
    "pax mtime of 5,000 digits": (pax_header(pax_record("mtime", "1" * 5000)) + raw_header("f") + END,
                                  "invalid pax mtime '1111"),
    "pax mtime with an empty fraction": (pax_header(pax_record("mtime", "1.")) + raw_header("f") + END,
                                         "invalid pax mtime '1.'"),
    "pax mtime as a float word": (pax_header(pax_record("mtime", "nan")) + raw_header("f") + END, "invalid pax mtime"),
    "pax length past the header": (pax_header(b"99 path=x\n") + raw_header("f") + END, "length 99 does not end"),
    "pax length short of the newline": (pax_header(b"8 path=abc\n") + raw_header("f") + END, "length 8 does not end"),
    "pax length zero": (pax_header(b"0 path=x\n") + raw_header("f") + END, "length 0 does not end"),
    "pax record without a length": (pax_header(b"path=x\n") + raw_header("f") + END, "no length"),
    "pax length of 25 digits": (pax_header(b"0" * 24 + b"9 a=b\n") + raw_header("f") + END, "no length"),
    "pax record without a keyword": (pax_header(b"6 =ab\n") + raw_header("f") + END, "no keyword"),
    "pax record without =": (pax_header(b"6 abc\n") + raw_header("f") + END, "no keyword"),
    "global size": (pax_header(pax_record("size", "1"), kind=b"g") + raw_header("f") + END,
                    "a global pax header may not set a size"),
    "the end after an extended header": (pax_header(pax_record("path", "p")) + END,
                                         "the archive ends after an extended header"),
    "an extended header with a negative size": (raw_header("././@LongLink", kind=b"L", patch={124: base256(-5)}),
                                                "extended header of -5 B"),
    "mtime past any file system": (raw_header("f", patch={136: base256(1 << 80)}) + END, "out of range"),
}  # fmt: skip


@pytest.mark.parametrize(("data", "message"), HOSTILE.values(), ids=HOSTILE.keys())
def test_a_hostile_archive_is_a_clear_error(data: bytes, message: str) -> None:
    with pytest.raises(TarFormatError, match=re.escape(message)):
        through_reader(io.BytesIO(data))


class Counting(io.BytesIO):
    """A stream that counts the bytes it hands out."""

    given = 0

    def read(self, size: int | None = -1) -> bytes:
        chunk = super().read(size)
        self.given += len(chunk)
        return chunk


def test_an_oversized_extended_header_is_refused_before_its_content_is_read() -> None:
    stream = Counting(raw_header("././@LongLink", kind=b"L", size=MAX_HEADER + 1) + bytes(4 * MAX_HEADER))
    with pytest.raises(TarFormatError, match=re.escape("extended header of 1.0 MiB (at most 1 MiB)")):
        through_reader(stream)
    assert stream.given <= 1 << 20  # one buffered read (the header block and what came with it), not the content


def test_a_chain_of_extended_headers_is_bounded_without_recursion() -> None:
    link = raw_header("././@LongLink", kind=b"L", size=2) + padded(b"n\0")
    assert [m[0] for m in through_reader(io.BytesIO(link * MAX_HEADER_CHAIN + raw_header("f") + END))] == ["n"]
    for count in (MAX_HEADER_CHAIN + 1, 100_000):
        with pytest.raises(TarFormatError, match=f"more than {MAX_HEADER_CHAIN} extended headers in a row"):
            through_reader(io.BytesIO(link * count + raw_header("f") + END))


def test_a_pax_header_of_many_tiny_records_is_refused_before_it_costs_a_parse_step_each() -> None:
    records = pax_record("a", "b") * MAX_PAX_RECORDS
    assert [m[0] for m in through_reader(io.BytesIO(pax_header(records) + raw_header("f") + END))] == ["f"]
    with pytest.raises(TarFormatError, match=f"more than {MAX_PAX_RECORDS} pax records for one member"):
        through_reader(io.BytesIO(pax_header(records + pax_record("a", "b")) + raw_header("f") + END))


def test_the_pax_records_one_member_comes_with_are_bounded() -> None:
    """Per-member and global records share one budget per member.

    A 1 MiB pax header of five-byte records (`5 x=\\n`) compresses to about a KiB and held 209,715 records: half a
    second of CPU to read, per header, 16 headers per member.
    """
    tiny = b"5 x=\n"
    fits = pax_header(tiny * (MAX_PAX_RECORDS - 1)) + pax_header(pax_record("path", "p")) + raw_header("f") + END
    assert [m[0] for m in through_reader(io.BytesIO(fits))] == ["p"]
    over = MAX_PAX_RECORDS // 2 + 1
    for data in (pax_header(tiny * ((1 << 20) // len(tiny))) + raw_header("f") + END,
                 pax_header(tiny * over, kind=b"g") + pax_header(tiny * over) + raw_header("f") + END):  # fmt: skip
        with pytest.raises(TarFormatError, match=f"more than {MAX_PAX_RECORDS} pax records for one member"):
            through_reader(io.BytesIO(data))
    again = pax_header(tiny * over, kind=b"g") + raw_header("f") + pax_header(tiny * over) + raw_header("g") + END
    assert [m[0] for m in through_reader(io.BytesIO(again))] == ["f", "g"]  # a global header is counted once


def test_each_member_tells_the_bytes_of_its_extended_headers() -> None:
    record = pax_record("path", "p" * 300)
    data = (pax_header(record) + raw_header("f") + raw_header("g")
            + raw_header("././@LongLink", kind=b"L", size=200) + padded(b"n" * 200) + raw_header("h") + END)  # fmt: skip
    found = [(m.name, m.header_bytes) for m in TarReader(io.BytesIO(data))]
    assert found == [("p" * 300, len(record)), ("g", 0), ("n" * 200, 200)]


def test_a_sparse_member_is_reported_with_its_declared_size_and_nothing_after_it_is_read() -> None:
    data = pax_header(pax_record("GNU.sparse.realsize", "20000000000")) + raw_header("hole", size=0) + END
    reader = TarReader(io.BytesIO(data))
    member = reader.next()
    assert member is not None
    assert (member.name, member.sparse, member.size) == ("hole", True, 20_000_000_000)
    with pytest.raises(TarFormatError, match="cannot read past the sparse entry 'hole'"):
        reader.next()


def test_unread_data_is_skipped_and_a_member_reads_no_further_than_its_size() -> None:
    data = (raw_header("a", size=700) + padded(b"a" * 700) + raw_header("b", size=3) + padded(b"bcd")
            + raw_header("c") + END)  # fmt: skip
    reader = TarReader(io.BytesIO(data))
    assert [m.name for m in reader] == ["a", "b", "c"]
    reader = TarReader(io.BytesIO(data))
    reader.next()
    reader.next()
    assert (reader.read(100), reader.read(100)) == (b"bcd", b"")
