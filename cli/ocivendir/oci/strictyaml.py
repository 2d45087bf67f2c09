"""Owns: YAML decoding the way sigs.k8s.io/yaml does it for strict Go structs.

Duplicate keys refused, scalars coerced to strings where a string is expected, unknown fields reported with Go's
JSON message.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import yaml

__all__ = ["StrictYAMLError", "check_fields", "go_string", "load_document"]


class StrictYAMLError(Exception):
    """A YAML document that a strict decode refuses; the text follows Go's where the spec quotes it."""


class _NoDuplicatesLoader(yaml.SafeLoader):
    """SafeLoader that refuses duplicate mapping keys."""


def _construct_mapping(loader: yaml.SafeLoader, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
    seen: set[Any] = set()
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=deep)
        if key in seen:
            line = key_node.start_mark.line + 1
            msg = f'error converting YAML to JSON: yaml: line {line}: key "{key}" already set in map'
            raise StrictYAMLError(msg)
        seen.add(key)
    return loader.construct_mapping(node, deep=deep)


_NoDuplicatesLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)


def load_document(raw: bytes | str) -> Any:  # noqa: ANN401 - YAML data
    """Parse one YAML document strictly."""
    try:
        return yaml.load(raw, Loader=_NoDuplicatesLoader)  # noqa: S506 - a SafeLoader subclass
    except yaml.YAMLError as exc:
        raise StrictYAMLError(f"error converting YAML to JSON: {exc}".replace("\n", " ")) from None


def check_fields(doc: Mapping[str, Any], allowed: frozenset[str]) -> None:
    """Refuse the first unknown key with Go's `json: unknown field` message."""
    for key in doc:
        if key not in allowed:
            raise StrictYAMLError(f'error unmarshaling JSON: while decoding JSON: json: unknown field "{key}"')


def go_string(value: Any, field: str) -> str:  # noqa: ANN401 - YAML data
    """A scalar coerced to a string as sigs.k8s.io/yaml does; a list or map is an error."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float | str):
        return str(value)
    kind = "array" if isinstance(value, list) else "object"
    raise StrictYAMLError(
        f"error unmarshaling JSON: while decoding JSON: json: cannot unmarshal {kind} into Go struct field {field} "
        "of type string"
    )
