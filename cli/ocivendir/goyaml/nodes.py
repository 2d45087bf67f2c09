"""Owns: the node graph of a composed YAML document (its kinds, `Node`, `<<` keys) and the composer's error.

Kept apart from `compose.py` so that code reading the graph, or catching `ComposeError`, never imports PyYAML.
"""

from __future__ import annotations

__all__ = ["ALIAS", "MAPPING", "MERGE_TAG", "SCALAR", "SEQUENCE", "ComposeError", "Node", "is_merge"]

SCALAR, SEQUENCE, MAPPING, ALIAS = "scalar", "sequence", "mapping", "alias"


class ComposeError(Exception):
    """A document go-yaml v2 refuses; the text is what follows `yaml: ` in Go's message."""


class Node:
    """One node of the document graph; an alias points at the node its anchor named."""

    __slots__ = ("children", "implicit", "kind", "line", "plain", "tag", "target", "value")

    def __init__(self, kind: str, line: int, value: str = "", *, plain: bool = False, tag: str | None = None,
                 implicit: bool = False) -> None:  # fmt: skip
        """A node of `kind` starting at 1-based `line`; `tag` is a scalar's explicit tag (`!!int`, `!foo`), if any.

        `implicit`: the parser's plain-implicit flag — a plain scalar with no tag, or any scalar tagged `!` alone.
        """
        self.kind, self.line, self.value, self.plain, self.tag = kind, line, value, plain, tag
        self.implicit = implicit
        self.children: list[Node] = []
        self.target: Node | None = None


MERGE_TAG = "tag:yaml.org,2002:merge"


def is_merge(key: Node) -> bool:
    """A `<<` key, whose mapping(s) go-yaml v2 merges: implicit (plain and untagged, or tagged `!`) or tagged `!!merge`.

    As go-yaml's `isMerge`: a quoted `"<<"` or a `!!str <<` is an ordinary key, a `!!merge "<<"` merges.
    """
    return key.kind == SCALAR and key.value == "<<" and (key.implicit or key.tag == MERGE_TAG)
