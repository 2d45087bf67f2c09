"""JSON reading without the `json` package: `loads` equals `json.loads` with its defaults, on the same C scanner.

`import json` compiles three regular expressions and so imports `re` (~26M instructions, more than a warm sync's own
work); the scanner `json.loads` runs is the C `_json.make_scanner`, which needs no more than the settings below. What
`json.loads` adds around it is copied here: bytes decoded with its encoding detection and `surrogatepass`, a str BOM
refused, whitespace skipped before and after the document, "Expecting value" and "Extra data" raised as the same
`json.JSONDecodeError` (the json package is imported only then, on the error path — as the C scanner does itself for its
own errors). So NaN/Infinity are accepted and a duplicated key keeps its last value, as before. One difference: a
document nested past the interpreter's stack is a JSONDecodeError ("Nested too deeply"), where `json.loads` raises
RecursionError, which no reader of registry answers expects. Where `_json` is missing, `json.loads` itself is used.
Writing JSON is cold: it stays with `json.dumps`.
"""

from __future__ import annotations

import codecs

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

_WHITESPACE = " \t\n\r"  # json.decoder.WHITESPACE: [ \t\n\r]*
_BOMS = (  # UTF-32 first: its little-endian BOM begins with UTF-16's
    (codecs.BOM_UTF32_BE, "utf-32"), (codecs.BOM_UTF32_LE, "utf-32"),
    (codecs.BOM_UTF16_BE, "utf-16"), (codecs.BOM_UTF16_LE, "utf-16"),
    (codecs.BOM_UTF8, "utf-8-sig"),
)  # fmt: skip
_CONSTANTS = {"-Infinity": float("-inf"), "Infinity": float("inf"), "NaN": float("nan")}


class _Context:
    """The attributes `_json.make_scanner` reads from a `json.JSONDecoder()` with default arguments."""

    strict = True
    object_hook = None
    object_pairs_hook = None
    parse_float = float
    parse_int = int
    parse_constant = _CONSTANTS.__getitem__


class JSONObject(dict[str, object]):
    """An object read by `loads(..., repeats=True)`: `repeated` holds the keys it had more than once."""

    __slots__ = ("repeated",)

    repeated: frozenset[str]


def _object(pairs: list[tuple[str, object]]) -> JSONObject:
    """The object_pairs_hook of `repeats=True`: a dict as json makes it (the last value wins), repeats noted."""
    made = JSONObject(pairs)
    if len(made) == len(pairs):
        made.repeated = frozenset()
    else:
        seen: set[str] = set()
        repeated: set[str] = set()
        for key, _ in pairs:
            (repeated if key in seen else seen).add(key)
        made.repeated = frozenset(repeated)
    return made


class _PairsContext(_Context):
    object_pairs_hook = staticmethod(_object)  # type: ignore[assignment]


def _scanner(context: Any) -> Callable[[str, int], tuple[object, int]] | None:  # noqa: ANN401 - a duck-typed decoder
    try:
        from _json import make_scanner  # noqa: PLC0415 - the C accelerator, absent on some interpreters
    except ImportError:  # pragma: no cover - CPython has it
        return None
    scan: Callable[[str, int], tuple[object, int]] = make_scanner(context)  # duck-typed: a JSONDecoder's attributes
    return scan


_SCAN = _scanner(_Context())
_SCAN_REPEATS = _scanner(_PairsContext())


def detect_encoding(data: bytes | bytearray) -> str:
    """The codec `json.loads` decodes `data` with (json.detect_encoding: BOMs, then the RFC 4627 null-byte pattern)."""
    for bom, codec in _BOMS:
        if data.startswith(bom):
            return codec
    if len(data) >= 4:  # noqa: PLR2004 - four bytes tell UTF-32 from UTF-16
        if not data[0]:
            return "utf-16-be" if data[1] else "utf-32-be"
        if not data[1]:
            return "utf-16-le" if data[2] or data[3] else "utf-32-le"
    elif len(data) == 2 and not (data[0] and data[1]):  # noqa: PLR2004 - two bytes can only be UTF-16
        return "utf-16-le" if data[0] else "utf-16-be"
    return "utf-8"


def _error(message: str, text: str, pos: int) -> ValueError:
    from json import JSONDecodeError  # noqa: PLC0415 - the error path only: json imports re

    return JSONDecodeError(message, text, pos)


def loads(data: str | bytes | bytearray, *, repeats: bool = False) -> object:
    """`json.loads(data)`: the same value, or the same exception with the same message.

    With `repeats`, every object is a JSONObject that says which keys it had more than once.
    """
    scan = _SCAN_REPEATS if repeats else _SCAN
    if scan is None:  # pragma: no cover - CPython has _json
        import json  # noqa: PLC0415 - only without the C scanner

        return json.loads(data, object_pairs_hook=_object if repeats else None)
    if isinstance(data, str):
        if data.startswith("\ufeff"):
            raise _error("Unexpected UTF-8 BOM (decode using utf-8-sig)", data, 0)
        text = data
    elif isinstance(data, (bytes, bytearray)):
        text = data.decode(detect_encoding(data), "surrogatepass")
    else:
        msg = f"the JSON object must be str, bytes or bytearray, not {data.__class__.__name__}"
        raise TypeError(msg)
    start = len(text) - len(text.lstrip(_WHITESPACE))
    try:
        value, end = scan(text, start)
    except StopIteration as stop:
        raise _error("Expecting value", text, stop.value) from None
    except RecursionError:  # json has no depth limit but the stack's (Go's stops at 10,000 levels): not a crash
        raise _error("Nested too deeply", text, start) from None
    if end != len(text):
        rest = text[end:].lstrip(_WHITESPACE)
        if rest:
            raise _error("Extra data", text, len(text) - len(rest))
    return value
