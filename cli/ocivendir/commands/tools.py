"""Owns: vendir's `tools` group, which ocivendir answers with a clear refusal."""

from __future__ import annotations

import click

from ocivendir.errors import OcivendirError

__all__ = ["tools"]


@click.group(hidden=True)
def tools() -> None:
    """Vendir's helper tools (not supported by ocivendir)."""


@tools.command("sort-semver", context_settings={"ignore_unknown_options": True, "allow_extra_args": True})
def sort_semver() -> None:
    """Not supported by ocivendir."""
    raise OcivendirError("not supported by ocivendir")
