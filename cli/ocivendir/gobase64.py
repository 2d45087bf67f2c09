"""Owns: Go's `base64.StdEncoding.DecodeString`, with the byte offset Go's error names.

Line breaks (CR, LF) are skipped, padding is required, nothing after it; a corrupt text raises ValueError whose
argument is the offset Go reports (`illegal base64 data at input byte N`). Used where Go decodes base64 and its message
matters: a vendir Secret's `[]byte` data (`goyaml/load.py`) and a docker config's `auth` (`registry/auth.py`).
Kept apart from the YAML reader so that the registry client, which reads docker configs, never loads a YAML parser.
"""

from __future__ import annotations

__all__ = ["go_base64"]

_BASE64 = {c: i for i, c in enumerate(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/")}
_NEWLINES = b"\r\n"
_PAD = ord("=")


def _skip_newlines(data: bytes, at: int) -> int:
    while at < len(data) and data[at] in _NEWLINES:
        at += 1
    return at


def _padding_end(data: bytes, at: int, seen: int) -> int:
    """After a `=` at `at - 1` that follows `seen` characters of a quantum: the index past the padding (Go's rules)."""
    if seen < 2:  # noqa: PLR2004 - a quantum needs two characters before its padding
        raise ValueError(at - 1)
    if seen == 2:  # noqa: PLR2004 - then "==" is expected
        at = _skip_newlines(data, at)
        if at == len(data):
            raise ValueError(len(data))
        if data[at] != _PAD:
            raise ValueError(at - 1)
        at += 1
    at = _skip_newlines(data, at)
    if at < len(data):
        raise ValueError(at)  # trailing garbage
    return at


def go_base64(data: bytes) -> bytes:
    """Go's base64.StdEncoding.Decode: newlines skipped, padding required; ValueError(byte offset) on corrupt input."""
    out, at = bytearray(), 0
    while True:
        values: list[int] = []
        while len(values) < 4:  # noqa: PLR2004 - one quantum
            if at == len(data):
                if not values:
                    return bytes(out)
                raise ValueError(at - len(values))
            byte, at = data[at], at + 1
            if byte in _BASE64:
                values.append(_BASE64[byte])
            elif byte not in _NEWLINES:
                if byte != _PAD:
                    raise ValueError(at - 1)
                at = _padding_end(data, at, len(values))
                break
        number = sum(v << (18 - 6 * i) for i, v in enumerate(values))
        out += number.to_bytes(3, "big")[: len(values) - 1]
