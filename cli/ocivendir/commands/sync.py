"""Owns: the `sync` command's flags (click); the run itself is `commands/syncrun.py`."""

from __future__ import annotations

import click

from ocivendir.commands.options import delegate_option, global_options, registry_options
from ocivendir.commands.syncrun import SyncFlags, read_inputs, run_sync, split_values

__all__ = ["read_inputs", "split_values", "sync"]


@click.command()
@click.option(
    "-f",
    "--file",
    "files",
    multiple=True,
    metavar="FILE",
    help="Config files (repeatable, comma-separated; - for stdin).  [default: vendir.yml]",
)
@click.option("--lock-file", default="vendir.lock.yml", show_default=True, help="Lock file (/dev/null works).")
@click.option("-l", "--locked", is_flag=True, help="Use the lock's digests: no tag resolution, no tag listing.")
@click.option(
    "-d",
    "--directory",
    "directories",
    multiple=True,
    metavar="DIR[=LOCAL]",
    help="Sync only this <dir>/<content> (repeatable); =LOCAL syncs it from a local directory.",
)
@click.option("--lazy/--no-lazy", default=True, show_default=True, help="Honour lazy: true contents.")
@click.option("--chdir", metavar="DIR", help="Change to this directory first.")
@click.option(
    "--dangerous-allow-all-symlink-destinations",
    "allow_symlinks",
    is_flag=True,
    help="Allow symlinks that point outside their directory.",
)
@delegate_option
@registry_options
@global_options
@click.pass_context
def sync(
    ctx: click.Context,
    files: tuple[str, ...],
    lock_file: str,
    locked: bool,
    directories: tuple[str, ...],
    lazy: bool,
    chdir: str | None,
    allow_symlinks: bool,
) -> None:
    """Sync directories from vendir.yml, as `vendir sync` does: directories and vendir.lock.yml out.

    stdout carries vendir's blocks (the lock YAML, after `Config with overrides` / `Config with locks` under -d/-l);
    progress goes to stderr. Installed under the name `vendir`, it behaves as vendir for kapp-controller
    (`vendir sync -f - --lock-file /dev/null`). Digest-pinned content in the cache costs no registry request.

    \b
    Examples:
      ocivendir sync
      ocivendir sync -f vendir.yml --locked
      ocivendir sync -d vendor/app=../app-checkout
      vendir sync -f - --lock-file /dev/null < config.yml
    """  # fmt: skip
    from ocivendir.commands.runtime import Run  # noqa: PLC0415 - `--help` stays light

    flags = SyncFlags(files=files, lock_file=lock_file, locked=locked, directories=directories, lazy=lazy,
                      chdir=chdir, allow_symlinks=allow_symlinks)  # fmt: skip
    run_sync(flags, lambda: Run.start(ctx, vendir_quiet=True))
