"""Owns: Go's texts of a float (FormatFloat 'g' at 32 or 64 bits, encoding/json's) and which texts ParseFloat reads.

sigs.k8s.io/yaml gives a float that is decoded into a string field, or used as a map key, the 32-bit form: the
float64 is first rounded to a float32, then written with the fewest digits that read back as that float32, in `%e`
form below 1e-4 and from 1e6 on (`1234567.0` is `1.234567e+06`, `123456789.123` is `1.2345679e+08`, `1e20` is
`1e+20`); a float32 overflow is `+Inf`. Go's `%v` of a float64 is the same with 64 bits (ggcr's error texts).
encoding/json writes a float64 plainly from 1e-6 to 1e21 (what its unmarshal errors quote). go-yaml v2 reads a text
as a float only when `strconv.ParseFloat` takes it without error, so one out of float64's range (`1e400`) stays text.
"""

from __future__ import annotations

__all__ = ["format_float", "format_float32", "format_json", "parses_finite"]

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
    return _digits(text)


def _digits(text: str) -> tuple[str, int]:
    """The significant digits of a positive float's text (`repr` or `%e`), and the decimal exponent of the first."""
    mantissa, _, exponent = text.partition("e")
    whole, _, fraction = mantissa.partition(".")
    significant = (whole + fraction).lstrip("0")
    return significant.rstrip("0") or "0", int(exponent or 0) - len(fraction) + len(significant) - 1


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
    return format_float(value, 32)


def format_float(value: float, bits: int = 64) -> str:
    """strconv.FormatFloat(value, 'g', -1, bits), 32 or 64 (Go's `%v` of a float64): `+Inf`, `-Inf`, `NaN`."""
    if value != value:  # noqa: PLR0124 - NaN, without loading math
        return "NaN"
    rounded = _to_single(value) if bits == 32 else value  # noqa: PLR2004
    if rounded in (_POSITIVE, _NEGATIVE):
        return "+Inf" if rounded > 0 else "-Inf"
    if rounded == 0:
        return "-0" if str(rounded).startswith("-") else "0"
    sign = "-" if rounded < 0 else ""
    digits = _shortest(abs(rounded)) if bits == 32 else _digits(repr(abs(rounded)))  # noqa: PLR2004 - repr: shortest
    return sign + _format_g(*digits)


def format_json(value: float) -> str:
    """How encoding/json writes a float64: plain from 1e-6 to 1e21, else `%e` (`1e-7`, not `1e-07`)."""
    if value.is_integer() and abs(value) < 1e21:  # noqa: PLR2004 - encoding/json's switch to exponent form
        return str(int(value))
    text = repr(value)
    if "e" not in text:
        return text
    if 1e-6 <= abs(value) < 1e21:  # noqa: PLR2004 - plain between these, exponent form outside
        import decimal  # noqa: PLC0415 - only in an error's text

        return format(decimal.Decimal(text), "f")
    mantissa, exponent = text.split("e")
    return f"{mantissa}e{exponent[0]}{exponent[1:].lstrip('0') or '0'}" if exponent[0] == "-" else text
