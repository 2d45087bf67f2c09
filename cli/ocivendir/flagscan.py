"""Owns: reading a command's flags without click — the flag tables the fast paths share and the one scanner.

The fast paths (`vendir sync` in commands/vendirargs.py, `pull` in commands/pullargs.py) accept a command line only
when click would accept it and hand the command the same values; anything else (help, an unknown or malformed flag,
an argument, combined short flags, a value click would reject) makes `collect` return None and click parses it, so
click's and pflag's messages stay the only error texts. Values are named as click names the parameters.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Mapping
    from typing import Any

__all__ = [
    "GLOBAL_SWITCHES",
    "GLOBAL_VALUES",
    "REGISTRY_SWITCHES",
    "REGISTRY_VALUES",
    "ROOT_VALUES",
    "click_bool",
    "collect",
    "command_of",
]

# flag → (click parameter name, value when given); the global flags of commands/options.py that take no value
GLOBAL_SWITCHES: dict[str, tuple[str, object]] = {
    "-y": ("yes", True), "--yes": ("yes", True),
    "--no-cache": ("no_cache", True),
    "--offline": ("offline", True), "--no-offline": ("offline", False),
    "--json": ("json_output", True), "-q": ("quiet", True), "--quiet": ("quiet", True),
    "--debug": ("debug", True), "--tty": ("tty", True),
    "--color": ("color", True), "--no-color": ("color", False),
}  # fmt: skip
# flag → click parameter name; the global flags that take the next argument (or `--flag=value`)
GLOBAL_VALUES = {
    "--column": "column", "--cache-dir": "cache_dir", "--cache-max-size": "cache_max_size",
    "--max-extract-size": "max_extract_size", "--relocation-recheck": "relocation_recheck", "--timeout": "timeout",
    "--stale-if-error": "stale_if_error", "--registry-config": "registry_config", "--policy": "policy",
    "--trusted-root": "trusted_root",
}  # fmt: skip
# imgpkg's registry flags (commands/options.py `registry_options`)
REGISTRY_SWITCHES: dict[str, tuple[str, object]] = {
    "--registry-insecure": ("insecure_all", True),
    "--registry-anon": ("registry_anon", True), "--no-registry-anon": ("registry_anon", False),
}  # fmt: skip
REGISTRY_VALUES = {
    "--registry-ca-cert-path": "ca_cert_paths", "--registry-verify-certs": "verify_certs",
    "--insecure-registry": "insecure_hosts", "--registry-username": "registry_username",
    "--registry-password": "registry_password", "--registry-token": "registry_token",
    "--registry-response-header-timeout": "response_header_timeout", "--registry-retry-count": "retry_count",
}  # fmt: skip
# every flag of the root group that takes a value (commands/options.py): the fast paths leave the last two to click
ROOT_VALUES = frozenset({*GLOBAL_VALUES, *REGISTRY_VALUES, "--concurrency", "--registry-concurrency"})
# parameters click declares with multiple=True: every occurrence is kept, in order, as a tuple
_REPEATED = frozenset({"files", "directories", "column", "ca_cert_paths", "insecure_hosts"})
_BOOL_STATES = {"1": True, "true": True, "t": True, "yes": True, "y": True, "on": True,
                "0": False, "false": False, "f": False, "no": False, "n": False, "off": False}  # fmt: skip


def click_bool(value: str) -> bool:
    """A `type=bool` value as click reads it; ValueError for what this scanner leaves to click (its message)."""
    state = _BOOL_STATES.get(value.lower())
    if state is None:
        raise ValueError(value)
    return state


def _value_of(flag: str, args: list[str], position: int) -> tuple[str, str, int] | None:
    """`(flag, value, next position)` for a flag that takes a value, `--flag=value` included; None if missing."""
    name, sep, value = flag.partition("=")
    if sep:
        return (name, value, position) if name.startswith("--") else None
    if position >= len(args):
        return None
    return flag, args[position], position + 1


def collect(
    args: list[str],
    switches: Mapping[str, tuple[str, object]],
    values: Mapping[str, str],
    convert: Mapping[str, Callable[[str], object]] | None = None,
) -> dict[str, Any] | None:
    """Flag values by click parameter name (later wins, repeated ones accumulate), or None if click must parse."""
    given: dict[str, Any] = {}
    position = 0
    while position < len(args):
        arg = args[position]
        position += 1
        value: Any
        if arg in switches:
            name, value = switches[arg]
        else:
            found = _value_of(arg, args, position)
            if found is None or found[0] not in values:
                return None
            flag, value, position = found
            name = values[flag]
            if convert and name in convert:
                try:
                    value = convert[name](value)
                except ValueError:
                    return None
        if name in _REPEATED:
            value = (*given.get(name, ()), value)
        given[name] = value
    return given


def command_of(args: list[str]) -> str:
    """The subcommand of a command line (without argv[0]) as click finds it, or "" when there is none.

    The first argument that is neither a flag nor the value of a root flag that takes one (`--cache-dir X pull`:
    `pull`, not `X`); after `--`, the next argument.
    """
    position = 0
    while position < len(args):
        arg = args[position]
        if arg == "--":
            return args[position + 1] if position + 1 < len(args) else ""
        if not arg.startswith("-"):
            return arg
        position += 2 if arg in ROOT_VALUES else 1
    return ""
