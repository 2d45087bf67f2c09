"""Owns: reading a tar stream, headers in and members out, as Python's `tarfile` reads an image layer.

ustar, POSIX pax (`x` per member, `g` global), GNU long names and link names (`L`, `K`), old-GNU and v7 headers, octal
and base-256 numbers: each member comes out with the name, link name, type, mode, size and mtime `tarfile` would give
it, and its data is read through the reader. `tarfile` itself costs a warm sync its import (shutil, bz2, lzma, copy,
struct, re…); this reader needs only what the interpreter has already loaded.

It is a security boundary, so it is stricter than `tarfile` wherever `tarfile` is lenient (as Go's archive/tar is, which
vendir and imgpkg use): a header with a bad checksum or a truncated one is an error wherever it is (`tarfile` stops
quietly after the first member); a block of zeros ends the archive only if a second one or the end of the stream
follows; a member's data or padding that runs past the end of the stream is an error; negative sizes, pax records that
are not framed exactly (`<length> <keyword>=<value>\\n`), pax sizes and times that are not plain decimal numbers, a NUL
in a pax path, a global header setting a size, and an mtime no file system can hold are refused. Extended headers are
bounded in size (MAX_HEADER, refused before they are read), in how many may precede one member (MAX_HEADER_CHAIN) and in
how many pax records they may hold for it (MAX_PAX_RECORDS: reading a record costs far more than inflating its five
bytes); they are read in a loop, never by recursion, and each member tells how many bytes of them it came with
(`header_bytes`), for the image's expansion limit. A sparse member is reported as sparse (with the size it declares),
never expanded.
"""

from __future__ import annotations

from ocivendir.fs.limits import MAX_HEADER, MAX_HEADER_CHAIN, MAX_PAX_RECORDS, human

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterator
    from typing import Protocol

    class Readable(Protocol):
        """Anything with `read(n)`: a cached blob's verifying reader, a decompressor, a download's pipe."""

        def read(self, size: int = -1, /) -> bytes:
            """Up to `size` bytes; b"" at the end."""


__all__ = ["Member", "TarFormatError", "TarReader"]

BLOCK = 512
_ZEROS = bytes(BLOCK)
_CHUNK = 1 << 20
_REGULAR = frozenset({b"0", b"\0", b"7", b"S"})  # tarfile's REGULAR_TYPES (contiguous files and GNU sparse included)
_KNOWN = frozenset({*_REGULAR, b"1", b"2", b"3", b"4", b"5", b"6", b"L", b"K"})  # tarfile's SUPPORTED_TYPES
_EXTENDED = frozenset({b"L", b"K", b"x", b"g", b"X"})  # GNU long name/link, pax per member, pax global, Solaris pax
_MAX_MTIME = 1 << 40  # seconds either side of 1970: more than any file system stores, less than os.utime refuses
_HIGH = bytes(range(128, 256))
_NEGATIVE = 0xFF  # the first byte of a negative base-256 number (0x80: a positive one)
_NEWLINE = 0x0A
_SHORTEST = 5  # bytes in the shortest pax record, `5 x=\n`
_MAX_DIGITS = 20  # a pax size or whole mtime longer than this is nonsense (2**64 has 20 digits); int() refuses 4,300+
_SPARSE = ("GNU.sparse.map", "GNU.sparse.size", "GNU.sparse.realsize", "GNU.sparse.major", "GNU.sparse.minor",
           "GNU.sparse.name", "GNU.sparse.offset", "GNU.sparse.numbytes")  # fmt: skip
_KEYWORDS = frozenset({"path", "linkpath", "size", "mtime", *_SPARSE})  # the pax records kept; the rest say nothing


class TarFormatError(Exception):
    """The stream is not a tar archive, or a corrupt, truncated or hostile one."""


