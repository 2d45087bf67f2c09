"""Owns: reading YAML the way vendir's sigs.k8s.io/yaml (go-yaml v2) does, and Go's lenient decoding into structs.

Plain scalars resolve as go-yaml v2 resolves them (`0755` is octal 493, `1e3` a float, `yes`/`on` booleans,
timestamps stay text); a scalar decoded into a string field takes Go's string form of that value; field names match
case-insensitively (an exact match first); unknown fields are ignored; a wrong kind for a bool or integer field is
Go's `json: cannot unmarshal` error naming the field path.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator
from typing import Any

from ocivendir.goyaml.compose import MAPPING, SCALAR, SEQUENCE, ComposeError, Node, compose, is_merge
from ocivendir.goyaml.text import TextError, check_characters, decode_text

__all__ = ["DecodeError", "field", "go_bool", "go_bytes", "go_int", "go_string", "load_documents", "split_documents"]

_BOOLS = {
    **dict.fromkeys(["y", "Y", "yes", "Yes", "YES", "on", "On", "ON", "true", "True", "TRUE"], True),
    **dict.fromkeys(["n", "N", "no", "No", "NO", "off", "Off", "OFF", "false", "False", "FALSE"], False),
}
_NULLS = frozenset({"~", "null", "Null", "NULL", ""})
_FLOAT = re.compile(r"[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?")
_INF = {".inf": math.inf, ".Inf": math.inf, ".INF": math.inf, "+.inf": math.inf, "+.Inf": math.inf,
        "+.INF": math.inf, "-.inf": -math.inf, "-.Inf": -math.inf, "-.INF": -math.inf}  # fmt: skip
_SEPARATOR = re.compile(r"^---\s*$", re.MULTILINE)


class DecodeError(Exception):
    """A document vendir would refuse; the message follows Go's where vendir's is quoted."""


def _go_int(text: str) -> int | None:
    plain = text.replace("_", "")
    sign = -1 if plain.startswith("-") else 1
    body = plain[1:] if plain[:1] in "+-" else plain
    if not body:
        return None
    lowered = body.lower()
    bases = (("0x", 16), ("0o", 8), ("0b", 2))
    for prefix, base in bases:
        if lowered.startswith(prefix):
            try:
                return sign * int(body[2:], base)
            except ValueError:
                return None
    try:
        if len(body) > 1 and body.startswith("0"):
            return sign * int(body, 8)
        return sign * int(body, 10)
    except ValueError:
        return None


def resolve_plain(text: str) -> object:  # noqa: PLR0911 - one return per YAML type
    """The value go-yaml v2 gives a plain scalar."""
    if text in _BOOLS:
        return _BOOLS[text]
    if text in _NULLS:
        return None
    if text in _INF:
        return _INF[text]
    if text in {".nan", ".NaN", ".NAN"}:
        return math.nan
    if text[:1] in "+-.0123456789":
        number = _go_int(text)
        if number is not None:
            return number
        if _FLOAT.fullmatch(text.replace("_", "")):
            return float(text.replace("_", ""))
    return text


def _scalar(node: Node) -> object:
    return resolve_plain(node.value) if node.plain else node.value


def _go_key(value: object) -> str:
    """A map key as Go's `%#v` prints it in `key … already set in map`."""
    if isinstance(value, str):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    return "<nil>" if value is None else go_string(value)


