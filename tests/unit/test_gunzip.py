"""Gzip streams read as gzip.GzipFile reads them: members in a row, zero padding, every member's CRC and length."""

from __future__ import annotations

import gzip
import io
import random
import re
import struct
import zlib

import pytest

from ocivendir.errors import UnsafeArchive
from ocivendir.fs.gunzip import GunzipReader
from ocivendir.registry import client as registry_client
from tests.unit.test_tarread import Trickle

RNG = random.Random(7)  # noqa: S311 - reproducible data, not secrets
TEXT = b"".join(RNG.choice((b"apiVersion: v1\n", b"kind: ConfigMap\n", RNG.randbytes(40))) for _ in range(40_000))


def gunzip(data: bytes, size: int = 1 << 20, *, trickle: bool = False) -> bytes:
    stream = Trickle(data, random.Random(len(data))) if trickle else io.BytesIO(data)  # noqa: S311
    reader = GunzipReader(stream, "layer")
    return b"".join(iter(lambda: reader.read(size), b""))


def with_header_fields(payload: bytes) -> bytes:
    """A gzip member with FEXTRA, FNAME, FCOMMENT and FHCRC set (what GzipFile skips, and zlib checks)."""
    header = b"\x1f\x8b\x08\x1e" + struct.pack("<I", 0) + b"\x00\xff"
    header += struct.pack("<H", 4) + b"ab\x00\x00" + b"name.tar\x00" + b"a comment\x00"
    header += struct.pack("<H", zlib.crc32(header) & 0xFFFF)
    deflate = zlib.compressobj(6, zlib.DEFLATED, -zlib.MAX_WBITS)
    body = deflate.compress(payload) + deflate.flush()
    return header + body + struct.pack("<II", zlib.crc32(payload), len(payload) & 0xFFFFFFFF)


CASES = {
    "one member": gzip.compress(TEXT, mtime=0),
    "empty member": gzip.compress(b"", mtime=0),
    "three members": gzip.compress(TEXT[:1000]) + gzip.compress(b"") + gzip.compress(TEXT, compresslevel=1),
    "zeros between and after members": gzip.compress(b"one") + bytes(3000) + gzip.compress(b"two") + bytes(700),
    "header fields": with_header_fields(TEXT[:5000]),
    "incompressible": gzip.compress(RNG.randbytes(3 << 20), compresslevel=1),
}


@pytest.mark.parametrize("data", CASES.values(), ids=CASES.keys())
@pytest.mark.parametrize("size", [777, 1 << 20])
def test_gzip_streams_read_as_gzipfile_reads_them(data: bytes, size: int) -> None:
    expected = gzip.GzipFile(fileobj=io.BytesIO(data)).read()
    assert gunzip(data, size) == expected
    assert gunzip(data, trickle=True) == expected


def test_no_read_returns_more_than_asked_so_a_bomb_never_lands_in_memory_at_once() -> None:
    bomb = gzip.compress(bytes(16 << 20), compresslevel=9)
    reader = GunzipReader(io.BytesIO(bomb), "layer")
    sizes = {len(reader.read(4096)) for _ in range(50)}
    assert sizes == {4096}
    assert len(bomb) < 128 << 10


def corrupt_trailer(data: bytes, offset: int) -> bytes:
    changed = bytearray(data)
    changed[len(data) - 8 + offset] ^= 0x01
    return bytes(changed)


def corrupt_header_crc(data: bytes) -> bytes:
    changed = bytearray(data)
    changed[35] ^= 0x01  # 10 fixed bytes, FEXTRA (2 + 4), FNAME (9), FCOMMENT (10), then the header CRC
    return bytes(changed)


ONE = gzip.compress(TEXT[:20_000], mtime=0)
BROKEN = {
    "crc": (corrupt_trailer(ONE, 0), "incorrect data check"),
    "length": (corrupt_trailer(ONE, 4), "incorrect length check"),
    "crc of a second member": (ONE + corrupt_trailer(ONE, 1), "incorrect data check"),
    "cut inside the data": (ONE[: len(ONE) // 2], "ends before the end of a member (truncated)"),
    "cut inside the trailer": (ONE[:-3], "ends before the end of a member (truncated)"),
    "cut inside a second member's header": (ONE + ONE[:5], "ends before the end of a member (truncated)"),
    "garbage after a member": (ONE + b"PK\x03\x04 not gzip" + bytes(100), "incorrect header check"),
    "header crc": (corrupt_header_crc(with_header_fields(b"x")), "header crc mismatch"),
}


@pytest.mark.parametrize(("data", "message"), BROKEN.values(), ids=BROKEN.keys())
def test_a_corrupt_or_truncated_gzip_stream_is_a_clear_error(data: bytes, message: str) -> None:
    with pytest.raises(UnsafeArchive, match=re.escape("layer: corrupt gzip stream: ") + f".*{re.escape(message)}"):
        gunzip(data)


def test_compressed_input_is_read_a_download_chunk_at_a_time() -> None:
    """The tee's pipe then hands each downloaded chunk to zlib whole: no slice of it is copied on the way."""
    asked: list[int] = []

    class Recording(io.BytesIO):
        def read(self, size: int | None = -1, /) -> bytes:
            asked.append(-1 if size is None else size)
            return super().read(size)

    data = gzip.compress(RNG.randbytes(3 << 20), compresslevel=1, mtime=0)
    reader = GunzipReader(Recording(data), "layer")
    assert len(b"".join(iter(lambda: reader.read(1 << 20), b""))) == 3 << 20
    assert set(asked) == {registry_client._CHUNK} == {512 << 10}  # the download's own chunk size