class Member:
    """One member: `type` is the tar type byte (`b"0"` file, `b"5"` directory, `b"2"` symlink…)."""

    __slots__ = ("header_bytes", "linkname", "mode", "mtime", "name", "size", "sparse", "type")

    mtime: float  # an int from a header, an int or a float from a pax record

    def __init__(self, name: str, linkname: str, kind: bytes, mode: int, size: int, mtime: float) -> None:
        """A member as its header describes it, before any extended header is applied."""
        self.name = name
        self.linkname = linkname
        self.type = kind
        self.mode = mode
        self.size = size
        self.mtime = mtime
        self.sparse = kind == b"S"
        self.header_bytes = 0  # bytes of the extended headers before it

    def isdir(self) -> bool:
        """A directory."""
        return self.type == b"5"

    def isreg(self) -> bool:
        """A regular file (tarfile's rule: contiguous and sparse files are regular too)."""
        return self.type in _REGULAR

    def has_data(self) -> bool:
        """Whether data blocks follow the header (tarfile: regular files and types it does not know)."""
        return self.type in _REGULAR or self.type not in _KNOWN

    def __repr__(self) -> str:
        """`Member('name', b'0', 12 bytes)`."""
        return f"Member({self.name!r}, {self.type!r}, {self.size} bytes)"


def _text(field: bytes) -> str:
    """A NUL-terminated header string, decoded as tarfile decodes names (UTF-8, undecodable bytes kept)."""
    return field.partition(b"\0")[0].decode("utf-8", "surrogateescape")


def _number(field: bytes) -> int:
    """An octal number (NUL- or space-terminated) or a GNU base-256 one (first byte 0x80 positive, 0xff negative)."""
    if field[0] in (0x80, _NEGATIVE):
        value = int.from_bytes(field[1:], "big")
        return value - (1 << 8 * (len(field) - 1)) if field[0] == _NEGATIVE else value
    digits = field.partition(b"\0")[0].strip()
    if digits.translate(None, b"01234567"):
        raise TarFormatError("invalid header (a number field that is not octal)")
    return int(digits, 8) if digits else 0


def _checksum_ok(block: bytes) -> bool:
    """The header checksum, computed with unsigned or (as some old tars did) signed bytes, as tarfile accepts both."""
    stored = _number(block[148:156])
    unsigned = sum(block) - sum(block[148:156]) + 8 * 32
    if stored == unsigned:
        return True
    high = BLOCK - len(block.translate(None, _HIGH)) - (8 - len(block[148:156].translate(None, _HIGH)))
    return stored == unsigned - 256 * high


def _decimal(text: str) -> bool:
    """Plain ASCII digits, at most _MAX_DIGITS of them."""
    return 0 < len(text) <= _MAX_DIGITS and text.isascii() and text.isdigit()


def _mtime(text: str) -> float:
    """A pax time: decimal seconds with an optional fraction (Go's archive/tar format); anything else is refused."""
    whole, dot, fraction = text.removeprefix("-").partition(".")
    if not _decimal(whole) or (dot and not (fraction.isascii() and fraction.isdigit())):
        raise TarFormatError(f"invalid pax mtime {text[:40]!r}")
    return float(text) if dot else int(text)


def _pax_records(data: bytes, allowed: int) -> tuple[dict[str, str], int]:
    """`<length> <keyword>=<value>\\n` records, framed exactly as Python 3.13's tarfile requires; NUL padding ends.

    Only the keywords that say something about a member's path, link, size, time or sparseness are kept; with them
    comes the number of records read, at most `allowed`.
    """
    records: dict[str, str] = {}
    position, end, count = 0, len(data), 0
    while position < end and data[position]:
        count += 1
        if count > allowed:
            raise TarFormatError(f"more than {MAX_PAX_RECORDS} pax records for one member")
        space = data.find(b" ", position, position + 21)
        digits = data[position:space] if space > position else b"x"
        if digits.translate(None, b"0123456789"):
            raise TarFormatError("invalid pax record (no length)")
        length = int(digits)
        last = position + length - 1
        if length < _SHORTEST or last >= end or data[last] != _NEWLINE:
            raise TarFormatError(f"invalid pax record (length {length} does not end at a newline)")
        keyword, equals, value = data[space + 1 : last].partition(b"=")
        if not keyword or not equals:
            raise TarFormatError("invalid pax record (no keyword)")
        name = keyword.decode("utf-8", "surrogateescape")
        if name in _KEYWORDS:
            records[name] = value.decode("utf-8", "surrogateescape")
        position = last + 1
    return records, count


