"""Owns: a registries.yaml `rewrite` rule as containerd applies it — Go's regexp syntax and `ReplaceAllString`.

containerd (k3s's build) compiles each pattern with Go's `regexp`: so are they here (`goregexp.py`, RE2, linear-time
matching and Go's dialect). The path is rewritten as `ReplaceAllString` does — every leftmost-first match, an empty
match right after a match skipped — and the target expanded as `regexp.Expand`: `$1`, `${1}`, `$name`, `${name}`,
`$$`; a group that does not exist or did not take part expands to nothing, and a `$` that starts no name stays a `$`.

RE2 is loaded only for a plan that has rewrites.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ocivendir.goregexp import compile_go

TYPE_CHECKING = False
if TYPE_CHECKING:
    from ocivendir.goregexp import GoMatch as _Match
    from ocivendir.goregexp import GoPattern as _Pattern


__all__ = ["Rewrite", "compile_rewrite", "rewrite_path"]

_NAME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_")
_REPOSITORY = r"[a-z0-9]+(?:[._-]+[a-z0-9]+)*(?:/[a-z0-9]+(?:[._-]+[a-z0-9]+)*)*"  # what a rewrite may produce
_COMPILED: list[_Pattern] = []


def _repository() -> _Pattern:
    if not _COMPILED:
        _COMPILED.append(compile_go(_REPOSITORY))
    return _COMPILED[0]


@dataclass(frozen=True, kw_only=True)
class Rewrite:
    """One `pattern: target` rule of a mirror, compiled."""

    pattern: str
    target: str
    compiled: _Pattern = field(repr=False, compare=False)
    names: tuple[str, ...] = field(default=(), repr=False, compare=False)  # group i's name at i - 1 ("" unnamed)

    def apply(self, path: str) -> str:
        """`path` with every match of the pattern replaced by the expanded target (Go's `ReplaceAllString`)."""
        out: list[str] = []
        last = position = 0
        while position <= len(path):
            match = self.compiled.search(path, position)
            if match is None:
                break
            start, end = match.span()
            out.append(path[last:start])
            if end > last or start == 0:  # not an empty match right after the previous one
                out.append(_expand(self.target, match, self.names))
            last = end
            position = max(end, position + 1)  # always advance by at least one character
        out.append(path[last:])
        return "".join(out)


def compile_rewrite(pattern: str, target: str) -> Rewrite:
    """A rule compiled as Go compiles it; ValueError with RE2's reason for a pattern Go would refuse."""
    return Rewrite(pattern=pattern, target=target, compiled=compile_go(pattern), names=_group_names(pattern))


def rewrite_path(rules: tuple[Rewrite, ...], path: str) -> str:
    """The first rule (in file order) that changes the path and gives a valid repository name wins."""
    for rule in rules:
        changed = rule.apply(path)
        if changed != path and _repository().fullmatch(changed) is not None:
            return changed
    return path


def _expand(template: str, match: _Match, names: tuple[str, ...]) -> str:
    """Go's `Regexp.Expand` of `template` for one match."""
    out: list[str] = []
    index = 0
    while index < len(template):
        dollar = template.find("$", index)
        if dollar < 0:
            out.append(template[index:])
            break
        out.append(template[index:dollar])
        name, index = _variable(template, dollar + 1)
        if name is None:  # `$$`, or a `$` that starts no name: copied as it is (Go's "malformed; treat $ as raw text")
            out.append("$")
            continue
        out.append(_group(match, name, names))
    return "".join(out)


def _variable(template: str, at: int) -> tuple[str | None, int]:
    """The name after a `$` at `at - 1` and where the text resumes; None for `$$` or no name (Go's `extract`)."""
    if template.startswith("$", at):
        return None, at + 1
    braced = template.startswith("{", at)
    start = at + 1 if braced else at
    end = start
    while end < len(template) and template[end] in _NAME_CHARS:
        end += 1
    if end == start or (braced and not template.startswith("}", end)):
        return None, at
    return template[start:end], end + 1 if braced else end


def _group(match: _Match, name: str, names: tuple[str, ...]) -> str:
    """A group's text by number or name; empty when there is no such group or it did not take part.

    As in Go, a name is a number only without a leading zero and below 10**9 (`${01}` names a group called `01`),
    and a name given to several groups is the first of them that took part.
    """
    if name.isdigit() and (name == "0" or not name.startswith("0")) and len(name) <= 9:  # noqa: PLR2004
        index = int(name)
        return (match.group(index) or "") if index <= len(names) else ""
    for index, named in enumerate(names, 1):
        if named == name and (value := match.group(index)) is not None:
            return value
    return ""


def _group_names(pattern: str) -> tuple[str, ...]:
    """The name of each capturing group of a pattern RE2 accepted, in group order ("" for an unnamed group).

    Skips escapes, `\\Q…\\E` literals and character classes; a `(` not followed by `?` opens a group, and so do
    `(?P<name>` and `(?<name>`.
    """
    names: list[str] = []
    index, size = 0, len(pattern)
    while index < size:
        char = pattern[index]
        if char == "\\":
            if pattern.startswith("Q", index + 1):
                end = pattern.find("\\E", index + 2)
                index = size if end < 0 else end + 2
            else:
                index += 2
        elif char == "[":
            index = _class_end(pattern, index)
        elif char == "(":
            if not pattern.startswith("?", index + 1):
                names.append("")
            elif pattern.startswith(("?P<", "?<"), index + 1) and not pattern.startswith(("?<=", "?<!"), index + 1):
                start = pattern.index("<", index) + 1
                names.append(pattern[start : pattern.index(">", start)])
            index += 1
        else:
            index += 1
    return tuple(names)


def _class_end(pattern: str, start: int) -> int:
    """Where a character class that opens at `start` ends (just past its `]`)."""
    index = start + 1
    if pattern.startswith("^", index):
        index += 1
    if pattern.startswith("]", index):  # a `]` first in the class is itself
        index += 1
    while index < len(pattern) and pattern[index] != "]":
        if pattern[index] == "\\":
            index += 2
        elif pattern.startswith("[:", index) and (close := pattern.find(":]", index + 2)) >= 0:
            index = close + 2
        else:
            index += 1
    return index + 1
