"""Owns: starting a server detached from the caller — once for a burst of first calls, in a clean environment.

A start takes the build's start lock (`server-<build>.start` in the socket directory, an flock) before it forks: the
calls of a burst that find it taken know a server is starting and start none; one that takes it after the server of
an earlier start listened (and let it go) finds that server's own lock held, and starts none either. The daemon
inherits the lock as descriptor 3 and lets it go once it listens (`release_start`), or when it ends: a start that
failed frees it at once.

The daemon gets a new session, stdio on /dev/null (stderr on the starter's pipe until it listens, for `server start`
to report why it could not), no other inherited descriptor (or kapp-controller's pipes would never reach EOF while
the server lives), `/` as its directory, no zombie behind the caller (a double fork), and a scrubbed environment
(`server/interpreter.py`): its place and settings, PATH, HOME and the locale. The interpreter starts with `-E -P`
(and `-s` unless this program runs from the user's site-packages, which the build id then names): no `PYTHON*`
variable, no script directory on sys.path.
"""

from __future__ import annotations

import os
import sys

from ocivendir.server.interpreter import server_environment
from ocivendir.server.place import ensure_dir, lock_path, start_path

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping

__all__ = ["START_FD", "release_start", "restart_clean", "server_argv", "spawn_detached", "start_server"]

START_FD = 3  # where the daemon finds the start lock


def server_argv() -> list[str]:
    """The command that runs a server in the foreground, with this program's own interpreter or frozen build."""
    if getattr(sys, "frozen", False):
        return [sys.executable, "server", "start", "--foreground"]
    user_site = getattr(sys.modules.get("site"), "USER_SITE", None)
    flags = "-EP" if user_site and user_site in sys.path else "-EsP"
    return [sys.executable, flags, "-m", "ocivendir", "server", "start", "--foreground"]


def start_server(directory: str, build: str, *, stderr: int = -1, by_hand: bool = False) -> bool:
    """Start this build's server detached unless a start is under way (False then); OSError or Unusable if it can't.

    `by_hand`: for `server start`, not for a call that finds no server (`server_environment`).
    """
    from ocivendir.fs.locks import LockBusy, hold_lock, is_held  # noqa: PLC0415 - only when no server runs

    ensure_dir(directory)
    try:
        lock = hold_lock(start_path(directory, build))
    except LockBusy:
        return False
    try:
        if is_held(lock_path(directory, build)):
            return False  # a server runs: it listened (and let the start lock go) since this call looked for it
        spawn_detached(server_argv(), server_environment(os.environ, by_hand=by_hand), keep=lock, stderr=stderr)
    finally:
        os.close(lock)
    return True


def spawn_detached(argv: list[str], environ: Mapping[str, str], *, keep: int = -1, stderr: int = -1) -> None:
    """Run `argv` as a daemon with `environ`; returns once the intermediate child is reaped (not the daemon).

    `keep` lands on START_FD and `stderr` on 2 (else /dev/null); every other descriptor is closed.
    """
    pid = os.fork()
    if pid == 0:
        try:
            os.setsid()
            if os.fork() == 0:
                os.chdir("/")
                null = os.open(os.devnull, os.O_RDWR)
                for fd in (0, 1, 2):
                    os.dup2(stderr if fd == 2 and stderr >= 0 else null, fd)  # noqa: PLR2004 - stderr
                first_closed = START_FD
                if keep >= 0:
                    if keep != START_FD:
                        os.dup2(keep, START_FD)  # a duplicate is inheritable
                    os.set_inheritable(START_FD, True)  # noqa: FBT003 - the stdlib signature
                    first_closed = START_FD + 1
                os.closerange(first_closed, os.sysconf("SC_OPEN_MAX"))
                os.execve(argv[0], argv, dict(environ))  # noqa: S606 - a fixed argv: this program itself
        finally:
            os._exit(0)
    os.waitpid(pid, 0)


def restart_clean() -> None:
    """In a server started by hand: exec itself again as `start_server` would have started it, unless it was.

    So no server keeps what its starter's environment planted (a sitecustomize's hooks, a preloaded library) or its
    credentials; the pid, the start lock on START_FD and the command stay. The frozen build is left as it is: its
    bootloader adds variables of its own, and the clients start it scrubbed already.
    """
    if getattr(sys, "frozen", False):
        return
    clean = server_environment(os.environ, by_hand=True)
    if os.environ == clean and sys.flags.ignore_environment:
        return
    argv = server_argv()
    os.execve(argv[0], argv, clean)  # noqa: S606 - this program itself (no loop: it then starts clean)


def release_start(directory: str, build: str) -> None:
    """In a daemon that now listens: let the start lock go, and stderr (the starter's pipe) too, if it has them.

    Descriptor 3 counts as the start lock only when it is this build's lock file (same device and inode): a server
    run by hand keeps whatever it was given.
    """
    try:
        held, current = os.fstat(START_FD), os.stat(start_path(directory, build))
    except OSError:
        return
    if (held.st_dev, held.st_ino) != (current.st_dev, current.st_ino):
        return
    null = os.open(os.devnull, os.O_RDWR)
    os.dup2(null, 2)
    os.close(null)
    os.close(START_FD)
