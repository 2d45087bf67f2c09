"""Owns: one call's world in a reused worker — put in place before the call runs, undone after it.

A call's world is its argv (`sys.argv`), its exact environment (`os.environ`, and the timezone read from it), its
working directory (the descriptor the client passed), its umask, its stdio on descriptors 0-2 (and the output layer's
streams rebuilt over them), its signal dispositions (as a fresh interpreter has them) and the root logger's handlers
and levels. `World.enter` replaces the worker's own with the caller's; `World.leave` puts the worker's own back, so
nothing of one call's inputs is left for the next: stdio is /dev/null again, the environment and directory are the
worker's, the streams of the call are closed (a late flush can never reach the next caller's descriptors).
"""

from __future__ import annotations

import logging
import os
import signal
import sys
import time

from ocivendir.output import rebind_stdio, release_stdio

TYPE_CHECKING = False
if TYPE_CHECKING:
    from ocivendir.server.wire import Request

__all__ = ["CALL_SIGNALS", "World", "handlers"]

# what a fresh interpreter has: SIGINT raises KeyboardInterrupt, SIGPIPE is ignored, the rest are the default
CALL_SIGNALS: dict[int, object] = {
    signal.SIGTERM: signal.SIG_DFL,
    signal.SIGHUP: signal.SIG_DFL,
    signal.SIGCHLD: signal.SIG_DFL,
    signal.SIGINT: signal.default_int_handler,
    signal.SIGPIPE: signal.SIG_IGN,
}
# the worker's own between calls: a ^C at a foreground server's terminal leaves the ending to the parent
_IDLE_SIGNALS: dict[int, object] = {**CALL_SIGNALS, signal.SIGINT: signal.SIG_IGN}
_UNCATCHABLE = frozenset({signal.SIGKILL, signal.SIGSTOP})


def handlers() -> dict[int, object]:
    """Every signal's disposition (what a call may have changed)."""
    found: dict[int, object] = {}
    for signo in signal.valid_signals():
        if signo in _UNCATCHABLE:
            continue
        try:
            found[int(signo)] = signal.getsignal(signo)
        except (OSError, ValueError):
            continue
    return found


class World:
    """The worker's own world, kept to be put back after each call."""

    def __init__(self) -> None:
        """Take the worker's own world as it is now (once, before its first call) and install its idle signals."""
        self.null = os.open(os.devnull, os.O_RDWR | os.O_CLOEXEC)
        self.home = os.open("/", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        os.fchdir(self.home)
        self.environ = dict(os.environ)
        self.umask = os.umask(0o022)
        os.umask(self.umask)
        self.argv = list(sys.argv)
        root = logging.getLogger()
        self.root_handlers, self.root_level = list(root.handlers), root.level
        self.levels = {name: logger.level for name, logger in _loggers()}
        signal.set_wakeup_fd(-1)
        _install(_IDLE_SIGNALS)
        self.call_signals = {**handlers(), **CALL_SIGNALS}  # what a call that changed none runs with
        for target in (0, 1, 2):
            os.dup2(self.null, target)
        rebind_stdio()

    def enter(self, request: Request, fds: list[int]) -> None:
        """The caller's world in place: fds are its stdin, stdout, stderr and working directory (all consumed).

        OSError when the caller's working directory cannot be entered; then nothing has changed and fds are closed.
        """
        try:
            os.fchdir(fds[3])
        except OSError:
            _close(fds)
            raise
        for target, fd in enumerate(fds[:3]):
            os.dup2(fd, target)
        _close(fds)
        os.umask(request.umask)
        os.environ.clear()
        os.environ.update(request.env)
        time.tzset()
        sys.argv = list(request.argv) or ["ocivendir"]
        _install(CALL_SIGNALS)
        rebind_stdio()

    def leave(self) -> None:
        """The worker's own world back: stdio on /dev/null, its directory, umask, environment, argv, signals, logs."""
        for target in (0, 1, 2):
            os.dup2(self.null, target)
        release_stdio()  # the call's streams closed: no late flush writes anywhere
        _install(_IDLE_SIGNALS)
        os.fchdir(self.home)
        os.umask(self.umask)
        os.environ.clear()
        os.environ.update(self.environ)
        time.tzset()
        sys.argv = list(self.argv)
        root = logging.getLogger()
        for handler in [h for h in root.handlers if h not in self.root_handlers]:
            root.removeHandler(handler)
        root.setLevel(self.root_level)
        for name, logger in _loggers():
            logger.setLevel(self.levels.get(name, logging.NOTSET))

    def changed(self) -> str | None:
        """What of the worker's own world differs from when it was taken (after `leave`), or None."""
        if dict(os.environ) != self.environ:
            return "os.environ differs after the call"
        here, home = os.stat("."), os.fstat(self.home)
        if (here.st_dev, here.st_ino) != (home.st_dev, home.st_ino):
            return "the working directory differs after the call"
        umask = os.umask(0o022)
        os.umask(umask)
        if umask != self.umask:
            return f"the umask is {umask:03o} after the call"
        return None


def _install(dispositions: dict[int, object]) -> None:
    for signo, disposition in dispositions.items():
        signal.signal(signo, disposition)  # type: ignore[arg-type] # a disposition getsignal() gave


def _loggers() -> list[tuple[str, logging.Logger]]:
    return [(name, item) for name, item in logging.root.manager.loggerDict.items() if isinstance(item, logging.Logger)]


def _close(fds: list[int]) -> None:
    for fd in fds:
        if fd > 2:  # noqa: PLR2004 - a received descriptor never lands on 0-2 while those are open
            os.close(fd)
