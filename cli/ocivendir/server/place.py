"""Owns: where the server's socket lives and whether that place may be trusted (tmux's checks).

The directory is `$OCIVENDIR_SERVER_DIR`, else `$XDG_RUNTIME_DIR/ocivendir`, else `<tmp>/ocivendir-<euid>` (tmp being
an absolute `$TMPDIR`, else `/tmp`). It must be a real directory (a symlink is never followed), owned by the
effective user, with mode 0700; anything else makes it unusable, and a call then runs in-process. The native client
(`client/`) computes the same place by the same rules.
"""

from __future__ import annotations

import os
import stat

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping

__all__ = [
    "SUN_PATH_MAX",
    "Unusable",
    "check_dir",
    "ensure_dir",
    "lock_path",
    "manages_server",
    "server_dir",
    "socket_path",
    "start_path",
    "wanted",
]

_MODE = 0o700
SUN_PATH_MAX = 107  # sizeof(sockaddr_un.sun_path) on Linux, less the terminating NUL


class Unusable(Exception):
    """The server directory or socket cannot be trusted or used; the reason is the message."""


def wanted(argv: list[str], environ: Mapping[str, str] | None = None) -> bool:
    """Whether this call goes through a server: `OCIVENDIR_SERVER` on, or `auto` (unset) and invoked as `vendir`.

    Any other value of the switch means in-process, where the settings report it; `server …` commands manage the
    server themselves and never go through one. (Read here, before Settings exist: the client decides first.)
    """
    mode = (os.environ if environ is None else environ).get("OCIVENDIR_SERVER", "") or "auto"
    if mode not in {"on", "auto"}:
        return False
    if not argv or not (mode == "on" or os.path.basename(argv[0]) == "vendir"):
        return False
    return not manages_server(argv)


def manages_server(argv: list[str]) -> bool:
    """Whether `argv` is a `server …` command, which runs where it was typed and never in a worker.

    In a worker it would start a server from the caller's environment, or make the worker one.
    """
    if len(argv) > 1 and not argv[1].startswith("-"):  # the command itself (`sync`), as click reads it
        return argv[1] == "server"
    from ocivendir.flagscan import command_of  # noqa: PLC0415 - tables and one function, for a leading flag

    return command_of(argv[1:]) == "server"


def server_dir(environ: Mapping[str, str] | None = None) -> str:
    """The socket directory from the environment (absolute), or raise Unusable."""
    environ = os.environ if environ is None else environ
    given = environ.get("OCIVENDIR_SERVER_DIR", "")
    if given:
        if not given.startswith("/"):
            raise Unusable(f"OCIVENDIR_SERVER_DIR is not an absolute path: {given}")
        return given
    runtime = environ.get("XDG_RUNTIME_DIR", "")
    if runtime.startswith("/"):
        return os.path.join(runtime, "ocivendir")
    tmp = environ.get("TMPDIR", "")
    return os.path.join(tmp if tmp.startswith("/") else "/tmp", f"ocivendir-{os.geteuid()}")  # noqa: S108 - checked as tmux does


def check_dir(path: str) -> None:
    """Raise FileNotFoundError if `path` is missing, Unusable unless it is our own 0700 directory (not a symlink)."""
    info = os.lstat(path)
    if not stat.S_ISDIR(info.st_mode):
        raise Unusable(f"{path} is not a directory")
    if info.st_uid != os.geteuid():
        raise Unusable(f"{path} is owned by uid {info.st_uid}, not {os.geteuid()}")
    if stat.S_IMODE(info.st_mode) != _MODE:
        raise Unusable(f"{path} has mode {stat.S_IMODE(info.st_mode):04o}, not 0700")


def ensure_dir(path: str) -> None:
    """Create the directory (mode 0700, its parent must exist) when missing, then check it."""
    try:
        os.mkdir(path, _MODE)
    except FileExistsError:
        pass
    check_dir(path)


def socket_path(directory: str, build: str) -> str:
    """The socket of this build's server, or raise Unusable when it cannot fit a Unix socket address."""
    path = os.path.join(directory, f"server-{build}.sock")
    if len(os.fsencode(path)) > SUN_PATH_MAX:
        raise Unusable(f"the socket path is too long for a Unix socket: {path}")
    return path


def lock_path(directory: str, build: str) -> str:
    """The lock that one server of this build holds for its whole life."""
    return os.path.join(directory, f"server-{build}.lock")


def start_path(directory: str, build: str) -> str:
    """The lock that a start of this build's server holds until the server listens (`server/spawn.py`)."""
    return os.path.join(directory, f"server-{build}.start")
