"""Owns: a byte-exact emitter of what sigs.k8s.io/yaml (go-yaml v2) writes.

Shared by the vendir lock and imgpkg's images.yml rewrite: natural key order, go-yaml's plain/quoted/literal
choices, folding past column 80.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Mapping, Sequence

from ocivendir.goyaml.scalars import FLOAT

__all__ = ["dump", "natural_key", "scalar"]

_BEST_WIDTH = 80
_INDENT = 2
_BOOL_NULL = frozenset({
    "y", "Y", "yes", "Yes", "YES", "n", "N", "no", "No", "NO", "true", "True", "TRUE", "false", "False", "FALSE",
    "on", "On", "ON", "off", "Off", "OFF", "null", "Null", "NULL", "~", ".inf", ".Inf", ".INF", "+.inf", "+.Inf",
    "+.INF", "-.inf", "-.Inf", "-.INF", ".nan", ".NaN", ".NAN",
})  # fmt: skip
_PRINTABLE_RANGES = ((0x0A, 0x0A), (0x20, 0x7E), (0x85, 0x85), (0xA0, 0xD7FF), (0xE000, 0xFFFD), (0x10000, 0x10FFFF))
_BOM = 0xFEFF
_HINTS = dict.fromkeys("yYnNtTfFoO~", "M") | {".": ".", "+": "S", "-": "S"} | dict.fromkeys("0123456789", "D")
_BASE60 = re.compile(r"[-+]?[0-9][0-9_]*(?::[0-5]?[0-9])+(?:\.[0-9_]*)?")
_TIMESTAMP = re.compile(
    r"(\d{4})-(\d{1,2})-(\d{1,2})"
    r"(?:(?:[Tt]| )(\d{1,2}):(\d{1,2}):(\d{1,2})(?:\.\d{1,9})?(?:Z|[-+]\d{2}:\d{2})?)?"
)
_ESCAPES = {
    "\0": "0", "\a": "a", "\b": "b", "\t": "t", "\n": "n", "\v": "v", "\f": "f", "\r": "r", "\x1b": "e",
    '"': '"', "\\": "\\", "\x85": "N", "\xa0": "_", "\u2028": "L", "\u2029": "P",
}  # fmt: skip
_DIGITS = re.compile(r"\d+|\D")


def natural_key(key: str) -> list[tuple[int, int, str]]:
    """go-yaml v2's key order: digit runs by value (shorter run first on a tie), non-letters before letters."""
    parts: list[tuple[int, int, str]] = []
    for token in _DIGITS.findall(key):
        if token.isdigit():
            parts.append((1, int(token), f"{len(token):04d}"))
        elif token.isalpha():
            parts.append((2, ord(token), ""))
        else:
            parts.append((0, ord(token), ""))
    return parts


def _go_int(text: str) -> bool:
    plain = text.replace("_", "")
    body = plain[1:] if plain[:1] in "+-" else plain
    if not body:
        return False
    lowered = body.lower()
    for prefix, digits in (("0x", "0123456789abcdef"), ("0o", "01234567"), ("0b", "01")):
        if lowered.startswith(prefix):
            rest = lowered[2:]
            return bool(rest) and all(c in digits for c in rest)
    if body.startswith("0") and len(body) > 1:
        return all(c in "01234567" for c in body)
    return body.isdigit()


def _is_timestamp(text: str) -> bool:
    match = _TIMESTAMP.fullmatch(text)
    if not match:
        return False
    try:
        dt.date(int(match.group(1)), int(match.group(2)), int(match.group(3)))
    except ValueError:
        return False
    return True


def _resolves_to_non_string(text: str) -> bool:
    hint = _HINTS.get(text[:1])
    if hint is None:
        return False
    if text in _BOOL_NULL:
        return True
    if hint in "DS" and (_go_int(text) or FLOAT.fullmatch(text.replace("_", "")) or _is_timestamp(text)):
        return True
    return hint == "." and bool(FLOAT.fullmatch(text))


def _printable(char: str) -> bool:
    """The IS_PRINTABLE test of libyaml."""
    code = ord(char)
    return code != _BOM and any(low <= code <= high for low, high in _PRINTABLE_RANGES)


def _all_printable(text: str) -> bool:
    """Every character printable for libyaml (tab excluded); plain ASCII takes a fast path."""
    return (text.isascii() and text.isprintable()) or all(_printable(c) and c != "\t" for c in text)


