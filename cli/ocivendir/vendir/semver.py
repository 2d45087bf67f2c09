"""Owns: semver as vendir's tagSelection uses it.

Strict parsing after one leading `v`, blang/semver v4 ranges, build-metadata ordering (carvel's fork), prerelease
filters and vendir's selection messages.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from ocivendir.errors import ConfigError, SyncError

__all__ = ["Version", "parse_range", "parse_version", "select_tag"]

_SEMVER = re.compile(
    r"(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)"
    r"(?:-((?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*)(?:\.(?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*))*))?"
    r"(?:\+([0-9a-zA-Z-]+(?:\.[0-9a-zA-Z-]+)*))?"
)
_COMPARATOR = re.compile(r"(>=|<=|!=|==|=|>|<|!)?\s*(\S+)")


def _ident_key(part: str) -> tuple[int, int, str]:
    return (0, int(part), "") if part.isdigit() else (1, 0, part)


@dataclass(frozen=True)
class Version:
    """A parsed semantic version, ordered as carvel's semver fork orders it (build metadata included)."""

    major: int
    minor: int
    patch: int
    pre: tuple[str, ...] = ()
    build: tuple[str, ...] = ()

    def key(self) -> tuple[object, ...]:
        """Sort key: core, then prerelease (a release sorts after its prereleases), then build metadata."""
        pre = (1,) if not self.pre else (0, *[_ident_key(p) for p in self.pre])
        build = (0,) if not self.build else (1, *[_ident_key(b) for b in self.build])
        return (self.major, self.minor, self.patch, pre, build)

    def core_key(self) -> tuple[object, ...]:
        """Precedence without build metadata (what ranges compare)."""
        pre = (1,) if not self.pre else (0, *[_ident_key(p) for p in self.pre])
        return (self.major, self.minor, self.patch, pre)


def parse_version(text: str) -> Version | None:
    """Strict semver, or None."""
    match = _SEMVER.fullmatch(text)
    if not match:
        return None
    pre = tuple(match.group(4).split(".")) if match.group(4) else ()
    build = tuple(match.group(5).split(".")) if match.group(5) else ()
    return Version(int(match.group(1)), int(match.group(2)), int(match.group(3)), pre, build)


def _wildcard(op: str, text: str) -> list[tuple[str, Version]]:  # noqa: PLR0911 - one range per operator
    parts = text.split(".")
    while len(parts) < 3:  # noqa: PLR2004 - major.minor.patch
        parts.append("x")
    wild = [p in {"x", "X", "*"} for p in parts]
    if not any(wild):
        version = parse_version(text)
        if version is None:
            raise ValueError(f'Could not get version from string: "{text}"')
        return [(op or "=", version)]
    first = wild.index(True)
    if not all(wild[first:]) or not all(p.isdigit() for p in parts[:first]):
        raise ValueError(f'Could not get version from string: "{text}"')
    numbers = [int(p) for p in parts[:first]] + [0] * (3 - first)
    low = Version(numbers[0], numbers[1], numbers[2])
    if first == 0:
        return [(">=", Version(0, 0, 0))]
    bumped = numbers[:first]
    bumped[-1] += 1
    full = bumped + [0] * (3 - first)
    high = Version(full[0], full[1], full[2])
    if op in {"", "=", "=="}:
        return [(">=", low), ("<", high)]
    if op == ">":
        return [(">=", high)]
    if op == "<=":
        return [("<", high)]
    if op in {">=", "<"}:
        return [(op, low)]
    return [("<", low), (">=", high)] if op in {"!=", "!"} else [(op, low)]


def _holds(op: str, version: Version, bound: Version) -> bool:
    left, right = version.core_key(), bound.core_key()
    return {
        "=": left == right, "==": left == right, "!=": left != right, "!": left != right,
        ">": left > right, ">=": left >= right, "<": left < right, "<=": left <= right,
    }[op]  # fmt: skip


def parse_range(text: str) -> list[list[tuple[str, Version]]]:
    """blang/semver v4 ranges: `||` = OR, spaces = AND, x-wildcards; ValueError on a bad range."""
    alternatives = []
    for part in text.split("||"):
        comparators: list[tuple[str, Version]] = []
        tokens = re.sub(r"(>=|<=|!=|==|=|>|<|!)\s+", r"\1", part.strip()).split()
        if not tokens:
            raise ValueError(f'Could not get version from string: "{part}"')
        for token in tokens:
            match = _COMPARATOR.fullmatch(token)
            if not match:
                raise ValueError(f'Could not parse Range "{text}"')
            comparators.extend(_wildcard(match.group(1) or "", match.group(2)))
        alternatives.append(comparators)
    return alternatives


def _in_range(version: Version, ranges: list[list[tuple[str, Version]]]) -> bool:
    return any(all(_holds(op, version, bound) for op, bound in alternative) for alternative in ranges)


def _keeps_prerelease(version: Version, identifiers: Sequence[str] | None) -> bool:
    if not version.pre:
        return True
    if identifiers is None:
        return False
    if not identifiers:
        return True
    return any(part in identifiers for part in version.pre if not part.isdigit())


def select_tag(tags: Sequence[str], constraints: str, identifiers: Sequence[str] | None) -> str:
    """The highest matching tag (original string kept), with vendir's messages (`Determining tag selection: …`)."""
    candidates = []
    for tag in tags:
        version = parse_version(tag.removeprefix("v"))
        if version is not None:
            candidates.append((version, tag))
    total = len(candidates)
    kept = [c for c in candidates if _keeps_prerelease(c[0], identifiers)]
    details = f"all={total} -> after-prereleases-filter={len(kept)}"
    if constraints:
        try:
            ranges = parse_range(constraints)
        except ValueError as exc:
            raise ConfigError(
                f"Determining tag selection: Selecting versions: Parsing version constraint '{constraints}': {exc}"
            ) from None
        kept = [c for c in kept if _in_range(c[0], ranges)]
        details += f" -> after-constraints-filter={len(kept)}"
    if not kept:
        raise SyncError(
            f"Determining tag selection: Expected to find at least one version, but did not (details: {details})"
        )
    return max(kept, key=lambda c: c[0].key())[1]