def _header(block: bytes) -> Member:
    """The member a (checksummed) header block describes, as tarfile's `TarInfo.frombuf` reads it."""
    name, kind, prefix = _text(block[0:100]), block[156:157], _text(block[345:500])
    for owner in (block[108:116], block[116:124]):
        _number(owner)  # uid, gid: never used, but numbers, as tarfile requires
    size = _number(block[124:136])
    member = Member(name, _text(block[157:257]), kind, _number(block[100:108]), size, _number(block[136:148]))
    if kind == b"\0" and name.endswith("/"):  # v7: a directory is a file whose name ends in a slash
        member.type = b"5"
    if member.sparse:
        member.size = _number(block[483:495])  # the size the old-GNU sparse header declares; its data is never read
    elif size < 0:
        raise TarFormatError(f"invalid header (negative size {size} for '{name}')")
    if member.isdir():
        member.name = member.name.rstrip("/")
    if prefix and kind not in (b"L", b"K", b"S"):
        member.name = prefix + "/" + member.name
    return member


def _apply_pax(member: Member, records: dict[str, str]) -> None:
    """What pax records say about a member (tarfile's `_apply_pax_info`, stricter about numbers and NULs)."""
    for keyword, value in records.items():
        if keyword in ("path", "linkpath", "GNU.sparse.name") and "\0" in value:
            raise TarFormatError(f"invalid pax {keyword} with a NUL byte: {value[:80]!r}")
        if keyword == "path":
            member.name = value.rstrip("/")
        elif keyword == "GNU.sparse.name":
            member.name = value
        elif keyword == "linkpath":
            member.linkname = value
        elif keyword in ("size", "GNU.sparse.size", "GNU.sparse.realsize"):
            if not _decimal(value):
                raise TarFormatError(f"invalid pax {keyword} {value[:40]!r}")
            member.size = int(value)
        elif keyword == "mtime":
            member.mtime = _mtime(value)
        if keyword in _SPARSE:
            member.sparse = True