def _analyse(text: str) -> tuple[bool, bool]:
    """(plain allowed in block context, single quotes allowed), as libyaml's scalar analysis decides."""
    if text.startswith(("---", "...")) and (len(text) == 3 or text[3] in " \t\n"):  # noqa: PLR2004
        return False, True
    special = not _all_printable(text)
    block_indicators = False
    for position, char in enumerate(text):
        following = text[position + 1] if position + 1 < len(text) else ""
        blank_after = following in {"", " ", "\t", "\n"}
        if position == 0:
            if char in "#,[]{}&*!|>'\"%@`":
                block_indicators = True
            elif char in "?:" or (char == "-" and blank_after):
                block_indicators = block_indicators or blank_after or char == "?"
        elif (char == ":" and blank_after) or (char == "#" and text[position - 1] in " \t"):
            block_indicators = True
    if text[0] == " " or text[-1] == " ":
        return False, not special
    return not (block_indicators or special), not special


def _double_quoted(text: str) -> str:
    out = []
    for char in text:
        if char in _ESCAPES:
            out.append("\\" + _ESCAPES[char])
        elif _printable(char):
            out.append(char)
        elif ord(char) <= 0xFF:  # noqa: PLR2004
            out.append(f"\\x{ord(char):02X}")
        elif ord(char) <= 0xFFFF:  # noqa: PLR2004
            out.append(f"\\u{ord(char):04X}")
        else:
            out.append(f"\\U{ord(char):08X}")
    return '"' + "".join(out) + '"'


def _fold(text: str, column: int, indent: int) -> str:
    """Break at single spaces once past the best width, as libyaml's plain and single-quoted writers do."""
    out = []
    previous_space = False
    for position, char in enumerate(text):
        next_is_space = position + 1 < len(text) and text[position + 1] == " "
        if char == " " and not previous_space and column > _BEST_WIDTH and not next_is_space:
            out.append("\n" + " " * indent)
            column = indent
        else:
            out.append(char)
            column += 1
        previous_space = char == " "
    return "".join(out)


def _literal(text: str, indent: int) -> str:
    hints = ""
    if text[0] in " \n":
        hints += str(_INDENT)
    if not text.endswith("\n"):
        hints += "-"
    elif len(text) == 1 or text[-2] == "\n":
        hints += "+"
    body_indent = " " * indent
    lines = text[:-1].split("\n") if text.endswith("\n") else text.split("\n")
    rendered = "\n".join(body_indent + line if line else "" for line in lines)
    return f"|{hints}\n{rendered}"


def scalar(value: object, column: int = 0, indent: int = 0) -> str:  # noqa: PLR0911 - one return per YAML style
    """One scalar as go-yaml v2 writes it, `column` being where it starts and `indent` its continuation indent."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return str(value)
    text = str(value)
    if text == "":
        return '""'
    literal_ok = all(_all_printable(line) for line in text.split("\n")) and not any(
        line.endswith(" ") for line in text.split("\n")
    )
    if "\n" in text and literal_ok:
        return _literal(text, indent)
    if "\n" in text or _resolves_to_non_string(text) or _BASE60.fullmatch(text):
        return _double_quoted(text)
    plain_ok, single_ok = _analyse(text)
    if plain_ok:
        return _fold(text, column, indent)
    if single_ok:
        return "'" + _fold(text.replace("'", "''"), column + 1, indent) + "'"
    return _double_quoted(text)


def _is_collection(value: object) -> bool:
    return isinstance(value, Mapping | list | tuple) and len(value) > 0


def _emit(value: object, indent: int, lines: list[str], prefix: str) -> None:
    """Append `value` to lines; `prefix` is what already stands on the current line."""
    if isinstance(value, Mapping) and value:
        first = True
        for key in sorted(value, key=lambda k: natural_key(str(k))):
            head = prefix if first else " " * indent
            first = False
            key_text = scalar(str(key), len(head), indent + _INDENT)
            item = value[key]
            if _is_collection(item):
                lines.append(f"{head}{key_text}:")
                child_indent = indent if isinstance(item, list | tuple) else indent + _INDENT
                _emit(item, child_indent, lines, " " * child_indent)
            else:
                start = f"{head}{key_text}: "
                lines.append(start + _inline(item, len(start), indent + _INDENT))
        return
    if isinstance(value, list | tuple) and value:
        for position, item in enumerate(value):
            head = (prefix if position == 0 else " " * indent) + "- "
            if _is_collection(item):
                _emit(item, indent + _INDENT, lines, head)
            else:
                lines.append(head + _inline(item, len(head), indent + _INDENT))
        return
    lines.append(prefix + _inline(value, len(prefix), indent))


def _inline(value: object, column: int, indent: int) -> str:
    if isinstance(value, Mapping):
        return "{}"
    if isinstance(value, list | tuple):
        return "[]"
    return scalar(value, column, indent)


def dump(value: Mapping[str, object] | Sequence[object]) -> bytes:
    """The document go-yaml v2 writes for plain data (maps, lists, strings, numbers, booleans, None)."""
    lines: list[str] = []
    _emit(value, 0, lines, "")
    return ("\n".join(lines) + "\n").encode()
