"""Owns: where a sync may write — every directory and content path checked, before anything is created.

vendir validates only the literal strings (`/`, `.`, `..`, empty). Here each path is also checked as it resolves
(`fs/paths.py`): a directory path must stay strictly inside the working directory and must not be or contain the
directory of an input file or the cache, nor lie inside the cache; a content path must stay inside its directory
(vendir's ScopedPath rule). kapp-controller's `path: "0"` with a content `path: .` is an ordinary case.
"""

from __future__ import annotations

import os

from ocivendir.errors import ConfigError
from ocivendir.fs.paths import Guard, UnsafePath, absolute, leaves, pure, replace_target, split
from ocivendir.vendir.config import Config, Directory

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence

__all__ = ["check_placement", "guards_for"]

_WHERE = "Validating config: Validating directory '{path}' ({index})"


def guards_for(inputs: Sequence[str], cache_root: str | os.PathLike[str] | None) -> list[Guard]:
    """What a sync must spare besides the working directory: its input files' directories and the cache."""
    guards = [Guard.of(split(absolute(name))[0], f"the directory of '{name}'")
              for name in inputs if name != "-"]  # fmt: skip
    if cache_root is not None:
        guards.append(Guard.of(cache_root, "the cache", inside=True))
    return guards


def _check_contents(directory: Directory, where: str, target: str, *, each: bool) -> None:
    """Content paths stay inside their directory; under `-d` each content is a target of its own, checked too."""
    for index, content in enumerate(directory.contents):
        inner = f"{where}: Validating directory contents '{content.path}' ({index})"
        if leaves(content.path):
            msg = f"{inner}: Invalid path: '{content.path}' (expected a relative path inside '{directory.path}')"
            raise ConfigError(msg)
        if each and content.path != ".":
            try:
                replace_target(
                    pure(os.path.join(target, content.path)),
                    [],
                    within=Guard.of(target, f"directory '{directory.path}'"),
                )
            except UnsafePath as exc:
                raise ConfigError(f"{inner}: Invalid path: '{content.path}' {exc}") from None


def check_placement(
    config: Config, cwd: str | os.PathLike[str], guards: Sequence[Guard], *, partial: bool = False
) -> dict[str, str]:
    """Each directory's target (resolved parent + name), once every path is known to be safe; else ConfigError."""
    targets: dict[str, str] = {}
    root = Guard.of(cwd, "the working directory")
    for index, directory in enumerate(config.directories):
        where = _WHERE.format(path=directory.path, index=index)
        if leaves(directory.path):
            msg = f"{where}: Invalid path: '{directory.path}' (expected a relative path inside the working directory)"
            raise ConfigError(msg)
        try:
            target = replace_target(pure(os.path.join(cwd, directory.path)), guards, within=root)
        except UnsafePath as exc:
            raise ConfigError(f"{where}: Invalid path: '{directory.path}' {exc}") from None
        _check_contents(directory, where, target, each=partial)
        targets[directory.path] = target
    return targets