class _Decoder:
    """go-yaml v2's mapping decode: `<<` merges and duplicate keys, with or without UnmarshalStrict's refusal.

    Non-strict (vendir's sigs.k8s.io/yaml Unmarshal): every entry is set in document order, so a later key wins,
    and a merge overwrites keys set before it; a `<<: [*a, *b]` list is applied last to first, so `a` wins over `b`.
    Strict (imgpkg's UnmarshalStrict): setting a key twice is an error, collected as go-yaml collects them.
    """

    def __init__(self, *, strict: bool) -> None:
        self.strict = strict
        self.values: dict[Node, object] = {}
        self.lines: dict[Node, dict[str, tuple[int, object]]] = {}  # strict: each key's value line and raw key
        self.errors: list[str] = []

    def _set(self, mapping: dict[str, object], key: str, value: object, origin: tuple[int, object]) -> None:
        if self.strict and key in mapping:
            self.errors.append(f"line {origin[0]}: key {_go_key(origin[1])} already set in map")
            return
        mapping[key] = value

    def _merge(self, node: Node, mapping: dict[str, object], lines: dict[str, tuple[int, object]]) -> None:
        """Go's `(*decoder).merge`: a map, an alias of one, or a list of those (earlier ones win)."""
        parts = reversed(node.children) if node.kind == SEQUENCE else [node]  # an alias of a list is refused
        for part in parts:
            merged = part.target if part.target is not None else part
            if merged.kind != MAPPING:
                raise ComposeError("map merge requires map or sequence of maps as the value")
            source = self.values[merged]
            assert isinstance(source, dict)  # noqa: S101 - a mapping node decodes to a dict
            for key, value in source.items():
                origin = self.lines.get(merged, {}).get(key, (merged.line, key))
                self._set(mapping, key, value, origin)
                lines.setdefault(key, origin)

    def mapping(self, node: Node) -> dict[str, object]:
        """The decoded mapping node, merges applied."""
        mapping: dict[str, object] = {}
        lines: dict[str, tuple[int, object]] = {}
        for key_node, value_node in zip(node.children[::2], node.children[1::2], strict=True):
            if is_merge(key_node):
                self._merge(value_node, mapping, lines)
                continue
            raw = self.values[key_node]
            key = go_string(raw)
            origin = (value_node.line, raw)
            self._set(mapping, key, self.values[value_node], origin)
            lines.setdefault(key, origin)
        if self.strict:
            self.lines[node] = lines
        return mapping

    def decode(self, root: Node) -> object:
        """The decoded value of `root`, built bottom-up without recursion; an alias shares its anchor's value."""
        values = self.values
        pending = [(root, False)]
        while pending:
            node, ready = pending.pop()
            if node in values:
                continue
            if node.kind == SCALAR:
                values[node] = _scalar(node)
            elif node.target is not None:  # the anchor's node comes first in the document, so it is already built
                values[node] = values[node.target]
            elif not ready:
                pending.append((node, True))
                pending.extend((child, False) for child in reversed(node.children))
            elif node.kind == SEQUENCE:
                values[node] = [values[child] for child in node.children]
            else:
                values[node] = self.mapping(node)
        if self.errors:
            raise ComposeError("unmarshal errors:\n  " + "\n  ".join(self.errors))
        return values[root]


def split_documents(text: str) -> list[str]:
    """Split at `---` separator lines (the Kubernetes YAML reader); whitespace-only documents are dropped."""
    return [doc for doc in _SEPARATOR.split(text) if doc.strip()]


def load_documents(data: str | bytes, *, strict: bool = False) -> Iterator[object]:
    """Each non-empty document decoded with go-yaml v2's rules and budgets (bytes are checked as go-yaml reads them).

    `strict` is go-yaml's UnmarshalStrict (imgpkg's lock files): a key set twice is an error instead of the later one
    winning.
    """
    try:
        text = decode_text(data) if isinstance(data, bytes) else check_characters(data)
        for doc in split_documents(text):
            root = compose(doc)
            yield None if root is None else _Decoder(strict=strict).decode(root)
    except (ComposeError, TextError) as exc:
        raise DecodeError(f"error converting YAML to JSON: yaml: {exc}") from None


def _go_float(value: float) -> str:
    if value.is_integer() and abs(value) < 1e21:  # noqa: PLR2004 - Go's JSON switch to exponent form
        return str(int(value))
    text = repr(value)
    if "e" in text:
        mantissa, exponent = text.split("e")
        sign = "-" if exponent.startswith("-") else "+"
        return f"{mantissa}e{sign}{abs(int(exponent)):02d}"
    return text


