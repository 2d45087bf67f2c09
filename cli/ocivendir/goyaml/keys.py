"""Owns: map keys as sigs.k8s.io/yaml turns them into JSON object keys, and Go's `%#v` of values in its messages.

go-yaml v2 decodes a key to a Go value; sigs.k8s.io/yaml then needs a string: text stays, `true`/`false`, an int in
decimal, a float as `strconv.FormatFloat(f, 'g', -1, 32)` (so `1e3` is `1000` and `123456789.5` is
`1.2345679e+08`, infinities `.inf`/`-.inf`, NaN `.nan`). A null key, or an int only uint64 holds, is refused with
its `unsupported map key` error.
"""

from __future__ import annotations

from ocivendir.goyaml.gofloat import format_float32

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


def _float32(value: float) -> str:
    """strconv.FormatFloat(value, 'g', -1, 32) with go-yaml's names for infinities and NaN."""
    text = format_float32(value)
    return {"+Inf": ".inf", "-Inf": "-.inf", "NaN": ".nan"}.get(text, text)


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
