"""Owns: path safety — every path ocivendir replaces or writes into is resolved first, then checked, here.

A directory that a pull or sync replaces is checked where the replace really acts: its parent with `..` and
symlinks resolved, plus its last name (the swap replaces a symlink there rather than following it), and also the
fully resolved path, so `-o ./`, `-o "$PWD"`, `-o link-to-cwd` and `a/..` are all seen as the directory they name.
Call sites only name what they protect (`Guard`s); no call site compares path strings itself. Containment compares
whole names of resolved paths (`within`), so '/a/bc' is not inside '/a/b'. Functions take `str` or any
`os.PathLike[str]` and return `str`, the form the rest of the package (and `os`) passes around.

`pure`, `split` and `absolute` spell a path as `PurePosixPath` does with one difference that matters to a guard:
pathlib keeps a leading `//` (POSIX leaves that root implementation-defined), so `//cache` and `/cache` would compare
as different directories; on Linux they are the same one, and here they are spelled the same.
"""

from __future__ import annotations

import os
import posixpath
from dataclasses import dataclass, field

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence

__all__ = [
    "Guard",
    "UnsafePath",
    "absolute",
    "leaves",
    "pure",
    "replace_target",
    "resolved",
    "scoped_path",
    "split",
    "within",
]


class UnsafePath(Exception):
    """A path refused by a check; the text (`resolves to '…', which …`) says what it resolves to and why."""


def resolved(path: str | os.PathLike[str]) -> str:
    """`path` made absolute with `..`, `.`, repeated or trailing slashes and every symlink resolved."""
    return os.path.realpath(path)


def pure(path: str | os.PathLike[str]) -> str:
    """`path` spelled as `PurePosixPath` spells it (but `//` is `/`): no repeated slashes, `.` names or trailing slash.

    Lexical only: `..` is kept, and `link/..` resolves through the link, as it would for a Path.
    """
    text = os.fspath(path)
    clean = text not in {"", "."} and not text.startswith("./") and not text.endswith(("/", "/."))
    if clean and "//" not in text and "/./" not in text:
        return text  # already so spelled (the common case: a path this module returned)
    names = [name for name in text.split("/") if name and name != "."]
    return ("/" if text.startswith("/") else "") + "/".join(names) or "."


def absolute(path: str | os.PathLike[str]) -> str:
    """`Path(path).absolute()`: joined to the working directory and spelled as `pure` spells it; `..` and links kept."""
    return pure(os.path.join(os.getcwd(), path))


def split(path: str | os.PathLike[str]) -> tuple[str, str]:
    """`Path.parent` and `Path.name` of `path`, as `str`: the parent of a bare name is `.`, of `/` is `/`."""
    spelled = pure(path)
    if spelled == ".":
        return ".", ""
    parent, name = posixpath.split(spelled)
    return parent or ".", name


def within(inner: str, outer: str) -> bool:
    """True when `inner` is `outer` or below it, by whole names: '/a/bc' is not within '/a/b'.

    Both are compared as `pure` spells them (resolve them first where links matter); a relative path is never
    within an absolute one, nor the other way round.
    """
    inner, outer = pure(inner), pure(outer)
    if inner == outer:
        return True
    try:
        return posixpath.commonpath((outer, inner)) == outer
    except ValueError:  # one absolute, one relative
        return False


def _placement(path: str | os.PathLike[str], known: Guard | None = None) -> str:
    """Where replacing `path` acts: the resolved parent joined with the last name (a final symlink is replaced).

    A parent that is, as given, the path `known` was made of is not resolved a second time: `known.path` is it.
    """
    raw = os.fspath(path)
    text = os.path.abspath(raw)  # lexical only here; the parent is resolved just below
    stripped = raw.rstrip("/")
    last = posixpath.basename(stripped) if stripped else ""
    if last in {"", ".", ".."}:
        return resolved(raw)
    parent = posixpath.dirname(text)
    return posixpath.join(known.path if known is not None and known.given == parent else resolved(parent), last)


@dataclass(frozen=True)
class Guard:
    """A directory that must survive a replace: never replaced itself, nor through one of its parents.

    With `inside` set, nothing inside it may be replaced either (the cache: it is ocivendir's own data).
    """

    path: str
    what: str
    inside: bool = False
    given: str | None = field(default=None, compare=False)  # what `of` was given, before it was resolved

    @classmethod
    def of(cls, path: str | os.PathLike[str], what: str, *, inside: bool = False) -> Guard:
        """A guard on `path` as it resolves now."""
        given = os.fspath(path)
        return cls(resolved(given), what, inside, given)

    def refusal(self, target: str) -> str | None:
        """Why replacing `target` (resolved) would harm this directory, or None when it would not."""
        if target == self.path:
            return f"is {self.what}"
        if within(self.path, target):
            return f"contains {self.what} '{self.path}'"
        if self.inside and within(target, self.path):
            return f"is inside {self.what} '{self.path}'"
        return None

    def escape(self, target: str) -> str | None:
        """Why `target` (resolved) is not strictly inside this directory, or None when it is."""
        if target == self.path:
            return f"is {self.what}"
        if not within(target, self.path):
            return f"is outside {self.what} '{self.path}'"
        return None


def replace_target(
    path: str | os.PathLike[str],
    guards: Sequence[Guard],
    *,
    within: Guard | None = None,
    directory_only: bool = False,
) -> str:
    """The absolute path where replacing `path` acts, once it is known to spare every guard.

    Both the placement (resolved parent + last name) and the full resolution are checked: each must spare every
    guard and, with `within`, lie strictly inside that guard's directory. With `directory_only`, an existing
    non-directory (a file, a dangling link, a link to a file) is refused too. UnsafePath's text says what `path`
    resolves to and why it is refused; the caller names `path` in its own words.
    """
    placement, full = _placement(path, within), resolved(path)
    for target in dict.fromkeys((placement, full)):
        reasons = [within.escape(target)] if within is not None else []
        reasons += [guard.refusal(target) for guard in guards]
        reason = next((r for r in reasons if r is not None), None)
        if reason is not None:
            raise UnsafePath(f"resolves to '{target}', which {reason}")
    if directory_only and os.path.lexists(placement) and not os.path.isdir(placement):
        raise UnsafePath(f"is '{placement}', which exists and is not a directory")
    if directory_only:  # the nearest existing ancestor must be a directory too, or nothing can be made below it
        above = split(placement)[0]
        while not os.path.lexists(above) and split(above)[0] != above:
            above = split(above)[0]
        if not os.path.isdir(above):
            raise UnsafePath(f"is '{placement}', below '{above}', which is not a directory")
    return placement


def leaves(relative: str) -> bool:
    """True when a relative path from a config is absolute or climbs out of the directory it is relative to."""
    if not relative or posixpath.isabs(relative):
        return bool(relative)
    clean = posixpath.normpath(relative)
    return clean == ".." or clean.startswith("../")


def scoped_path(root: str | os.PathLike[str], relative: str) -> str:
    """`root/relative`, refusing any path that would leave root (vendir's ScopedPath: lexical, as vendir does)."""
    base = os.path.normpath(root)
    candidate = os.path.normpath(os.path.join(base, relative))
    if not within(candidate, base):
        msg = f"Invalid path: '{relative}' leaves '{root}'"
        raise ValueError(msg)
    return candidate
