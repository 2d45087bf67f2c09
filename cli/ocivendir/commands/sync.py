"""Owns: the `sync` command — vendir's flags and input handling, one engine call, vendir's output blocks."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from ocivendir.commands.options import delegate_option, global_options, registry_options
from ocivendir.errors import ConfigError, UsageError

if TYPE_CHECKING:
    from ocivendir.commands.runtime import Run
    from ocivendir.vendir.config import Config
    from ocivendir.vendir.lockfile import LockConfig

__all__ = ["read_inputs", "split_values", "sync"]

DEFAULT_FILE = "vendir.yml"
DEFAULT_HINT = "Did you name your configuration file something different than 'vendir.yml', e.g. wrong extension?"


def split_values(values: tuple[str, ...]) -> list[str]:
    """Repeatable, comma-separated flag values (pflag's StringSlice)."""
    return [item for value in values for item in value.split(",") if item]


def read_inputs(files: list[str], stdin: Any) -> list[tuple[str, bytes]]:  # noqa: ANN401 - a text stream
    """`(name, bytes)` for each `-f` input, `-` being stdin (read as bytes), with vendir's read errors."""
    inputs = []
    for name in files:
        if name == "-":
            try:
                inputs.append(("-", getattr(stdin, "buffer", stdin).read()))
            except OSError as exc:
                raise ConfigError(f"Reading config from stdin: {exc}") from None
            continue
        try:
            inputs.append((name, Path(name).read_bytes()))
        except OSError as exc:
            hint = DEFAULT_HINT if files == [DEFAULT_FILE] else None
            raise ConfigError(f"Reading config '{name}': open {name}: {(exc.strerror or str(exc)).lower()}",
                              hint=hint) from None  # fmt: skip
    return inputs


def _read_lock(path: Path, locked: bool) -> Any:  # noqa: ANN401 - LockConfig | None
    from ocivendir.vendir.lockfile import parse_lock  # noqa: PLC0415

    try:
        text = path.read_bytes()
    except OSError as exc:
        if locked:
            raise ConfigError(f"Reading lock config '{path}': {exc.strerror or exc}") from None
        return None
    try:
        return parse_lock(text, str(path))
    except ConfigError:
        if locked:
            raise
        return None


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
@click.option("-y", "--yes", is_flag=True, hidden=True)
@click.option("--column", multiple=True, hidden=True)
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
    yes: bool,
    column: tuple[str, ...],
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
    from ocivendir.commands.runtime import Run, open_content  # noqa: PLC0415 - `--help` stays light
    from ocivendir.engine.sync import SyncOptions  # noqa: PLC0415
    from ocivendir.engine.sync import sync as run_sync  # noqa: PLC0415
    from ocivendir.vendir.config import parse_stream  # noqa: PLC0415

    del yes, column  # accepted for vendir compatibility, no effect
    _chdir(chdir)
    run = Run.start(ctx, vendir_quiet=True)
    stream = parse_stream(read_inputs(split_values(files) or [DEFAULT_FILE], sys.stdin))
    config, has_local, previous, tags = _prepare(run, stream.config, split_values(directories), Path(lock_file), locked)
    settings = run.settings
    options = SyncOptions(stream=stream, cwd=Path.cwd(), previous_lock=previous, locked=locked, lazy=lazy,
                          partial=bool(directories), allow_all_symlinks=allow_symlinks, umask=settings.umask,
                          relocation_recheck=settings.relocation_recheck,
                          delegate_vendir=settings.delegate_vendir)  # fmt: skip
    with open_content(run, target=Path.cwd() / ".ocivendir") as (content, lock_dir):
        outcome = run_sync(options, config, content, lock_dir, tags)
        requests, warnings = content.requests, tuple(content.warnings)
    lock = outcome.lock.merged_into(previous) if directories and previous is not None else outcome.lock
    _finish(run, lock, lock_file, has_local)
    from ocivendir.results import SyncResult  # noqa: PLC0415

    result = SyncResult(lock=lock.dump().decode(), fetched=outcome.fetched, skipped=outcome.skipped,
                        requests=requests, warnings=warnings)  # fmt: skip
    run.output.envelope("sync", "ok", result)


def _chdir(chdir: str | None) -> None:
    if not chdir:
        return
    try:
        os.chdir(chdir)
    except OSError as exc:
        raise ConfigError(f"Running chdir: chdir {chdir}: {(exc.strerror or str(exc)).lower()}") from None


def _prepare(run: Run, config: Config, directories: list[str], lock_path: Path, locked: bool) -> tuple[
    Config, bool, LockConfig | None, dict[tuple[str, str], str | None]
]:  # fmt: skip
    """Apply `-d` and `--locked` (printing vendir's `Config with …` blocks); read the previous lock."""
    from ocivendir.commands.overrides import apply_overrides  # noqa: PLC0415
    from ocivendir.engine.sync import apply_lock  # noqa: PLC0415
    from ocivendir.goyaml import emit  # noqa: PLC0415

    has_local = False
    if directories:
        config, has_local = apply_overrides(config, directories)
        run.output.block(emit.dump(config.to_go()).decode())
    previous = _read_lock(lock_path, locked)
    tags: dict[tuple[str, str], str | None] = {}
    if locked:
        if previous is None:
            raise UsageError(f"Reading lock config '{lock_path}': no lock")
        config, tags = apply_lock(config, previous)
        run.output.block(emit.dump(config.to_go()).decode())
    return config, has_local, previous, tags


def _finish(run: Run, lock: LockConfig, lock_file: str, has_local: bool) -> None:
    """Print the lock (vendir's last block) and write it when its bytes changed, unless `=local` was used."""
    from ocivendir.fs.swap import write_if_changed  # noqa: PLC0415

    run.output.block(lock.dump().decode())
    if has_local:
        run.output.line(f"Lock config is not saved to '{lock_file}' due to command line overrides")
    else:
        write_if_changed(Path(lock_file), lock.dump())
    run.output.line("")
    run.output.line("Succeeded")