def go_string(value: object) -> str:
    """Go's string form of a decoded scalar (what sigs.k8s.io/yaml puts into a string field)."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return _go_float(value)
    return str(value)


def _kind(value: object) -> str:
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object"


def _mismatch(value: object, path: str, go_type: str) -> DecodeError:
    return DecodeError(
        f"error unmarshaling JSON: while decoding JSON: json: cannot unmarshal {_kind(value)} into Go struct field "
        f"{path} of type {go_type}"
    )


def go_bool(value: object, path: str) -> bool:
    """A bool field: a YAML bool, or null for false; anything else is Go's unmarshal error."""
    if value is None:
        return False
    if isinstance(value, bool):
        return value
    raise _mismatch(value, path, "bool")


def go_int(value: object, path: str, go_type: str = "int64") -> int | None:
    """An integer field (None when absent or null)."""
    if value is None:
        return None
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    raise _mismatch(value, path, go_type)


def go_string_field(value: object, path: str) -> str:
    """A string field: scalars are coerced, lists and maps refused."""
    if isinstance(value, list | dict):
        raise _mismatch(value, path, "string")
    return go_string(value)


_BASE64 = {c: i for i, c in enumerate(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/")}
_NEWLINES = b"\r\n"
_PAD = ord("=")


def _skip_newlines(data: bytes, at: int) -> int:
    while at < len(data) and data[at] in _NEWLINES:
        at += 1
    return at


def _padding_end(data: bytes, at: int, seen: int) -> int:
    """After a `=` at `at - 1` that follows `seen` characters of a quantum: the index past the padding (Go's rules)."""
    if seen < 2:  # noqa: PLR2004 - a quantum needs two characters before its padding
        raise ValueError(at - 1)
    if seen == 2:  # noqa: PLR2004 - then "==" is expected
        at = _skip_newlines(data, at)
        if at == len(data):
            raise ValueError(len(data))
        if data[at] != _PAD:
            raise ValueError(at - 1)
        at += 1
    at = _skip_newlines(data, at)
    if at < len(data):
        raise ValueError(at)  # trailing garbage
    return at


def _go_base64(data: bytes) -> bytes:
    """Go's base64.StdEncoding.Decode: newlines skipped, padding required; ValueError(byte offset) on corrupt input."""
    out, at = bytearray(), 0
    while True:
        values: list[int] = []
        while len(values) < 4:  # noqa: PLR2004 - one quantum
            if at == len(data):
                if not values:
                    return bytes(out)
                raise ValueError(at - len(values))
            byte, at = data[at], at + 1
            if byte in _BASE64:
                values.append(_BASE64[byte])
            elif byte not in _NEWLINES:
                if byte != _PAD:
                    raise ValueError(at - 1)
                at = _padding_end(data, at, len(values))
                break
        number = sum(v << (18 - 6 * i) for i, v in enumerate(values))
        out += number.to_bytes(3, "big")[: len(values) - 1]


def go_bytes(value: object, path: str) -> bytes:
    """A `[]byte` field: a base64 string decoded as Go's encoding/json does, with its error text; null is empty."""
    if value is None:
        return b""
    if not isinstance(value, str):
        raise _mismatch(value, path, "[]uint8")
    try:
        return _go_base64(value.encode())
    except ValueError as exc:
        raise DecodeError(
            f"error unmarshaling JSON: while decoding JSON: json: cannot unmarshal string into Go struct field {path} "
            f"of type []uint8: illegal base64 data at input byte {exc.args[0]}"
        ) from None


def field(doc: dict[str, Any], name: str) -> Any:  # noqa: ANN401 - decoded YAML
    """A struct field by Go's JSON rules: every key equal to `name` ignoring case sets it.

    sigs.k8s.io/yaml hands encoding/json an object with sorted keys, and each matching key overwrites the field, so
    the greatest matching key wins (`path` over `Path` over `PATH`, `includepaths` over `includePaths`).
    """
    lowered = name.lower()
    found = [key for key in doc if key.lower() == lowered]
    return doc[max(found)] if found else None
