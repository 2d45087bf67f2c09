"""Owns: the `version` command."""

from __future__ import annotations

import click

from ocivendir import version_line
from ocivendir.commands.options import global_options

__all__ = ["version"]


@click.command()
@global_options
@click.pass_context
def version(ctx: click.Context) -> None:
    """Print the version (vendir mode: vendir's line with ocivendir's version as build metadata)."""
    click.echo(version_line(str(ctx.find_root().meta.get("ocivendir.prog", "ocivendir"))))
