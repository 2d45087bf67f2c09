"""Owns: map keys as sigs.k8s.io/yaml turns them into JSON object keys, and Go's `%#v` of values in its messages.

go-yaml v2 decodes a key to a Go value; sigs.k8s.io/yaml then needs a string: text stays, `true`/`false`, an int in
decimal, a float as `strconv.FormatFloat(f, 'g', -1, 32)` (so `1e3` is `1000` and `123456789.5` is
`1.2345679e+08`, infinities `.inf`/`-.inf`, NaN `.nan`). A null key, or an int only uint64 holds, is refused with
its `unsupported map key` error.
"""

from __future__ import annotations

__all__ = ["UnsupportedKeyError", "go_key", "go_value"]

_INT64 = 1 << 63


class UnsupportedKeyError(Exception):
    """A key sigs.k8s.io/yaml cannot turn into JSON; the text follows `error converting YAML to JSON: `."""


def _go_quote(text: str) -> str:
    """Go's `%#v` of a string (strconv.Quote for the common escapes)."""
    escaped = text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n").replace("\t", "\\t")
    return '"' + escaped.replace("\r", "\\r") + '"'


def go_value(value: object) -> str:  # noqa: PLR0911 - one return per Go kind
    """Go's `%+#v` of a decoded value, as go-yaml's and sigs.k8s.io/yaml's messages print it."""
    if value is None:
        return "<nil>"
    if isinstance(value, str):
        return _go_quote(value)
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value) if -_INT64 <= value < _INT64 else hex(value)  # uint64: %#v prints hex
    if isinstance(value, float):
        return repr(value) if value - value == 0 else _float32(value)  # infinities and NaN as go-yaml names them
    if isinstance(value, dict):
        items = ", ".join(f"{go_value(k)}:{go_value(v)}" for k, v in value.items())
        return f"map[interface {{}}]interface {{}}{{{items}}}"
    if isinstance(value, list):
        return "[]interface {}{" + ", ".join(go_value(item) for item in value) + "}"
    return str(value)


def _shortest(single: float) -> tuple[str, int]:
    """The shortest significant digits that read back as the same float32, and the decimal exponent."""
    import struct  # noqa: PLC0415 - float keys are rare

    def to_single(number: float) -> float:
        value: float = struct.unpack("f", struct.pack("f", number))[0]
        return value

    text = f"{single:.8e}"
    for places in range(9):
        text = f"{single:.{places}e}"
        if to_single(float(text)) == single:
            break
    mantissa, exponent = text.split("e")
    return mantissa.lstrip("-").replace(".", "").rstrip("0") or "0", int(exponent)


def _float32(value: float) -> str:
    """strconv.FormatFloat(value, 'g', -1, 32) with go-yaml's names for infinities and NaN."""
    import math  # noqa: PLC0415 - float keys are rare
    import struct  # noqa: PLC0415

    if math.isnan(value):
        return ".nan"
    try:
        single: float = struct.unpack("f", struct.pack("f", value))[0]
    except OverflowError:
        single = math.copysign(math.inf, value)
    if math.isinf(single):
        return ".inf" if single > 0 else "-.inf"
    sign = "-" if math.copysign(1.0, single) < 0 else ""
    if single == 0:
        return sign + "0"
    return sign + _format_g(*_shortest(abs(single)))


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


def go_key(key: object, value: object) -> str:
    """The JSON key for a decoded map key; UnsupportedKeyError for what sigs.k8s.io/yaml refuses."""
    if isinstance(key, str):
        return key
    if isinstance(key, bool):
        return "true" if key else "false"
    if isinstance(key, int) and -_INT64 <= key < _INT64:
        return str(key)
    if isinstance(key, float):
        return _float32(key)
    kind = "%!s(<nil>)" if key is None else "uint64"
    msg = f"unsupported map key of type: {kind}, key: {go_value(key)}, value: {go_value(value)}"
    raise UnsupportedKeyError(msg)
