"""Owns: decoding YAML into strict Go structs the way imgpkg's sigs.k8s.io/yaml UnmarshalStrict does.

Scalars resolve and `<<` merges apply as in vendir's config reading (`goyaml/load.py`, go-yaml v2 rules); on top of
that, a key set twice and unknown fields are errors with Go's messages.
"""

from __future__ import annotations

from ocivendir.goyaml.load import DecodeError, go_string_field, load_documents

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any

__all__ = ["StrictYAMLError", "check_fields", "go_string", "load_document"]

StrictYAMLError = DecodeError


def load_document(raw: bytes | str) -> Any:  # noqa: ANN401 - YAML data
    """The first YAML document (None when there is none), decoded with go-yaml v2's rules."""
    for document in load_documents(raw, strict=True):
        return document
    return None


def check_fields(doc: Mapping[str, Any], allowed: frozenset[str]) -> None:
    """Refuse the first unknown key with Go's `json: unknown field` message."""
    for key in doc:
        if key not in allowed:
            raise StrictYAMLError(f'error unmarshaling JSON: while decoding JSON: json: unknown field "{key}"')


def go_string(value: Any, field: str) -> str:  # noqa: ANN401 - YAML data
    """A scalar coerced to a string as sigs.k8s.io/yaml does; a list or map is an error."""
    return go_string_field(value, field)
