"""Owns: vendir mode's fast path — `vendir sync …` and `version` read without click (vendir-compat §7).

kapp-controller runs `vendir sync -f - --lock-file /dev/null` for every App every sync period; importing click costs
more than the warm sync itself. This parser knows `sync`'s flags and the plain global flags, named as click names
them, through the scanner and tables shared with `pull` (flagscan.py); anything else (help, an unknown or
malformed flag, an argument, combined short flags, a flag click converts) returns None and the click tree parses it,
so click's and pflag's messages stay the only error texts.
"""

from __future__ import annotations

from ocivendir.commands.syncrun import SyncFlags
from ocivendir.flagscan import GLOBAL_SWITCHES, GLOBAL_VALUES, collect

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

__all__ = ["parse_sync"]

_SWITCHES = {
    **GLOBAL_SWITCHES,
    "-l": ("locked", True), "--locked": ("locked", True),
    "--lazy": ("lazy", True), "--no-lazy": ("lazy", False),
    "--dangerous-allow-all-symlink-destinations": ("allow_symlinks", True),
}  # fmt: skip
_VALUES = {
    **GLOBAL_VALUES,
    "-f": "files", "--file": "files", "--lock-file": "lock_file", "-d": "directories", "--directory": "directories",
    "--chdir": "chdir", "--delegate-vendir": "delegate_vendir",
}  # fmt: skip


def parse_sync(args: list[str]) -> tuple[SyncFlags, dict[str, Any]] | None:
    """`sync`'s own flags and the global flags given, or None when click must parse these arguments."""
    if not args or args[0] != "sync":
        return None
    given = collect(args[1:], _SWITCHES, _VALUES)
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
    return flags, given
