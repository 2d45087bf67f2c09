"""Owns: doublestar v1 glob matching (`**` across segments; `*`, `?`, `[...]`, `{a,b}` within them)."""

from __future__ import annotations

import functools
import re

__all__ = ["expand_braces", "match"]


def expand_braces(pattern: str) -> list[str]:
    """Every alternative of `{a,b}` groups (nested groups included)."""
    depth = 0
    start = -1
    for position, char in enumerate(pattern):
        if char == "{":
            if depth == 0:
                start = position
            depth += 1
        elif char == "}" and depth:
            depth -= 1
            if depth == 0:
                options = _split_top(pattern[start + 1 : position])
                head, tail = pattern[:start], pattern[position + 1 :]
                return [expanded for option in options for expanded in expand_braces(head + option + tail)]
    return [pattern]


def _split_top(text: str) -> list[str]:
    parts: list[str] = []
    current: list[str] = []
    depth = 0
    for char in text:
        if char == "," and depth == 0:
            parts.append("".join(current))
            current = []
            continue
        depth += char == "{"
        depth -= char == "}"
        current.append(char)
    parts.append("".join(current))
    return parts


@functools.lru_cache(maxsize=1024)
def _segment(pattern: str) -> re.Pattern[str]:
    import fnmatch  # noqa: PLC0415 - only when filters are used

    return re.compile(fnmatch.translate(pattern.replace("[^", "[!")))


def _match_parts(pattern: tuple[str, ...], parts: tuple[str, ...]) -> bool:
    if not pattern:
        return not parts
    if pattern[0] == "**":
        return any(_match_parts(pattern[1:], parts[i:]) for i in range(len(parts) + 1))
    if not parts:
        return False
    return bool(_segment(pattern[0]).match(parts[0])) and _match_parts(pattern[1:], parts[1:])


def match(pattern: str, name: str) -> bool:
    """doublestar.Match: does the slash-separated `name` match `pattern`?"""
    parts = tuple(name.split("/"))
    return any(_match_parts(tuple(p.split("/")), parts) for p in expand_braces(pattern))
