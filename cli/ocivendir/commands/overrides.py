"""Owns: `sync -d <dir>/<content>[=<local dir>]` — selecting contents and overriding them with local directories."""

from __future__ import annotations

import os
import posixpath
from dataclasses import replace

from ocivendir.errors import ConfigError
from ocivendir.vendir.config import Config, Content, Directory, validate

__all__ = ["apply_overrides"]


def _local(content: Content, local: str) -> Content:
    return replace(
        content, source_type="directory", source={"path": os.path.expanduser(local)},  # noqa: PTH111
        new_root_path="", permissions=None,
    )  # fmt: skip


def apply_overrides(config: Config, values: list[str]) -> tuple[Config, bool]:
    """The config reduced to the matched contents (and re-validated); True if any `=local` was given."""
    chosen: dict[tuple[int, int], Content] = {}
    has_local = False
    for value in values:
        wanted, sep, local = value.partition("=")
        matches = [
            (i, j) for i, d in enumerate(config.directories) for j, c in enumerate(d.contents)
            if posixpath.join(d.path, c.path) == posixpath.normpath(wanted)
        ]  # fmt: skip
        if len(matches) != 1:
            amount = "did not match any" if not matches else "matched multiple"
            if sep:
                raise ConfigError(f"Overriding '{wanted}' with local directory: Expected to match exactly one "
                                  f"directory, but {amount}")  # fmt: skip
            raise ConfigError(f"Expected to match path '{wanted}' once, but {amount}")
        i, j = matches[0]
        content = config.directories[i].contents[j]
        if sep:
            has_local = True
            content = _local(content, local)
        chosen[(i, j)] = content
    directories = []
    for i, directory in enumerate(config.directories):
        contents = tuple(chosen[(i, j)] for j in range(len(directory.contents)) if (i, j) in chosen)
        if contents:
            directories.append(Directory(path=directory.path, contents=contents, permissions=directory.permissions))
    reduced = replace(config, directories=tuple(directories))
    validate(reduced, [])
    return reduced, has_local
