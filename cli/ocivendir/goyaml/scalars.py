"""Owns: what go-yaml v2 makes of a plain scalar (YAML 1.1 resolution) and Go's string form of the result.

`0755` is octal 493, `1e3` a float (`1e400`, past float64, stays text), `yes`/`on` booleans, `~` null, timestamps
stay text; a value decoded into a string field (or used as a map key) takes Go's string form.
"""

from __future__ import annotations

from ocivendir.goyaml.gofloat import format_float32, parses_finite

__all__ = ["all_digits", "go_float", "go_string", "is_float", "resolve_plain"]

_BOOLS = {
    **dict.fromkeys(["y", "Y", "yes", "Yes", "YES", "on", "On", "ON", "true", "True", "TRUE"], True),
    **dict.fromkeys(["n", "N", "no", "No", "NO", "off", "Off", "OFF", "false", "False", "FALSE"], False),
}
_INT64 = 1 << 63
_NULLS = frozenset({"~", "null", "Null", "NULL", ""})
_DIGITS = "0123456789"
_POSITIVE, _NEGATIVE = float("inf"), float("-inf")  # math.inf, without loading math
_INF = {".inf": _POSITIVE, ".Inf": _POSITIVE, ".INF": _POSITIVE, "+.inf": _POSITIVE, "+.Inf": _POSITIVE,
        "+.INF": _POSITIVE, "-.inf": _NEGATIVE, "-.Inf": _NEGATIVE, "-.INF": _NEGATIVE}  # fmt: skip


def all_digits(text: str) -> bool:
    """One or more ASCII digits (a regular expression's `[0-9]+`)."""
    return bool(text) and not text.strip(_DIGITS)


def _signed(text: str) -> str:
    return text[1:] if text[:1] in "+-" else text


def is_float(text: str) -> bool:
    """go-yaml v2's yamlStyleFloat, `[-+]?([.][0-9]+|[0-9]+([.][0-9]*)?)([eE][-+]?[0-9]+)?`, on the whole text.

    String checks instead of the expression: compiling it cost every run more than using it.
    """
    mantissa, exponent = _signed(text), None
    for mark in "eE":
        if mark in mantissa:
            mantissa, _, exponent = mantissa.partition(mark)
            break
    if exponent is not None and not all_digits(_signed(exponent)):
        return False
    whole, dot, fraction = mantissa.partition(".")
    if not whole:
        return bool(dot) and all_digits(fraction)
    return all_digits(whole) and (not fraction or all_digits(fraction))


_BASE_DIGITS = {16: "0123456789abcdefABCDEF", 10: _DIGITS, 8: "01234567", 2: "01"}


def _in_base(digits: str, base: int) -> bool:
    """Only ASCII digits of `base` (Python's int() would also take other scripts' digits, a sign and spaces)."""
    return bool(digits) and not digits.strip(_BASE_DIGITS[base])


def _go_int(text: str) -> int | None:
    """strconv.ParseInt (or ParseUint) with base 0, as go-yaml v2 calls it, after removing underscores."""
    plain = text.replace("_", "")
    sign = -1 if plain.startswith("-") else 1
    body = plain[1:] if plain[:1] in "+-" else plain
    if not body:
        return None
    lowered = body.lower()
    bases = (("0x", 16), ("0o", 8), ("0b", 2))
    for prefix, base in bases:
        if lowered.startswith(prefix):
            if not _in_base(body[2:], base):
                return None
            number = sign * int(body[2:], base)
            return number if -_INT64 <= number < 2 * _INT64 else None
    base = 8 if len(body) > 1 and body.startswith("0") else 10
    if not _in_base(body, base):
        return None
    number = sign * int(body, base)
    return number if -_INT64 <= number < 2 * _INT64 else None  # int64 or uint64, else a float (or text)


def resolve_plain(text: str) -> object:  # noqa: PLR0911 - one return per YAML type
    """The value go-yaml v2 gives a plain scalar."""
    if text in _BOOLS:
        return _BOOLS[text]
    if text in _NULLS:
        return None
    if text in _INF:
        return _INF[text]
    if text in {".nan", ".NaN", ".NAN"}:
        return float("nan")
    if text[:1] in "+-.0123456789":
        number = _go_int(text)
        if number is not None:
            return number
        if (value := go_float(text)) is not None:
            return value
    return text


def go_float(text: str) -> float | None:
    """The float go-yaml v2 reads from a plain scalar that is no int, else None (then it stays a string).

    After a sign or a digit, go-yaml removes underscores and the rest must be yamlStyleFloat; after a `.`, it hands
    the text to ParseFloat as it is, which takes underscores only between digits (`.5_0` is 0.5, `._5` no number).
    Either way a magnitude beyond float64's (`1e400`) is ParseFloat's ErrRange, and go-yaml keeps the text.
    """
    if text[:1] == "." and "_" in text and not _underscores_between_digits(text):
        return None
    plain = text.replace("_", "")
    return parses_finite(plain) if is_float(plain) else None


def _underscores_between_digits(text: str) -> bool:
    """Strconv's underscoreOK for a decimal: each `_` has a digit just before it and just after it."""
    return all(
        0 < at < len(text) - 1 and text[at - 1] in _DIGITS and text[at + 1] in _DIGITS
        for at, char in enumerate(text) if char == "_"
    )  # fmt: skip


def go_string(value: object) -> str:
    """Go's string form of a decoded scalar (what sigs.k8s.io/yaml puts into a string field).

    A float is FormatFloat(f, 'g', -1, 32): `1.234567e+06` for `1234567.0`, `+Inf` for `.inf` (`gofloat.py`).
    """
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return format_float32(value)
    return str(value)
