"""Owns: the `version` command."""

from __future__ import annotations

import click

from ocivendir.commands.options import global_options

__all__ = ["version"]


@click.command()
@global_options
@click.pass_context
def version(ctx: click.Context) -> None:
    """Print the version (vendir mode: vendir's line with ocivendir's version as build metadata)."""
    from ocivendir.commands import version_line  # noqa: PLC0415 - the root module imports this one

    click.echo(version_line(str(ctx.find_root().meta.get("ocivendir.prog", "ocivendir"))))
