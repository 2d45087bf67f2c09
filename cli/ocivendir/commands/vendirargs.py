"""Owns: vendir mode's fast path — `vendir sync …` and `version` read without click (vendir-compat §7).

kapp-controller runs `vendir sync -f - --lock-file /dev/null` for every App every sync period; importing click costs
more than the warm sync itself. This parser knows `sync`'s flags and the plain global flags, named as click names
them; anything else (help, an unknown or malformed flag, an argument, combined short flags, a flag click converts)
returns None and the click tree parses it, so click's and pflag's messages stay the only error texts.
"""

from __future__ import annotations

from ocivendir.commands.syncrun import SyncFlags

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

__all__ = ["parse_sync"]

# flag → (click parameter name, value when given; None = takes the next argument)
_SWITCHES = {
    "-l": ("locked", True), "--locked": ("locked", True),
    "--lazy": ("lazy", True), "--no-lazy": ("lazy", False),
    "--dangerous-allow-all-symlink-destinations": ("allow_symlinks", True),
    "-y": ("yes", True), "--yes": ("yes", True),
    "--no-cache": ("no_cache", True),
    "--offline": ("offline", True), "--no-offline": ("offline", False),
    "--json": ("json_output", True), "-q": ("quiet", True), "--quiet": ("quiet", True),
    "--debug": ("debug", True), "--tty": ("tty", True),
    "--color": ("color", True), "--no-color": ("color", False),
}  # fmt: skip
_VALUES = {
    "-f": "files", "--file": "files", "--lock-file": "lock_file", "-d": "directories", "--directory": "directories",
    "--chdir": "chdir", "--column": "column", "--delegate-vendir": "delegate_vendir",
    "--cache-dir": "cache_dir", "--cache-max-size": "cache_max_size", "--max-extract-size": "max_extract_size",
    "--relocation-recheck": "relocation_recheck", "--timeout": "timeout", "--stale-if-error": "stale_if_error",
    "--registry-config": "registry_config",
}  # fmt: skip
_REPEATED = frozenset({"files", "directories", "column"})


def _collect(args: list[str]) -> dict[str, Any] | None:
    """Flag values by click parameter name (later wins, repeated ones accumulate), or None if not ours."""
    given: dict[str, Any] = {}
    position = 0
    while position < len(args):
        arg = args[position]
        position += 1
        value: Any
        if arg in _SWITCHES:
            name, value = _SWITCHES[arg]
        elif arg in _VALUES or (arg.startswith("--") and arg.partition("=")[0] in _VALUES and "=" in arg):
            flag, sep, value = arg.partition("=")
            if not sep:
                if position >= len(args):
                    return None
                value = args[position]
                position += 1
            name = _VALUES[flag]
        else:
            return None
        if name in _REPEATED:
            previous = given.get(name, ())
            value = (*previous, value) if isinstance(previous, tuple) else (value,)
        given[name] = value
    return given


def parse_sync(args: list[str]) -> tuple[SyncFlags, dict[str, Any]] | None:
    """`sync`'s own flags and the global flags given, or None when click must parse these arguments."""
    if not args or args[0] != "sync":
        return None
    given = _collect(args[1:])
    if given is None:
        return None
    flags = SyncFlags(
        files=given.pop("files", ()),
        lock_file=given.pop("lock_file", "vendir.lock.yml"),
        locked=given.pop("locked", False),
        directories=given.pop("directories", ()),
        lazy=given.pop("lazy", True),
        chdir=given.pop("chdir", None),
        allow_symlinks=given.pop("allow_symlinks", False),
    )
    given.pop("yes", None)
    given.pop("column", None)
    return flags, given
