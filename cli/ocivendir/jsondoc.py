"""Owns: decoding a JSON document someone else wrote (a registry's answer, a config file, a cache record).

It is `json.loads`, with one difference: a document nested past the interpreter's stack is a JSONDecodeError
("Nested too deeply"), where `json.loads` raises RecursionError, which no reader of registry answers expects (Go's
encoding/json stops at 10,000 levels). `object_pairs_hook` is json's own, for a reader that must see every key
(`oci/gokeys.py` remembers repeated ones); so are the number and constant hooks, for a reader that decodes as Go does
(`registry/ggcrtext.py`). Writing JSON stays with `json.dumps`.
"""

from __future__ import annotations

import json

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = ["first_value", "go_loads", "loads"]


def loads(
    data: str | bytes | bytearray,
    *,
    object_pairs_hook: Callable[[list[tuple[str, object]]], object] | None = None,
    parse_number: Callable[[str], object] | None = None,
    parse_constant: Callable[[str], object] | None = None,
) -> object:
    """`json.loads(data)`: the same value, or the same exception with the same message; too deep is invalid JSON.

    `parse_number` reads every number (json's `parse_int` and `parse_float` both); `parse_constant` is json's.
    """
    try:
        return json.loads(data, object_pairs_hook=object_pairs_hook, parse_int=parse_number, parse_float=parse_number,
                          parse_constant=parse_constant)  # fmt: skip
    except RecursionError:
        text = data if isinstance(data, str) else data.decode(json.detect_encoding(data), "surrogatepass")
        start = len(text) - len(text.lstrip(" \t\n\r"))  # where the document starts, as json's errors count
        raise json.JSONDecodeError("Nested too deeply", text, start) from None


def _constant(name: str) -> object:
    raise ValueError(f"{name} is not JSON")


def go_loads(data: bytes, *, object_pairs_hook: Callable[[list[tuple[str, object]]], object] | None = None) -> object:
    """`loads` of a document Go's encoding/json must read as well: UTF-8 only, nothing JSON does not define.

    json.loads guesses UTF-16 and UTF-32, skips a UTF-8 byte-order mark and reads NaN and Infinity; Go refuses them
    all. Bytes that are not UTF-8 inside a string are a refusal here, where Go would replace them: either way, no
    document means one thing to Go and another here.
    """
    return loads(data.decode("utf-8"), object_pairs_hook=object_pairs_hook, parse_constant=_constant)


def first_value(text: str) -> object:
    """The first JSON value of `text` (whitespace before it skipped), what follows it ignored: Go's json.Decoder.Decode.

    ValueError when it does not start with one.
    """
    stripped = text.lstrip(" \t\n\r")
    try:
        return json.JSONDecoder().raw_decode(stripped)[0]
    except RecursionError:
        raise json.JSONDecodeError("Nested too deeply", stripped, 0) from None
