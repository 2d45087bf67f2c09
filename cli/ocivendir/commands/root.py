"""Owns: the root click group (`--version`, the global flags, the subcommands) and click's exceptions → exit codes.

Imported by `main()` only when no fast path applies (`commands/vendirargs.py`).
"""

from __future__ import annotations

from typing import Any

import click

from ocivendir import version_line
from ocivendir.commands.ending import fail, go_mode
from ocivendir.commands.goflags import go_error_message
from ocivendir.commands.options import global_options, registry_options

__all__ = ["cli", "run_click"]


def _print_version(ctx: click.Context, _param: click.Parameter, value: bool) -> None:
    if value and not ctx.resilient_parsing:
        click.echo(version_line(str((ctx.obj or {}).get("prog", "ocivendir"))))
        ctx.exit(0)


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 110})
@click.option("--version", is_flag=True, expose_value=False, is_eager=True, callback=_print_version,
              help="Print the version and exit.")  # fmt: skip
@registry_options
@global_options
@click.pass_context
def cli(ctx: click.Context) -> None:
    """Sync configuration out of OCI registries (images and Carvel imgpkg bundles) into directories.

    Content is fetched once, verified and served from a content-addressed cache; digest-pinned content costs no
    registry request after the first sync.
    """
    ctx.meta["ocivendir.prog"] = str((ctx.obj or {}).get("prog", "ocivendir"))


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 110})
@click.option("--version", is_flag=True, expose_value=False, is_eager=True, callback=_print_version,
              help="Print the version and exit.")  # fmt: skip
@click.pass_context
def imgpkg_cli(ctx: click.Context) -> None:
    """The root of imgpkg mode (argv[0] named `imgpkg`): `pull` served by ocivendir, named and framed as imgpkg's."""
    ctx.meta["ocivendir.prog"] = "imgpkg"


def _register() -> None:
    from ocivendir.commands import cache, cacheio, pull, server, sync, tools, verify, version  # noqa: PLC0415 - avoids an import cycle

    for command in (
        cache.cache,
        pull.pull,
        server.server,
        sync.sync,
        tools.tools,
        verify.verify_relocation,
        version.version,
    ):
        cli.add_command(command)
    cache.cache.add_command(cacheio.cache_import)
    cache.cache.add_command(cacheio.cache_export)
    for command in (pull.pull, version.version):
        imgpkg_cli.add_command(command)


_register()


def run_click(args: list[str], state: dict[str, Any]) -> int:
    """Parse and run with click; its exceptions become exit codes here, every other one propagates to main()."""
    prog_name = str(state["prog"])
    root = imgpkg_cli if prog_name == "imgpkg" else cli
    try:
        result = root.main(args=args, prog_name=prog_name, standalone_mode=False, obj=state)
    except click.exceptions.Exit as exc:
        return exc.exit_code
    except click.exceptions.Abort:
        return fail(state, KeyboardInterrupt(), "aborted", "Aborted", None, 1)
    except click.ClickException as exc:
        return fail(state, exc, "usage", go_error_message(exc, prog_name), None, 2)
    code = result if isinstance(result, int) else 0
    return (1 if code else 0) if go_mode(state) else code
