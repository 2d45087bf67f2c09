"""Owns: Go's `strconv.FormatFloat(f, 'g', -1, 32)` of a float64, and which texts `strconv.ParseFloat` reads.

sigs.k8s.io/yaml gives a float that is decoded into a string field, or used as a map key, this form: the float64 is
first rounded to a float32, then written with the fewest digits that read back as that float32, in `%e` form below
1e-4 and from 1e6 on (`1234567.0` is `1.234567e+06`, `123456789.123` is `1.2345679e+08`, `1e20` is `1e+20`); a
float32 overflow is `+Inf`. go-yaml v2 reads a text as a float only when `strconv.ParseFloat` takes it without
error, so one out of float64's range (`1e400`) stays text.
"""

from __future__ import annotations

__all__ = ["format_float32", "parses_finite"]

_POSITIVE, _NEGATIVE = float("inf"), float("-inf")


def parses_finite(text: str) -> float | None:
    """`float(text)` where Go's ParseFloat(text, 64) has no error (a text the caller checked is a float), else None.

    Go reports ErrRange for a magnitude beyond float64's: go-yaml then keeps the text as a string. An underflow is
    zero, without an error, in both.
    """
    value = float(text)
    return None if value in (_POSITIVE, _NEGATIVE) else value


def _to_single(number: float) -> float:
    """Go's `float32(number)`: rounded to the nearest float32, ±Inf past its range."""
    import struct  # noqa: PLC0415 - a float in a string field or a key is rare

    try:
        single: float = struct.unpack("f", struct.pack("f", number))[0]
    except OverflowError:
        return _POSITIVE if number > 0 else _NEGATIVE
    return single


def _shortest(single: float) -> tuple[str, int]:
    """The shortest significant digits that read back as the same float32, and the decimal exponent."""
    text = f"{single:.8e}"
    for places in range(9):
        text = f"{single:.{places}e}"
        if _to_single(float(text)) == single:
            break
    mantissa, exponent = text.split("e")
    return mantissa.lstrip("-").replace(".", "").rstrip("0") or "0", int(exponent)


def _format_g(digits: str, exponent: int) -> str:
    """Go's %g of the shortest digits: %e below 1e-4 and from 1e6 on, plain decimals between."""
    if exponent < -4 or exponent >= 6:  # noqa: PLR2004 - Go's %g switch to %e for the shortest form
        body = digits[0] + ("." + digits[1:] if len(digits) > 1 else "")
        return f"{body}e{'-' if exponent < 0 else '+'}{abs(exponent):02d}"
    point = exponent + 1
    if point <= 0:
        return f"0.{'0' * -point}{digits}"
    if point >= len(digits):
        return digits + "0" * (point - len(digits))
    return f"{digits[:point]}.{digits[point:]}"


def format_float32(value: float) -> str:
    """strconv.FormatFloat(value, 'g', -1, 32): `+Inf`, `-Inf` and `NaN` for what is not finite."""
    if value != value:  # noqa: PLR0124 - NaN, without loading math
        return "NaN"
    single = _to_single(value)
    if single in (_POSITIVE, _NEGATIVE):
        return "+Inf" if single > 0 else "-Inf"
    if single == 0:
        return "-0" if str(single).startswith("-") else "0"
    sign = "-" if single < 0 else ""
    return sign + _format_g(*_shortest(abs(single)))
