"""Owns: `pull`'s fast path — `pull -b|-i|--lock REF -o DIR …` read without click, in ocivendir and imgpkg modes.

Importing click (and with it inspect and typing) costs a warm `pull -b REF@sha256:…` more than the pull itself. This
parser knows `pull`'s own flags, the global flags and imgpkg's registry flags given after `pull`, named as click names
them, through the scanner and tables shared with vendir mode (flagscan.py). Anything else — help, an unknown
or malformed flag, an argument, a flag before `pull`, a value click would reject — returns None and the click tree
parses it, so its messages and exit codes stay the only ones.
"""

from __future__ import annotations

from ocivendir.commands.pullrun import PullFlags
from ocivendir.flagscan import (
    GLOBAL_SWITCHES,
    GLOBAL_VALUES,
    REGISTRY_SWITCHES,
    REGISTRY_VALUES,
    click_bool,
    collect,
)

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

__all__ = ["parse_pull"]

_SWITCHES = {
    **GLOBAL_SWITCHES,
    **REGISTRY_SWITCHES,
    "-v": ("verbose", True), "--verbose": ("verbose", True),
    "-r": ("recursive", True), "--recursive": ("recursive", True),
}  # fmt: skip
_VALUES = {
    **GLOBAL_VALUES,
    **REGISTRY_VALUES,
    "--concurrency": "concurrency", "--registry-concurrency": "registry_concurrency",
    "-b": "bundle", "--bundle": "bundle", "-i": "image", "--image": "image", "--lock": "lock",
    "-o": "output", "--output": "output", "--image-is-bundle-check": "image_is_bundle_check",
}  # fmt: skip
# click's conversions of typed options (type=int: int(value); type=bool: click's words)
_CONVERT: dict[str, Callable[[str], object]] = {
    "concurrency": int, "registry_concurrency": int, "retry_count": int,
    "verify_certs": click_bool, "image_is_bundle_check": click_bool,
}  # fmt: skip


def parse_pull(args: list[str]) -> tuple[PullFlags, dict[str, Any]] | None:
    """`pull`'s own flags and the global and registry flags given, or None when click must parse these arguments."""
    if not args or args[0] != "pull":
        return None
    given = collect(args[1:], _SWITCHES, _VALUES, _CONVERT)
    if given is None:
        return None
    flags = PullFlags(
        bundle=given.pop("bundle", None),
        image=given.pop("image", None),
        lock=given.pop("lock", None),
        output=given.pop("output", None),
        recursive=given.pop("recursive", False),
        image_is_bundle_check=given.pop("image_is_bundle_check", True),
    )
    return flags, given
