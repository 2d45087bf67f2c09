"""Owns: turning a composed node graph into values as go-yaml v2 decodes into `interface{}`: merges, repeated keys.

Non-strict (vendir's sigs.k8s.io/yaml Unmarshal) and strict (imgpkg's UnmarshalStrict) decoding differ only in what a
key set twice does.
"""

from __future__ import annotations

import base64
import binascii
import codecs

from ocivendir.goyaml.implicit import is_timestamp
from ocivendir.goyaml.keys import UnsupportedKeyError, go_key, go_value
from ocivendir.goyaml.nodes import MAPPING, SCALAR, SEQUENCE, ComposeError, Node, is_merge
from ocivendir.goyaml.scalars import resolve_plain

__all__ = ["decode"]


_CORE = "tag:yaml.org,2002:"
_GO_REPLACE = "ocivendir.go-json-replace"  # the codec error handler registered below
_RESOLVED = {"int", "float", "bool", "null", "timestamp"}  # go-yaml's resolvable tags besides !!str


def _kind(value: object) -> str:
    """go-yaml's short tag for a resolved value."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "bool"
    return {int: "int", float: "float"}.get(type(value), "str")


def _tagged(node: Node, tag: str) -> object:
    """A scalar with an explicit tag, as go-yaml v2's `resolve` and `(*decoder).scalar` take it.

    `!!str` keeps the text; `!!int`, `!!float`, `!!bool`, `!!null` and `!!timestamp` resolve the text even when it is
    quoted and must get that type (an int is a valid `!!float`); `!!binary` is base64; any other tag keeps the text.
    """
    short = tag.removeprefix(_CORE) if tag.startswith(_CORE) else ""
    if short == "binary":
        try:  # Go's StdEncoding skips line breaks: a block scalar may wrap the base64
            data = base64.b64decode(node.value.replace("\r", "").replace("\n", ""), validate=True)
        except binascii.Error:
            raise ComposeError("!!binary value contains invalid base64 data") from None
        return _go_json_text(data)
    if short not in _RESOLVED:
        return node.value
    value = resolve_plain(node.value)
    kind = _kind(value)
    if kind == short or (short == "timestamp" and kind == "str" and is_timestamp(node.value)):
        return value  # a timestamp decoded into interface{} stays its text, as go-yaml keeps it
    if short == "float" and kind == "int":
        return float(value)  # type: ignore[arg-type]
    raise ComposeError(f"cannot decode !!{kind} `{node.value}` as a !!{short}")


def _one_byte_replaced(exc: UnicodeError) -> tuple[str, int]:
    """A codec error handler: U+FFFD for the first byte of a broken sequence, decoding again from the next byte."""
    if not isinstance(exc, UnicodeDecodeError):
        raise exc
    return "\ufffd", exc.start + 1


codecs.register_error(_GO_REPLACE, _one_byte_replaced)


def _go_json_text(data: bytes) -> str:
    """Bytes as encoding/json writes them in a string: each byte that starts no valid UTF-8 sequence is one U+FFFD.

    (Python's `replace` makes one U+FFFD of a whole broken sequence: `e2 82 41` is one and `A` there, two and `A` in
    Go.) One pass, through a codec error handler: a bundle's images.yml may hold megabytes of such bytes.
    """
    return data.decode("utf-8", _GO_REPLACE)


def _scalar(node: Node) -> object:
    if node.tag is not None:
        return _tagged(node, node.tag)
    return resolve_plain(node.value) if node.plain else node.value


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
        self.unsupported: UnsupportedKeyError | None = None  # sigs.k8s.io/yaml's refusal, after go-yaml's own errors

    def _set(self, mapping: dict[str, object], key: str, value: object, origin: tuple[int, object]) -> None:
        if self.strict and key in mapping:
            self.errors.append(f"line {origin[0]}: key {go_value(origin[1])} already set in map")
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
            if isinstance(raw, list | dict):  # go-yaml's own refusal, as it decodes (before sigs.k8s.io/yaml's)
                raise ComposeError(f"invalid map key: {go_value(raw)}")
            try:
                key = go_key(raw, self.values[value_node])
            except UnsupportedKeyError as exc:
                self.unsupported = self.unsupported or exc
                continue
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
        if self.unsupported is not None:
            raise self.unsupported
        return values[root]


def decode(root: Node, *, strict: bool) -> object:
    """The value of the document whose root is `root`.

    ComposeError for what go-yaml refuses while decoding, UnsupportedKeyError for a key JSON cannot have.
    """
    return _Decoder(strict=strict).decode(root)
