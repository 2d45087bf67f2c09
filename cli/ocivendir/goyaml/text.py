"""Owns: turning the bytes of a YAML input into text as go-yaml v2's reader does, with its messages.

A byte-order mark picks UTF-16 (little or big endian) or UTF-8, UTF-8 being the default; invalid UTF-8 is refused
with the reader's text (`invalid leading UTF-8 octet`, `incomplete UTF-8 octet sequence`, …), and so is any
character outside YAML's printable set (`control characters are not allowed`). Binary input thus fails with one
readable line instead of a Python decoding error.
"""

from __future__ import annotations

import codecs

TYPE_CHECKING = False
if TYPE_CHECKING:
    import re

__all__ = ["TextError", "check_characters", "decode_text"]

# YAML 1.1's printable set, as go-yaml v2's reader checks it (compiling it costs ~5 ms: only for non-ASCII text)
_NON_PRINTABLE = "[^\x09\x0a\x0d\x20-\x7e\x85\xa0-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]"
_LINE_CONTROLS = dict.fromkeys((0x09, 0x0A, 0x0D))  # the only ASCII controls YAML allows
_MIN_VALUE = {2: 0x80, 3: 0x800, 4: 0x10000}


class TextError(Exception):
    """Input go-yaml's reader refuses; the text is go-yaml's problem string."""


def _width(octet: int) -> int:
    if octet & 0x80 == 0:
        return 1
    for width, mask, lead in ((2, 0xE0, 0xC0), (3, 0xF0, 0xE0), (4, 0xF8, 0xF0)):
        if octet & mask == lead:
            return width
    return 0


def _utf8_problem(data: bytes, start: int) -> str:
    """go-yaml's complaint about the UTF-8 sequence at `start` (one Python refused)."""
    width = _width(data[start])
    if width == 0:
        return "invalid leading UTF-8 octet"
    if start + width > len(data):
        return "incomplete UTF-8 octet sequence"
    value = data[start] & (0xFF >> (width + 1))
    for octet in data[start + 1 : start + width]:
        if octet & 0xC0 != 0x80:  # noqa: PLR2004 - the UTF-8 continuation pattern
            return "invalid trailing UTF-8 octet"
        value = (value << 6) | (octet & 0x3F)
    if value < _MIN_VALUE[width]:
        return "invalid length of a UTF-8 sequence"
    return "invalid Unicode character"


def _decode_utf16(data: bytes, codec: str) -> str:
    if len(data) % 2:
        raise TextError("incomplete UTF-16 character")
    try:
        return data.decode(codec)
    except UnicodeDecodeError:
        raise TextError("incomplete UTF-16 surrogate pair") from None


_compiled: list[re.Pattern[str]] = []  # the expression once compiled (functools.cache would import collections)


def _non_printable() -> re.Pattern[str]:
    if not _compiled:
        import re  # noqa: PLC0415 - only for non-ASCII text

        _compiled.append(re.compile(_NON_PRINTABLE))
    return _compiled[0]


def check_characters(text: str) -> str:
    """`text` itself when every character is printable YAML; else go-yaml's error."""
    if text.isascii():
        printable = text.translate(_LINE_CONTROLS).isprintable()  # ASCII printable: 0x20-0x7E
    else:
        printable = _non_printable().search(text) is None
    if not printable:
        raise TextError("control characters are not allowed")
    return text


def decode_text(data: bytes) -> str:
    """The text of a YAML input, decoded and checked as go-yaml v2 decodes and checks it."""
    if data.startswith(codecs.BOM_UTF16_LE):
        return check_characters(_decode_utf16(data[2:], "utf-16-le"))
    if data.startswith(codecs.BOM_UTF16_BE):
        return check_characters(_decode_utf16(data[2:], "utf-16-be"))
    if data.startswith(codecs.BOM_UTF8):
        data = data[3:]
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        check_characters(data[: exc.start].decode("utf-8"))  # the reader stops at whichever problem comes first
        raise TextError(_utf8_problem(data, exc.start)) from None
    return check_characters(text)