class TarReader:
    """Members of a tar stream, one at a time; `read` gives the current member's data, `next` skips what is left."""

    def __init__(self, stream: Readable) -> None:
        """Read from `stream` (anything with `read(n)`; short reads are fine)."""
        self._stream = stream
        self._buffer = b""
        self._at = 0  # consumed bytes of _buffer
        self._offset = 0  # bytes of the archive consumed, for messages
        self._left = 0  # data bytes of the current member not read yet
        self._padding = 0  # bytes after them up to the next block
        self._globals: dict[str, str] = {}
        self._records_left = MAX_PAX_RECORDS  # pax records the member being read may still come with
        self._header_bytes = 0  # bytes of its extended headers so far
        self._ended = False
        self._sparse = ""  # the sparse member returned, whose data layout is never read: nothing after it is
        self.members = 0  # members returned so far

    def __iter__(self) -> Iterator[Member]:
        """Every member, in order."""
        while (member := self.next()) is not None:
            yield member

    def _take(self, size: int) -> bytes:
        """The next `size` bytes of the stream, or fewer at its end."""
        start = self._at
        if start + size <= len(self._buffer):
            self._at = start + size
            self._offset += size
            return self._buffer[start : self._at]
        parts = [self._buffer[start:]]
        have = len(parts[0])
        self._buffer, self._at = b"", 0
        while have < size:
            more = self._stream.read(max(_CHUNK, size - have))
            if not more:
                break
            if len(more) > size - have:
                self._buffer, self._at = more, size - have
                more = more[: size - have]
            parts.append(more)
            have += len(more)
        self._offset += have
        return b"".join(parts)

    def _skip(self, size: int) -> None:
        """Consume `size` bytes that must be there (data nobody read, padding)."""
        while size > 0:
            got = len(self._take(min(size, _CHUNK)))
            if not got:
                raise TarFormatError(f"unexpected end of data at byte {self._offset}")
            size -= got

    def read(self, size: int = _CHUNK) -> bytes:
        """Up to `size` bytes of the current member's data, b"" once it is all read; a short stream is an error."""
        return bytes(self.view(size))

    def view(self, size: int = _CHUNK) -> memoryview:
        """`read`, without copying: a view of the bytes read from the stream (they are never changed)."""
        size = min(size, self._left)
        if size <= 0:
            return memoryview(b"")
        if self._at >= len(self._buffer):
            self._buffer, self._at = self._stream.read(max(size, _CHUNK)), 0
            if not self._buffer:
                raise TarFormatError(f"unexpected end of data at byte {self._offset} ({self._left} bytes missing)")
        size = min(size, len(self._buffer) - self._at)
        chunk = memoryview(self._buffer)[self._at : self._at + size]
        self._at += size
        self._offset += size
        self._left -= size
        return chunk

    def _block(self) -> bytes | None:
        """The next header block (checksum checked), or None where the archive ends."""
        block = self._take(BLOCK)
        if len(block) < BLOCK:
            if not block and self._offset:
                return None  # the end of the stream at a block boundary: an archive without its end marker
            raise TarFormatError("empty file" if not block else f"truncated header at byte {self._offset - len(block)}")
        if block == _ZEROS:
            after = self._take(BLOCK)
            if after not in (b"", _ZEROS):
                raise TarFormatError(f"a block of zeros not followed by another at byte {self._offset - BLOCK}")
            return None
        if not _checksum_ok(block):
            raise TarFormatError(f"bad checksum in the header at byte {self._offset - BLOCK}")
        return block

    def _extended(self, kind: bytes, block: bytes) -> tuple[bytes, object]:
        """One extended header's content: a long name or link name, or the pax records (a global one applied)."""
        size = _number(block[124:136])
        if size > MAX_HEADER or size < 0:
            raise TarFormatError(f"extended header of {human(size)} (at most {human(MAX_HEADER)})")
        data = self._take(size)
        if len(data) < size:
            raise TarFormatError(f"unexpected end of data in an extended header at byte {self._offset}")
        self._skip(-size % BLOCK)
        self._header_bytes += size
        if kind in (b"L", b"K"):
            return kind, _text(data)
        records, count = _pax_records(data, self._records_left)
        self._records_left -= count
        if kind != b"g":
            return b"x", {**self._globals, **records}
        if "size" in records:
            raise TarFormatError("a global pax header may not set a size")
        self._globals.update(records)
        return kind, None

    def _chain(self) -> tuple[list[tuple[bytes, object]], bytes] | None:
        """The extended headers before the next member, in order, and the member's own header block."""
        chain: list[tuple[bytes, object]] = []
        self._records_left, self._header_bytes = MAX_PAX_RECORDS, 0
        while (block := self._block()) is not None:
            kind = block[156:157]
            if kind not in _EXTENDED:
                return chain, block
            if len(chain) >= MAX_HEADER_CHAIN:
                raise TarFormatError(f"more than {MAX_HEADER_CHAIN} extended headers in a row")
            chain.append(self._extended(kind, block))
        if chain:
            raise TarFormatError("the archive ends after an extended header")
        return None

    def next(self) -> Member | None:
        """The next member (after skipping what is left of the current one), or None at the end of the archive."""
        if self._sparse:
            raise TarFormatError(f"cannot read past the sparse entry '{self._sparse}'")
        if self._ended:
            return None
        self._skip(self._left + self._padding)
        self._left = self._padding = 0
        found = self._chain()
        if found is None:
            self._ended = True
            return None
        chain, block = found
        member = _header(block)
        member.header_bytes = self._header_bytes
        _apply_pax(member, self._globals)  # tarfile applies global records first, then the chain from the inside out
        if member.isdir():
            member.name = member.name.rstrip("/")
        for kind, value in reversed(chain):
            if kind == b"x":
                _apply_pax(member, value)  # type: ignore[arg-type]
            elif kind == b"L":
                member.name = str(value).removesuffix("/") if member.isdir() else str(value)
            elif kind == b"K":
                member.linkname = str(value)
        return self._admit(member)

    def _admit(self, member: Member) -> Member:
        """Check what extended headers may have changed, and note where the member's data ends."""
        if member.size < 0:
            raise TarFormatError(f"negative size {member.size} for '{member.name}'")
        if not -_MAX_MTIME <= member.mtime <= _MAX_MTIME:
            raise TarFormatError(f"mtime {member.mtime} of '{member.name}' is out of range")
        if member.sparse:
            self._sparse = member.name
        elif member.has_data():
            self._left, self._padding = member.size, -member.size % BLOCK
        self.members += 1
        return member
