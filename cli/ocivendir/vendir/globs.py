"""Owns: doublestar v1 glob matching (`**` across segments; `*`, `?`, `[...]`, `{a,b}` within them)."""

from __future__ import annotations

import functools

from ocivendir.errors import ConfigError

TYPE_CHECKING = False
if TYPE_CHECKING:
    import re

__all__ = ["MAX_ALTERNATIVES", "expand_braces", "match"]


MAX_ALTERNATIVES = 4096
"""How many patterns one `{a,b}` pattern may stand for; more is refused, not expanded (a tenant's App spec could
otherwise ask for 2**N alternatives with N brace groups)."""


def expand_braces(pattern: str) -> list[str]:
    """Every alternative of `{a,b}` groups (nested groups included), at most `MAX_ALTERNATIVES` of them.

    Raises:
        ConfigError: the pattern stands for more alternatives than that.
    """
    done: list[str] = []
    pending = [pattern]
    while pending:
        current = pending.pop()
        group = _first_group(current)
        if group is None:
            done.append(current)
        else:
            start, end = group
            head, tail = current[:start], current[end + 1 :]
            pending.extend(head + option + tail for option in reversed(_split_top(current[start + 1 : end])))
        if len(done) + len(pending) > MAX_ALTERNATIVES:
            msg = f"Expected path pattern '{pattern}' to stand for at most {MAX_ALTERNATIVES} alternatives"
            raise ConfigError(msg)
    return done


def _first_group(pattern: str) -> tuple[int, int] | None:
    """The span of the first complete top-level `{…}` group, or None."""
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
                return start, position
    return None


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
    import re  # noqa: PLC0415 - the same

    return re.compile(fnmatch.translate(pattern.replace("[^", "[!")))


def _match_parts(pattern: tuple[str, ...], parts: tuple[str, ...]) -> bool:
    """Segment-wise match; `**` spans any number of segments (memoised: many `**` stay polynomial)."""

    @functools.cache
    def from_(i: int, j: int) -> bool:
        if i == len(pattern):
            return j == len(parts)
        if pattern[i] == "**":
            return any(from_(i + 1, k) for k in range(j, len(parts) + 1))
        if j == len(parts):
            return False
        return bool(_segment(pattern[i]).match(parts[j])) and from_(i + 1, j + 1)

    return from_(0, 0)


def match(pattern: str, name: str) -> bool:
    """doublestar.Match: does the slash-separated `name` match `pattern`?"""
    parts = tuple(name.split("/"))
    return any(_match_parts(alternative, parts) for alternative in _alternatives(pattern))


@functools.lru_cache(maxsize=256)
def _alternatives(pattern: str) -> tuple[tuple[str, ...], ...]:
    """A pattern's alternatives split into segments, once per pattern rather than once per file."""
    return tuple(tuple(alternative.split("/")) for alternative in expand_braces(pattern))
