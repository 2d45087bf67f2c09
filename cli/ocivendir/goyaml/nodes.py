"""Owns: the node graph of a composed YAML document (its kinds, `Node`, `<<` keys) and the composer's error.

Kept apart from `compose.py` so that code reading the graph, or catching `ComposeError`, never imports PyYAML.
"""

from __future__ import annotations

__all__ = ["ALIAS", "MAPPING", "SCALAR", "SEQUENCE", "ComposeError", "Node", "is_merge"]

SCALAR, SEQUENCE, MAPPING, ALIAS = "scalar", "sequence", "mapping", "alias"


class ComposeError(Exception):
    """A document go-yaml v2 refuses; the text is what follows `yaml: ` in Go's message."""


class Node:
    """One node of the document graph; an alias points at the node its anchor named."""

    __slots__ = ("children", "kind", "line", "plain", "tag", "target", "value")

    def __init__(self, kind: str, line: int, value: str = "", *, plain: bool = False, tag: str | None = None) -> None:
        """A node of `kind` starting at 1-based `line`; `tag` is a scalar's explicit tag (`!!int`, `!foo`), if any."""
        self.kind, self.line, self.value, self.plain, self.tag = kind, line, value, plain, tag
        self.children: list[Node] = []
        self.target: Node | None = None


def is_merge(key: Node) -> bool:
    """A `<<` key: go-yaml v2 merges the mapping(s) it names (plain only; a quoted `"<<"` is an ordinary key)."""
    return key.kind == SCALAR and key.plain and key.value == "<<"
