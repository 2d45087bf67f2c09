"""Owns: path safety — every path ocivendir replaces or writes into is resolved first, then checked, here.

A directory that a pull or sync replaces is checked where the replace really acts: its parent with `..` and
symlinks resolved, plus its last name (the swap replaces a symlink there rather than following it), and also the
fully resolved path, so `-o ./`, `-o "$PWD"`, `-o link-to-cwd` and `a/..` are all seen as the directory they name.
Call sites only name what they protect (`Guard`s); no call site compares path strings itself.
"""

from __future__ import annotations

import os
import posixpath
from collections.abc import Sequence
from pathlib import Path

from ocivendir.record import record

__all__ = ["Guard", "UnsafePath", "leaves", "replace_target", "resolved", "scoped_path"]


class UnsafePath(Exception):
    """A path refused by a check; the text (`resolves to '…', which …`) says what it resolves to and why."""


def resolved(path: Path | str) -> Path:
    """`path` made absolute with `..`, `.`, repeated or trailing slashes and every symlink resolved."""
    return Path(os.path.realpath(path))


def _placement(path: Path | str) -> Path:
    """Where replacing `path` acts: the resolved parent joined with the last name (a final symlink is replaced)."""
    text = os.path.abspath(path)  # noqa: PTH100 - lexical only here; the parent is resolved just below
    raw = str(path).rstrip("/")
    last = posixpath.basename(raw) if raw else ""
    if last in {"", ".", ".."}:
        return resolved(path)
    return resolved(posixpath.dirname(text)) / last


def _contains(outer: Path, inner: Path) -> bool:
    return inner == outer or inner.is_relative_to(outer)


@record(kw_only=False)
class Guard:
    """A directory that must survive a replace: never replaced itself, nor through one of its parents.

    With `inside` set, nothing inside it may be replaced either (the cache: it is ocivendir's own data).
    """

    path: Path
    what: str
    inside: bool = False

    @classmethod
    def of(cls, path: Path | str, what: str, *, inside: bool = False) -> Guard:
        """A guard on `path` as it resolves now."""
        return cls(resolved(path), what, inside)

    def refusal(self, target: Path) -> str | None:
        """Why replacing `target` (resolved) would harm this directory, or None when it would not."""
        if target == self.path:
            return f"is {self.what}"
        if _contains(target, self.path):
            return f"contains {self.what} '{self.path}'"
        if self.inside and _contains(self.path, target):
            return f"is inside {self.what} '{self.path}'"
        return None

    def escape(self, target: Path) -> str | None:
        """Why `target` (resolved) is not strictly inside this directory, or None when it is."""
        if target == self.path:
            return f"is {self.what}"
        if not target.is_relative_to(self.path):
            return f"is outside {self.what} '{self.path}'"
        return None


def replace_target(
    path: Path | str, guards: Sequence[Guard], *, within: Guard | None = None, directory_only: bool = False
) -> Path:
    """The absolute path where replacing `path` acts, once it is known to spare every guard.

    Both the placement (resolved parent + last name) and the full resolution are checked: each must spare every
    guard and, with `within`, lie strictly inside that guard's directory. With `directory_only`, an existing
    non-directory (a file, a dangling link, a link to a file) is refused too. UnsafePath's text says what `path`
    resolves to and why it is refused; the caller names `path` in its own words.
    """
    placement, full = _placement(path), resolved(path)
    for target in dict.fromkeys((placement, full)):
        reasons = [within.escape(target)] if within is not None else []
        reasons += [guard.refusal(target) for guard in guards]
        reason = next((r for r in reasons if r is not None), None)
        if reason is not None:
            raise UnsafePath(f"resolves to '{target}', which {reason}")
    if directory_only and os.path.lexists(placement) and not placement.is_dir():
        raise UnsafePath(f"is '{placement}', which exists and is not a directory")
    return placement


def leaves(relative: str) -> bool:
    """True when a relative path from a config is absolute or climbs out of the directory it is relative to."""
    if not relative or posixpath.isabs(relative):
        return bool(relative)
    clean = posixpath.normpath(relative)
    return clean == ".." or clean.startswith("../")


def scoped_path(root: Path, relative: str) -> Path:
    """`root/relative`, refusing any path that would leave root (vendir's ScopedPath: lexical, as vendir does)."""
    candidate = Path(os.path.normpath(root / relative))
    if not candidate.is_relative_to(Path(os.path.normpath(root))):
        msg = f"Invalid path: '{relative}' leaves '{root}'"
        raise ValueError(msg)
    return candidate
