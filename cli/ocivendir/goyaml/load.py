"""Owns: reading YAML the way vendir's sigs.k8s.io/yaml (go-yaml v2) does, and Go's lenient decoding into structs.

Each document goes through PyYAML's parser (libyaml's, `compose.py`) and then go-yaml v2's rules (`values.py`:
merges, repeated keys, budgets). Plain scalars resolve as go-yaml v2 resolves them (`scalars.py`); a scalar decoded
into a string field takes Go's string form of that value; field names match case-insensitively (the greatest matching
key wins, as in encoding/json); unknown fields are ignored; a wrong kind for a bool or integer field is Go's `json:
cannot unmarshal` error naming the field path.
"""

from __future__ import annotations

from ocivendir.gobase64 import go_base64
from ocivendir.gofold import go_fold
from ocivendir.goyaml import compose, values
from ocivendir.goyaml.gofloat import format_json
from ocivendir.goyaml.keys import UnsupportedKeyError
from ocivendir.goyaml.nodes import ComposeError
from ocivendir.goyaml.scalars import go_string, resolve_plain
from ocivendir.goyaml.text import TextError, check_characters, decode_text

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterator
    from typing import Any

__all__ = [
    "DecodeError", "SeparatorError", "field", "go_bool", "go_bytes", "go_file_mode", "go_int", "go_string",
    "load_documents",
    "resolve_plain", "split_documents",
]  # fmt: skip


# Go's unicode.IsSpace (strings.TrimSpace): Python's str.strip also strips \x1c-\x1f
_GO_SPACE = " \t\n\v\f\r\x85\xa0\u1680" + "".join(map(chr, range(0x2000, 0x200B))) + "\u2028\u2029\u202f\u205f\u3000"


class DecodeError(Exception):
    """A document vendir would refuse; the message follows Go's where vendir's is quoted."""


class SeparatorError(DecodeError):
    """A line that starts with `---` and goes on with more than a comment (vendir: `Parsing config '<path>': …`)."""


def split_documents(text: str) -> Iterator[str]:
    """The documents the Kubernetes YAML reader (`NewYAMLReader`, as vendir 0.40.0 vendors it) reads, less blank ones.

    Lines are read as bufio's ReadLine reads them (`\r\n` ends a line too). A line starting with `---` ends the
    document being read when it holds only a comment after that, and anything else after it is a SeparatorError; a
    separator ends nothing while no line is read yet, so it is kept as the document's first line: `---` before
    the first document is harmless, but one right after another separator, or last in the stream, makes a document
    of its own that decodes as empty (vendir: `Unknown apiVersion '' or kind ''`). Documents of whitespace only are
    dropped, as vendir drops them. Documents come one at a time: one's error comes before a later separator's.
    """
    parts = text.split("\n")
    lines = [line.removesuffix("\r") for line in parts[:-1]] + ([parts[-1]] if parts[-1] else [])
    buffer: list[str] = []
    for line in lines:
        if line.startswith("---"):
            rest = line[3:].strip(_GO_SPACE)
            if rest and not rest.startswith("#"):
                raise SeparatorError(f"invalid Yaml document separator: {rest}")
            if buffer:
                document, buffer = "".join(buffer), []
                if document.strip(_GO_SPACE):
                    yield document
                continue
        buffer.append(line + "\n")
    document = "".join(buffer)
    if document.strip(_GO_SPACE):
        yield document


def load_documents(data: str | bytes, *, strict: bool = False) -> Iterator[object]:
    """Each non-empty document decoded with go-yaml v2's rules and budgets (bytes are checked as go-yaml reads them).

    `strict` is go-yaml's UnmarshalStrict (imgpkg's lock files): a key set twice is an error instead of the later one
    winning.
    """
    try:
        text = decode_text(data) if isinstance(data, bytes) else check_characters(data)
        for doc in split_documents(text):
            root = compose.compose(doc)
            yield None if root is None else values.decode(root, strict=strict)
    except (ComposeError, TextError) as exc:
        raise DecodeError(f"error converting YAML to JSON: yaml: {exc}") from None
    except UnsupportedKeyError as exc:
        raise DecodeError(f"error converting YAML to JSON: {exc}") from None


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


_UINT32 = 1 << 32


def go_file_mode(value: object, path: str) -> int | None:
    """An fs.FileMode field (a uint32; None when absent or null): a number it cannot hold is Go's unmarshal error."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise _mismatch(value, path, "fs.FileMode")
    if (isinstance(value, float) and not value.is_integer()) or not 0 <= value < _UINT32:
        literal = str(value) if isinstance(value, int) else format_json(value)
        raise DecodeError(
            f"error unmarshaling JSON: while decoding JSON: json: cannot unmarshal number {literal} into Go struct "
            f"field {path} of type fs.FileMode"
        )
    return int(value)


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


def go_bytes(value: object, path: str) -> bytes:
    """A `[]byte` field: a base64 string decoded as Go's encoding/json does, with its error text; null is empty."""
    if value is None:
        return b""
    if not isinstance(value, str):
        raise _mismatch(value, path, "[]uint8")
    try:
        return go_base64(value.encode())
    except ValueError as exc:
        raise DecodeError(
            f"error unmarshaling JSON: while decoding JSON: json: cannot unmarshal string into Go struct field {path} "
            f"of type []uint8: illegal base64 data at input byte {exc.args[0]}"
        ) from None


def field(doc: dict[str, Any], name: str) -> Any:  # noqa: ANN401 - decoded YAML
    """A struct field by Go's JSON rules: every key equal to `name` ignoring case (Go's folding) sets it.

    sigs.k8s.io/yaml hands encoding/json an object with sorted keys, and each matching key overwrites the field, so
    the greatest matching key wins (`path` over `Path` over `PATH`, `includepaths` over `includePaths`, and `paths`
    spelt with a long s, U+017F, over `paths`).
    """
    lowered = name.lower()
    found = [key for key in doc if go_fold(key) == lowered]
    return doc[max(found)] if found else None
