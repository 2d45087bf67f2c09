"""Owns: turning one YAML document into a node graph the way go-yaml v2's parser does, within budgets.

Budgets keep a hostile document from exploding (go-yaml v2 has the same guards): nesting deeper than `MAX_DEPTH`
is refused, and aliases may not expand the document beyond go-yaml's `allowedAliasRatio` ("billion laughs").
Aliases stay shared nodes here; nothing is expanded before the budget has been checked, and every walk is
iterative, so no input reaches Python's recursion limit. libyaml's parser is used when PyYAML has it (it is
go-yaml's ancestor: same scanner messages, linear time), the pure-Python parser otherwise.
"""

from __future__ import annotations

from collections.abc import Iterator

import yaml

from ocivendir.goyaml.nodes import ALIAS, MAPPING, SCALAR, SEQUENCE, ComposeError, Node, is_merge

__all__ = ["ALIAS", "MAPPING", "MAX_DEPTH", "SCALAR", "SEQUENCE", "ComposeError", "Node", "compose", "is_merge"]

# go-yaml v2 stops at 10,000 levels; libyaml (and so PyYAML's C parser) at 1,000, which no vendir config nears
MAX_DEPTH = 1000
# go-yaml v2 decode.go: allowedAliasRatio and the guard in (*decoder).unmarshal
_RATIO_LOW, _RATIO_HIGH = 400_000, 4_000_000
_MIN_ALIASES, _MIN_DECODES = 100, 1000


def _parser_events(text: str) -> Iterator[yaml.Event]:
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    return yaml.parse(text, Loader=loader)


def _syntax_error(exc: yaml.MarkedYAMLError) -> ComposeError:
    """Go's `(*parser).fail`: a scanner error's line counts from 1, a parser error's is the 0-based mark line."""
    problem = exc.problem or "unknown problem parsing YAML content"
    if problem == "exceeded maximum nesting depth":
        problem = f"exceeded max depth of {MAX_DEPTH}"
    line = 0
    if exc.problem_mark is not None and exc.problem_mark.line != 0:
        line = exc.problem_mark.line + (1 if isinstance(exc, yaml.scanner.ScannerError) else 0)
    elif exc.context_mark is not None:
        line = exc.context_mark.line
    return ComposeError(f"line {line}: {problem}" if line else problem)


def _new_node(event: yaml.NodeEvent, anchors: dict[str, Node], open_nodes: set[Node]) -> Node:
    line = event.start_mark.line + 1 if event.start_mark is not None else 0
    if isinstance(event, yaml.AliasEvent):
        target = anchors.get(event.anchor or "")
        if target is None:
            raise ComposeError(f"unknown anchor '{event.anchor}' referenced")
        if target in open_nodes:  # a set: a scan of the open nodes per alias is depth times aliases
            raise ComposeError(f"anchor '{event.anchor}' value contains itself")
        node = Node(ALIAS, line)
        node.target = target
        return node
    if isinstance(event, yaml.ScalarEvent):
        node = Node(SCALAR, line, event.value, plain=event.style in {None, ""}, tag=event.tag,
                    implicit=event.implicit[0])  # fmt: skip
    else:
        node = Node(SEQUENCE if isinstance(event, yaml.SequenceStartEvent) else MAPPING, line)
    if event.anchor is not None:
        anchors[event.anchor] = node
    return node


def _build(events: Iterator[yaml.Event]) -> Node | None:
    """The first document's root node; only that document is read, as go-yaml's Unmarshal does."""
    anchors: dict[str, Node] = {}
    stack: list[Node] = []
    open_nodes: set[Node] = set()  # the nodes of `stack` (Node hashes by identity)
    root: Node | None = None
    for event in events:
        if isinstance(event, yaml.CollectionEndEvent):
            open_nodes.discard(stack.pop())
        elif isinstance(event, yaml.NodeEvent):
            node = _new_node(event, anchors, open_nodes)
            if stack:
                stack[-1].children.append(node)
            else:
                root = node
            if isinstance(event, yaml.CollectionStartEvent):
                stack.append(node)
                open_nodes.add(node)
                if len(stack) > MAX_DEPTH:
                    raise ComposeError(f"line {node.line}: exceeded max depth of {MAX_DEPTH}")
        elif isinstance(event, yaml.DocumentEndEvent):
            break
    return root


def _allowed_ratio(decodes: int) -> float:
    if decodes <= _RATIO_LOW:
        return 0.99
    if decodes >= _RATIO_HIGH:
        return 0.10
    return 0.99 - 0.89 * ((decodes - _RATIO_LOW) / (_RATIO_HIGH - _RATIO_LOW))


def _excessive(aliases: int, decodes: int) -> bool:
    return aliases > _MIN_ALIASES and decodes > _MIN_DECODES and aliases / decodes > _allowed_ratio(decodes)


def decoded_parts(node: Node) -> list[Node]:
    """The nodes go-yaml decodes, one step each, while it decodes `node` (an alias: its anchor's node).

    A `<<` key is never decoded itself, nor is a merged list (only the maps in it).
    """
    if node.target is not None:
        return [node.target]
    if node.kind != MAPPING:
        return node.children
    parts: list[Node] = []
    for key, value in zip(node.children[::2], node.children[1::2], strict=True):
        if not is_merge(key):
            parts += (key, value)
        else:
            parts += value.children if value.kind == SEQUENCE else [value]
    return parts


def decode_size(node: Node, sizes: dict[Node, int]) -> int:
    """How many decode steps go-yaml spends on `node`, aliases expanded (memoised, iterative; may be huge)."""
    pending = [(node, False)]
    while pending:
        current, ready = pending.pop()
        if current in sizes:
            continue
        parts = decoded_parts(current)
        if not ready:
            pending.append((current, True))
            pending.extend((part, False) for part in parts if part not in sizes)
            continue
        sizes[current] = 1 + sum(sizes[part] for part in parts)
    return sizes[node]


def check_aliasing(root: Node) -> None:
    """Replay go-yaml v2's decode counters over the graph and refuse what it refuses.

    Outside aliases every node is one step, taken in document order. An alias expansion adds its whole size at once:
    inside it every step is an alias step, so the aliased share only grows while the allowed share only shrinks, and
    the guard holds at some step of the expansion exactly when it holds at its end.
    """
    sizes: dict[Node, int] = {}
    decodes, aliases = 1, 0  # the document node
    pending = [root]
    while pending:
        node = pending.pop()
        decodes += 1
        if node.target is not None:
            expanded = decode_size(node.target, sizes)
            decodes, aliases = decodes + expanded, aliases + expanded
        if _excessive(aliases, decodes):
            raise ComposeError("document contains excessive aliasing")
        if node.target is None:
            pending.extend(reversed(decoded_parts(node)))


def compose(text: str) -> Node | None:
    """The first document of `text` as a node graph (None when empty), within the depth and alias budgets."""
    try:
        root = _build(_parser_events(text))
    except yaml.MarkedYAMLError as exc:
        raise _syntax_error(exc) from None
    except yaml.YAMLError as exc:  # a reader error: libyaml's text matches Go's
        raise ComposeError(str(getattr(exc, "reason", None) or exc)) from None
    if root is not None:
        check_aliasing(root)
    return root
