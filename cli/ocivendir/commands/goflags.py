"""Owns: accepting Go's flag syntax on top of click (vendir-compat §7.3) and Go's flag error texts.

`--flag=<bool>` for boolean flags (strconv.ParseBool's set) and `-f=value` for short options become what click
understands; click's parse errors become pflag's messages (`unknown flag: --x`).
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    import click

__all__ = ["go_error_message", "normalize"]

_TRUE = frozenset({"1", "t", "T", "true", "TRUE", "True"})
_FALSE = frozenset({"0", "f", "F", "false", "FALSE", "False"})
BOOL_FLAGS = frozenset({
    "--locked", "-l", "--lazy", "--dangerous-allow-all-symlink-destinations", "--tty", "--color", "--json", "--quiet",
    "-q", "--debug", "--no-cache", "--offline", "--recursive", "-r", "--each-image", "--all", "--dry-run",
    "--registry-insecure", "--registry-anon", "--yes", "-y",
})  # fmt: skip
NEGATABLE = frozenset({"--lazy", "--color", "--offline", "--registry-anon"})  # `--x=false` must beat a variable
_ASCII_LETTERS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")


def normalize(args: list[str]) -> list[str]:
    """Rewrite Go-style flags into click's forms; everything after `--` is left alone."""
    out: list[str] = []
    for position, arg in enumerate(args):
        if arg == "--":
            return out + args[position:]
        name, sep, value = arg.partition("=")
        if sep and name in BOOL_FLAGS and (value in _TRUE or value in _FALSE):
            if value in _TRUE:
                out.append(name)
            elif name in NEGATABLE:
                out.append(f"--no-{name[2:]}")
            continue
        if arg[:1] == "-" and arg[1:2] in _ASCII_LETTERS and arg[2:3] == "=":  # `-f=value`
            out.extend([arg[:2], arg[3:]])
            continue
        out.append(arg)
    return out


def go_error_message(exc: click.ClickException, prog: str) -> str:
    """The texts of pflag for unknown flags and extra arguments; click's message otherwise."""
    import re  # noqa: PLC0415 - only on the click path

    import click  # noqa: PLC0415

    if isinstance(exc, click.NoSuchOption):
        name = exc.option_name
        if name.startswith("--"):
            return f"unknown flag: {name}"
        return f"unknown shorthand flag: '{name[1:2]}' in {name}"
    message = exc.format_message()
    extra = re.match(r"Got unexpected extra arguments? \((.*)\)", message)
    if extra:
        ctx = getattr(exc, "ctx", None)
        command = ctx.command_path if isinstance(ctx, click.Context) else prog
        return f"command '{command}' does not accept extra arguments '{extra.group(1)}'"
    return message
