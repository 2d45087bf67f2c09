"""Owns: one `sync` run from its parsed flags — inputs, `-d` and `--locked`, the engine call, vendir's output blocks.

Shared by the click command (`commands/sync.py`) and vendir mode's click-free fast path (`commands/vendirargs.py`),
so kapp-controller's `vendir sync -f - --lock-file /dev/null` never imports click.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass

from ocivendir.errors import ConfigError, UsageError, os_reason
from ocivendir.vendir.memos import dumped, parsed  # at import: the resident server preloads this module with it

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

    from ocivendir.commands.runtime import Run
    from ocivendir.vendir.config import Config
    from ocivendir.vendir.lockfile import LockConfig

__all__ = ["DEFAULT_FILE", "SyncFlags", "read_inputs", "run_sync", "split_values"]

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
                raise ConfigError(f"Reading config from stdin: {os_reason(exc)}") from None
            continue
        try:
            with open(name, "rb") as handle:
                inputs.append((name, handle.read()))
        except OSError as exc:
            hint = DEFAULT_HINT if files == [DEFAULT_FILE] else None
            raise ConfigError(f"Reading config '{name}': open {name}: {(exc.strerror or str(exc)).lower()}",
                              hint=hint) from None  # fmt: skip
    return inputs


def _read_lock(path: str, locked: bool) -> Any:  # noqa: ANN401 - LockConfig | None
    from ocivendir.vendir.lockfile import parse_lock  # noqa: PLC0415

    try:
        with open(path, "rb") as handle:
            text = handle.read()
    except OSError as exc:
        if locked:
            raise ConfigError(f"Reading lock config '{path}': {exc.strerror or exc}") from None
        return None
    if not text and not locked:  # `--lock-file /dev/null` (kapp-controller): no lock, nothing to parse
        return None
    try:
        return parse_lock(text, path)
    except ConfigError:
        if locked:
            raise
        return None


@dataclass(frozen=True, kw_only=True)
class SyncFlags:
    """`sync`'s own flags, as given (click's parameter names and defaults)."""

    files: tuple[str, ...] = ()
    lock_file: str = "vendir.lock.yml"
    locked: bool = False
    directories: tuple[str, ...] = ()
    lazy: bool = True
    chdir: str | None = None
    allow_symlinks: bool = False


def run_sync(flags: SyncFlags, start: Callable[[], Run]) -> None:
    """Sync as vendir does; `start` makes the Run once the working directory is chosen."""
    from ocivendir.commands.runtime import open_content  # noqa: PLC0415
    from ocivendir.engine.placement import check_placement, guards_for  # noqa: PLC0415
    from ocivendir.engine.sync import SyncOptions  # noqa: PLC0415
    from ocivendir.engine.sync import sync as engine_sync  # noqa: PLC0415
    from ocivendir.fs.paths import pure  # noqa: PLC0415

    _chdir(flags.chdir)
    run = start()
    files, directories, locked = split_values(flags.files), split_values(flags.directories), flags.locked
    stream = parsed(read_inputs(files or [DEFAULT_FILE], sys.stdin))
    config, has_local, previous, tags = _prepare(run, stream.config, directories, pure(flags.lock_file), locked)
    settings = run.settings
    options = SyncOptions(stream=stream, cwd=os.getcwd(), previous_lock=previous, locked=locked, lazy=flags.lazy,
                          partial=bool(directories), allow_all_symlinks=flags.allow_symlinks, umask=settings.umask,
                          relocation_recheck=settings.relocation_recheck, delegate_vendir=settings.delegate_vendir,
                          guards=tuple(guards_for(files or [DEFAULT_FILE], settings.cache_dir)))  # fmt: skip
    check_placement(config, options.cwd, options.guards, partial=options.partial)  # before anything is created
    with open_content(run, target=os.path.join(options.cwd, ".ocivendir")) as (content, lock_dir):
        outcome = engine_sync(options, config, content, lock_dir, tags)
        requests, warnings = content.requests, tuple(content.warnings)
    lock = outcome.lock.merged_into(previous) if directories and previous is not None else outcome.lock
    lock_bytes = dumped(lock)  # once: the block, the file and the result all carry these bytes
    _finish(run, lock_bytes, flags.lock_file, has_local)
    from ocivendir.results import SyncResult  # noqa: PLC0415

    result = SyncResult(lock=lock_bytes.decode(), fetched=outcome.fetched, skipped=outcome.skipped,
                        requests=requests, warnings=warnings)  # fmt: skip
    run.output.envelope("sync", "ok", result)


def _chdir(chdir: str | None) -> None:
    if not chdir:
        return
    try:
        os.chdir(chdir)
    except OSError as exc:
        raise ConfigError(f"Running chdir: chdir {chdir}: {(exc.strerror or str(exc)).lower()}") from None


def _prepare(run: Run, config: Config, directories: list[str], lock_path: str, locked: bool) -> tuple[
    Config, bool, LockConfig | None, dict[tuple[str, str], str | None]
]:  # fmt: skip
    """Apply `-d` and `--locked` (printing vendir's `Config with …` blocks); read the previous lock."""
    from ocivendir.engine.sync import apply_lock  # noqa: PLC0415
    from ocivendir.goyaml import emit  # noqa: PLC0415

    has_local = False
    if directories:
        from ocivendir.commands.overrides import apply_overrides  # noqa: PLC0415 - only with -d

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


def _finish(run: Run, lock: bytes, lock_file: str, has_local: bool) -> None:
    """Print the lock's bytes (vendir's last block) and write them when they changed, unless `=local` was used."""
    from ocivendir.fs.swap import write_if_changed  # noqa: PLC0415

    run.output.block(lock.decode())
    if has_local:
        run.output.line(f"Lock config is not saved to '{lock_file}' due to command line overrides")
    else:
        try:
            write_if_changed(lock_file, lock)
        except OSError as exc:
            from ocivendir.errors import SyncError  # noqa: PLC0415

            raise SyncError(f"Writing lock config '{lock_file}': {(exc.strerror or str(exc)).lower()}") from None
    run.output.line("")
    run.output.line("Succeeded")
