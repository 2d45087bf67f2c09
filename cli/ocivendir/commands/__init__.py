"""Owns: the root click group, vendir mode (argv[0] named `vendir`), `--version`, and `main()`.

The single place where exceptions become `<prog>: Error: …` and exit codes.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, NoReturn

import click

from ocivendir import VENDIR_COMPAT_VERSION, __version__
from ocivendir.commands.options import global_options, registry_options
from ocivendir.errors import OcivendirError

__all__ = ["cli", "main", "version_line"]


def version_line(vendir_mode: bool) -> str:
    """`vendir version 0.41.0+ocivendir.<ver>` in vendir mode, else `ocivendir <ver>`."""
    if vendir_mode:
        return f"vendir version {VENDIR_COMPAT_VERSION}+ocivendir.{__version__}"
    return f"ocivendir {__version__}"


def _print_version(ctx: click.Context, _param: click.Parameter, value: bool) -> None:
    if value and not ctx.resilient_parsing:
        click.echo(version_line(bool((ctx.obj or {}).get("vendir_mode"))))
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
    ctx.meta["ocivendir.vendir_mode"] = bool((ctx.obj or {}).get("vendir_mode"))


def _register() -> None:
    from ocivendir.commands import cache, pull, sync, tools, verify, version  # noqa: PLC0415 - avoids an import cycle

    for command in (cache.cache, pull.pull, sync.sync, tools.tools, verify.verify_relocation, version.version):
        cli.add_command(command)


_register()


def _fail(state: dict[str, Any], exc: BaseException, code: str, message: str, hint: str | None, exit_code: int) -> int:
    import traceback  # noqa: PLC0415 - only on failure

    from ocivendir.output import Output, OutputMode  # noqa: PLC0415

    vendir_mode = bool(state.get("vendir_mode"))
    mode = OutputMode(prog="vendir" if vendir_mode else "ocivendir", json=bool(state.get("json")))
    tb = "".join(traceback.format_exception(exc)) if state.get("debug") else None
    Output(mode).error(str(state.get("command", "")), code, message, hint, tb)
    return (1 if exit_code else 0) if vendir_mode else exit_code


def main(argv: list[str] | None = None, prog: str | None = None) -> NoReturn:
    """Run the CLI and exit with ocivendir's codes (vendir mode: 0 or 1)."""
    from ocivendir.commands.goflags import go_error_message, normalize  # noqa: PLC0415 - avoids an import cycle

    args = normalize(sys.argv[1:] if argv is None else list(argv))
    vendir_mode = Path(prog or sys.argv[0]).name == "vendir"
    state: dict[str, Any] = {
        "vendir_mode": vendir_mode,
        "json": "--json" in args,
        "debug": "--debug" in args,
        "command": next((a for a in args if not a.startswith("-")), ""),
    }
    prog_name = "vendir" if vendir_mode else "ocivendir"
    try:
        result = cli.main(args=args, prog_name=prog_name, standalone_mode=False, obj=state)
    except click.exceptions.Exit as exc:
        sys.exit(exc.exit_code)
    except click.exceptions.Abort:
        sys.exit(_fail(state, KeyboardInterrupt(), "aborted", "Aborted", None, 1))
    except click.ClickException as exc:
        sys.exit(_fail(state, exc, "usage", go_error_message(exc, prog_name), None, 2))
    except OcivendirError as exc:
        sys.exit(_fail(state, exc, exc.code, exc.message, exc.hint, exc.exit_code))
    except KeyboardInterrupt as exc:
        sys.exit(_fail(state, exc, "interrupted", "Interrupted", None, 130))
    except OSError as exc:
        sys.exit(_fail(state, exc, "os-error", str(exc), None, 1))
    except Exception as exc:  # noqa: BLE001 - the one place every failure becomes a message and an exit code
        hint = "run again with --debug for a traceback"
        sys.exit(_fail(state, exc, "internal-error", f"{type(exc).__name__}: {exc}", hint, 1))
    code = result if isinstance(result, int) else 0
    sys.exit((1 if code else 0) if vendir_mode else code)
