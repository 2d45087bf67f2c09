"""Owns: whether go-yaml v2 would read a string written plain back as something else (a number, bool, date, null).

go-yaml's encoder quotes a string exactly when its resolver would give it another type, or when it is a YAML 1.1
sexagesimal number: these are its tests, without regular expressions (compiling them cost every run more than using
them).
"""

from __future__ import annotations

import datetime as dt

from ocivendir.goyaml.scalars import all_digits, go_float

__all__ = ["is_timestamp", "reads_as_string"]

_BOOL_NULL = frozenset({
    "y", "Y", "yes", "Yes", "YES", "n", "N", "no", "No", "NO", "true", "True", "TRUE", "false", "False", "FALSE",
    "on", "On", "ON", "off", "Off", "OFF", "null", "Null", "NULL", "~", ".inf", ".Inf", ".INF", "+.inf", "+.Inf",
    "+.INF", "-.inf", "-.Inf", "-.INF", ".nan", ".NaN", ".NAN",
})  # fmt: skip
_HINTS = dict.fromkeys("yYnNtTfFoO~", "M") | {".": ".", "+": "S", "-": "S"} | dict.fromkeys("0123456789", "D")
_DIGITS = "0123456789"
_DIGITS_ = _DIGITS + "_"


def _digit_run(text: str, start: int, most: int) -> int:
    """Where a run of at most `most` ASCII digits ends (Go's strconv and time parsers take no other digits)."""
    end = start
    while end < len(text) and end - start < most and text[end] in _DIGITS:
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
    return all_digits(body)


def _valid_date(year: int, month: int, day: int) -> bool:
    """A real date (proleptic Gregorian, years 1-9999)."""
    try:
        dt.date(year, month, day)
    except ValueError:
        return False
    return True


def is_timestamp(text: str) -> bool:
    """go-yaml v2's timestamp test: `YYYY-M-D`, optionally `[Tt ]h:m:s[.fraction][Z|±hh:mm]`, a real date.

    Digits are ASCII, as Go's time.Parse takes them; only the date's values are checked.
    """
    fields, at = [], 0
    for width, after in ((4, "-"), (2, "-"), (2, "")):
        end = _digit_run(text, at, width)
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
        end = _digit_run(text, at, 2)
        if end == at or text[end : end + len(after)] != after:
            return False
        at = end + len(after)
    if text[at : at + 1] == ".":
        end = _digit_run(text, at + 1, 9)
        if end == at + 1:
            return False
        at = end
    zone = text[at:]
    return zone in {"", "Z"} or (
        len(zone) == 6 and zone[0] in "+-" and zone[3] == ":" and all_digits(zone[1:3] + zone[4:])  # noqa: PLR2004
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
    if hint in "DS" and (_go_int(text) or go_float(text) is not None or is_timestamp(text)):
        return True
    return hint == "." and go_float(text) is not None


def reads_as_string(text: str) -> bool:
    """go-yaml's `canUsePlain`: `text` written plain resolves to a string again (and is no sexagesimal number)."""
    return bool(text) and not _resolves_to_non_string(text) and not _is_base60(text)
