"""Owns: starting a server detached from the caller — a new session, stdio on /dev/null, no inherited descriptor.

Every inherited descriptor is closed, or kapp-controller's pipes would never reach EOF while the server lives; the
double fork leaves no zombie behind the caller, and the server never holds the caller's working directory.
"""

from __future__ import annotations

import os
import sys

__all__ = ["server_argv", "spawn_detached"]


def server_argv() -> list[str]:
    """The command that runs a server in the foreground, with this program's own interpreter or frozen build."""
    if getattr(sys, "frozen", False):
        return [sys.executable, "server", "start", "--foreground"]
    return [sys.executable, "-P", "-m", "ocivendir", "server", "start", "--foreground"]


def spawn_detached(argv: list[str]) -> None:
    """Run `argv` as a daemon; returns once the intermediate child is reaped (the daemon itself is not waited for)."""
    pid = os.fork()
    if pid == 0:
        try:
            os.setsid()
            if os.fork() == 0:
                os.chdir("/")
                null = os.open(os.devnull, os.O_RDWR)
                for fd in (0, 1, 2):
                    os.dup2(null, fd)
                os.closerange(3, os.sysconf("SC_OPEN_MAX"))
                os.execv(argv[0], argv)  # noqa: S606 - a fixed argv: this program itself
        finally:
            os._exit(0)
    os.waitpid(pid, 0)
