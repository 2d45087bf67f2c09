"""Owns: a byte-exact emitter of what sigs.k8s.io/yaml (go-yaml v2) writes.

Shared by the vendir lock and imgpkg's images.yml rewrite: natural key order, go-yaml's plain/quoted/literal
choices, folding past column 80.
"""

from __future__ import annotations

from ocivendir.goyaml.scalars import all_digits, is_float

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

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
_DIGITS = "0123456789"
_DIGITS_ = _DIGITS + "_"
_DAYS = (31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31)
_ESCAPES = {
    "\0": "0", "\a": "a", "\b": "b", "\t": "t", "\n": "n", "\v": "v", "\f": "f", "\r": "r", "\x1b": "e",
    '"': '"', "\\": "\\", "\x85": "N", "\xa0": "_", "\u2028": "L", "\u2029": "P",
}  # fmt: skip


def natural_key(key: str) -> list[tuple[int, int, str]]:
    """go-yaml v2's key order: digit runs by value (shorter run first on a tie), non-letters before letters."""
    parts: list[tuple[int, int, str]] = []
    start = 0
    while start < len(key):
        end = _decimal_run(key, start, len(key))
        if end > start:
            parts.append((1, int(key[start:end]), f"{end - start:04d}"))
        else:
            end = start + 1
            parts.append((2 if key[start].isalpha() else 0, ord(key[start]), ""))
        start = end
    return parts


def _decimal_run(text: str, start: int, most: int) -> int:
    """Where a run of at most `most` decimal digits of any script (`str.isdecimal`, a pattern's digit class) ends."""
    end = start
    while end < len(text) and end - start < most and text[end].isdecimal():
        end += 1
    return end


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


def _valid_date(year: int, month: int, day: int) -> bool:
    """What `datetime.date` accepts (proleptic Gregorian, years 1-9999), without importing datetime."""
    if year < 1 or not 1 <= month <= len(_DAYS):
        return False
    leap = year % 4 == 0 and (year % 100 != 0 or year % 400 == 0)
    last = 29 if month == 2 and leap else _DAYS[month - 1]  # noqa: PLR2004 - February
    return 1 <= day <= last


def _is_timestamp(text: str) -> bool:
    """go-yaml v2's timestamp test: `YYYY-M-D`, optionally `[Tt ]h:m:s[.fraction][Z|±hh:mm]`, a real date.

    Digits are any script's, as the regular expression this replaces took them; only the date's values are checked.
    """
    fields, at = [], 0
    for width, after in ((4, "-"), (2, "-"), (2, "")):
        end = _decimal_run(text, at, width)
        if end == at or (width == 4 and end - at < 4) or text[end : end + len(after)] != after:  # noqa: PLR2004
            return False
        fields.append(int(text[at:end]))
        at = end + len(after)
    return _valid_date(*fields) and (at == len(text) or _is_clock(text[at:]))


def _is_clock(text: str) -> bool:
    """`[Tt ]h:m:s` with an optional `.fraction` (1-9 digits) and zone (`Z` or `±hh:mm`), on the whole text."""
    if text[:1] not in {"T", "t", " "}:
        return False
    at = 1
    for after in (":", ":", ""):
        end = _decimal_run(text, at, 2)
        if end == at or text[end : end + len(after)] != after:
            return False
        at = end + len(after)
    if text[at : at + 1] == ".":
        end = _decimal_run(text, at + 1, 9)
        if end == at + 1:
            return False
        at = end
    zone = text[at:]
    return zone in {"", "Z"} or (
        len(zone) == 6 and zone[0] in "+-" and zone[3] == ":" and (zone[1:3] + zone[4:]).isdecimal()  # noqa: PLR2004
    )


def _is_base60(text: str) -> bool:
    """YAML 1.1's sexagesimal number, `[-+]?[0-9][0-9_]*(:[0-5]?[0-9])+([.][0-9_]*)?`, on the whole text."""
    body = text[1:] if text[:1] in "+-" else text
    body, dot, fraction = body.partition(".")
    if dot and fraction.strip(_DIGITS_):
        return False
    first, *rest = body.split(":")
    if not rest or not first or first[0] not in _DIGITS or first.strip(_DIGITS_):
        return False
    return all(all_digits(part) and (len(part) == 1 or (len(part) == 2 and part[0] in "012345")) for part in rest)  # noqa: PLR2004


def _resolves_to_non_string(text: str) -> bool:
    hint = _HINTS.get(text[:1])
    if hint is None:
        return False
    if text in _BOOL_NULL:
        return True
    if hint in "DS" and (_go_int(text) or is_float(text.replace("_", "")) or _is_timestamp(text)):
        return True
    return hint == "." and is_float(text)


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
    if "\n" in text or _resolves_to_non_string(text) or _is_base60(text):
        return _double_quoted(text)
    plain_ok, single_ok = _analyse(text)
    if plain_ok:
        return _fold(text, column, indent)
    if single_ok:
        return "'" + _fold(text.replace("'", "''"), column + 1, indent) + "'"
    return _double_quoted(text)


def _is_collection(value: object) -> bool:
    return isinstance(value, dict | list | tuple) and len(value) > 0


def _emit(value: object, indent: int, lines: list[str], prefix: str) -> None:
    """Append `value` to lines; `prefix` is what already stands on the current line."""
    if isinstance(value, dict) and value:
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
    if isinstance(value, dict):
        return "{}"
    if isinstance(value, list | tuple):
        return "[]"
    return scalar(value, column, indent)


def dump(value: Mapping[str, object] | Sequence[object]) -> bytes:
    """The document go-yaml v2 writes for plain data (dicts, lists, tuples, strings, numbers, booleans, None)."""
    lines: list[str] = []
    _emit(value, 0, lines, "")
    return ("\n".join(lines) + "\n").encode()
