"""Owns: one call's world in a reused worker — put in place before the call runs, undone after it.

A call's world is its argv (`sys.argv`), its exact environment (`os.environ`, and the timezone read from it), its
working directory (the descriptor the client passed), its umask, its stdio on descriptors 0-2 (and the output layer's
streams rebuilt over them), its signal dispositions (as a fresh interpreter has them), the root logger's handlers and
levels, and its scheduling (`World.take_on`: the caller's nice value, policy, CPUs and I/O priority, where the worker
can take them on and put its own back — `server/schedule.py`). `World.enter` replaces the worker's own with the
caller's; `World.leave` puts the worker's own back, so nothing of one call's inputs is left for the next: stdio is
/dev/null again, the directory is the worker's, the streams of the call are closed (a late flush can never reach the
next caller's descriptors). The environment is the exception: a call that left os.environ exactly as it came in leaves
it in place until the next call's replaces it, name by name where the two differ (a caller calls with the same
environment call after call: putting the worker's own back and the next call's in again cost ~70 setenv/unsetenv a
call). The next call's environment is still exactly its own, and between calls the worker reads none (what it compares
is the request's). Between calls sys.stdin/stdout/stderr are the worker's own streams, built once over its own
descriptor of /dev/null (not 0-2: what they buffer between calls can never reach a caller's descriptor dup'ed there).
"""

from __future__ import annotations

import logging
import os
import signal
import sys
import time

from ocivendir.output import rebind_stdio, release_stdio, stdio_streams
from ocivendir.server import ownstatus, schedule

TYPE_CHECKING = False
if TYPE_CHECKING:
    from ocivendir.server.schedule import Refusal, Scheduling
    from ocivendir.server.wire import Request

__all__ = ["CALL_SIGNALS", "World", "handlers", "idle_signals"]

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
_TIMERS = ((signal.ITIMER_REAL, "ITIMER_REAL"), (signal.ITIMER_VIRTUAL, "ITIMER_VIRTUAL"),
           (signal.ITIMER_PROF, "ITIMER_PROF"))  # fmt: skip
# what entering a call and leaving it change: only these differ between the two tables
_CALL_ONLY = {signo: d for signo, d in CALL_SIGNALS.items() if _IDLE_SIGNALS[signo] is not d}
_IDLE_ONLY = {signo: _IDLE_SIGNALS[signo] for signo in _CALL_ONLY}


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
        self.current = self.environ  # what os.environ holds: the worker's own, or the last clean call's
        self.umask = os.umask(0o022)
        os.umask(self.umask)
        self.argv = list(sys.argv)
        root = logging.getLogger()
        self.root_handlers, self.root_level = list(root.handlers), root.level
        self.levels = {name: logger.level for name, logger in _loggers()}
        idle_signals()
        self.call_signals = {**handlers(), **CALL_SIGNALS}  # what a call that changed none runs with
        self.call_masks: tuple[str, str] | None = None  # the kernel's view of them (/proc), as the first call began
        self.blocked = signal.pthread_sigmask(signal.SIG_BLOCK, ())  # the main thread's, which runs every call
        for target in (0, 1, 2):
            os.dup2(self.null, target)
        self.streams = stdio_streams((self.null, self.null, self.null))  # its own: never over a caller's 0-2
        rebind_stdio(self.streams)
        self.taken: Scheduling | None = None  # the worker's own scheduling while a call runs with its caller's
        self.stuck: str | None = None  # why the worker's own could not be put back: it must retire

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
        _switch(self.current, request.env)  # checked after every call: os.environ holds `current`
        self.current = request.env
        sys.argv = list(request.argv) or ["ocivendir"]
        _install(_CALL_ONLY)  # the others are the same between calls and in one (signals_changed() sees to it)
        if self.call_masks is None:
            self.call_masks = _masks()  # what every call starts with, so must end with: taken before the first runs
        rebind_stdio()

    def take_on(self, caller: Scheduling) -> Refusal | None:
        """The caller's scheduling in place for its call (after `enter`); why it cannot be, or None.

        A refusal leaves the worker's own in place (`leave` is still to be called), or says in `stuck` what could not
        be put back.
        """
        try:
            own = schedule.of(0)
        except OSError as exc:
            return schedule.Refusal(f"cannot read the worker's scheduling: {exc.strerror or exc}", favoured=False)
        if caller == own:
            return None
        refusal = schedule.take_on(caller, own)
        if refusal is None:
            self.taken = own
        elif refusal.stuck is not None:
            self.stuck = refusal.stuck
        return refusal

    def leave(self, *, restore_all: bool = True) -> None:
        """The worker's own world back: stdio on /dev/null, its directory, umask, environment, argv, signals, logs.

        Without `restore_all` (the call changed no signal's disposition and left os.environ exactly as it came in:
        `signals_changed` and `environ_changed` said so), only the dispositions that differ between a call and the
        worker's idle state are set back, and the call's environment stays until the next call's replaces it.
        """
        if self.taken is not None:
            self.stuck = schedule.put_back(self.taken)
            self.taken = None
        for target in (0, 1, 2):
            os.dup2(self.null, target)
        release_stdio(self.streams)  # the call's streams closed: no late flush writes anywhere
        _install(_IDLE_SIGNALS if restore_all else _IDLE_ONLY)
        os.fchdir(self.home)
        os.umask(self.umask)
        if restore_all:
            _switch(dict(os.environ), self.environ)  # read back in full: the call may have changed anything
            self.current = self.environ
        sys.argv = list(self.argv)
        root = logging.getLogger()
        for handler in [h for h in root.handlers if h not in self.root_handlers]:
            root.removeHandler(handler)
        if root.level != self.root_level:
            root.setLevel(self.root_level)
        for name, logger in _loggers():
            if logger.level != (level := self.levels.get(name, logging.NOTSET)):
                logger.setLevel(level)  # each setLevel clears every logger's cache: only where it differs

    def signals_changed(self, status: ownstatus.Status | None = None) -> str | None:
        """Which signal's disposition the running call changed, or None (called before `leave`).

        Where /proc is mounted the kernel's masks of ignored and caught signals say it for every signal at once; only
        the caught ones (whose Python handler may have been swapped) are asked of Python. Elsewhere every signal is.
        The kernel's masks also see what Python does not: a handler installed with sigaction(2) from C (faulthandler).
        A signal the call left blocked in the main thread is a change too: it would never reach the next call; so are
        an interval timer left armed (it would end a later call) and a wake-up descriptor (every caught signal would
        write a byte to whatever a later call opens under its number), which are disarmed. `status`: the process's
        /proc status read after the call ended (else it is read here).
        """
        if (blocked := signal.pthread_sigmask(signal.SIG_BLOCK, ())) != self.blocked:
            changed = ", ".join(str(int(signo)) for signo in sorted(blocked ^ self.blocked))
            return f"the call changed the main thread's blocked signals: {changed}"
        if (armed := _disarm()) is not None:
            return armed
        masks = _masks(status)
        if masks is not None and masks == self.call_masks:
            caught = int(masks[1], 16)
            return _differing({signo: self.call_signals.get(signo) for signo in _members(caught)})
        if (found := _differing(self.call_signals)) is None and masks is not None and self.call_masks is not None:
            return "the call changed a signal's disposition outside Python (the kernel's masks differ)"
        return found

    def environ_changed(self) -> str | None:
        """Whether the running call left os.environ other than it came in (called before `leave`), or None."""
        if dict(os.environ) != self.current:
            return "the call changed os.environ"
        return None

    def changed(self) -> str | None:
        """What of the worker's own world differs from when it was taken (after `leave`), or None.

        The environment is the worker's own after a call that changed it (read back in full); after a clean call it is
        that call's, which `environ_changed` compared already.
        """
        if self.stuck is not None:
            return self.stuck
        if self.current is self.environ and dict(os.environ) != self.environ:
            return "os.environ differs after the call"
        here, home = os.stat("."), os.fstat(self.home)
        if (here.st_dev, here.st_ino) != (home.st_dev, home.st_ino):
            return "the working directory differs after the call"
        umask = os.umask(0o022)
        os.umask(umask)
        if umask != self.umask:
            return f"the umask is {umask:03o} after the call"
        return None


def idle_signals() -> None:
    """A worker's own signals between calls: no wake-up descriptor, the idle dispositions (a new worker: first)."""
    signal.set_wakeup_fd(-1)
    _install(_IDLE_SIGNALS)


def _switch(known: dict[str, str], environ: dict[str, str]) -> None:
    """From `known` (exactly what os.environ holds now) to `environ`, touching only what differs between the two.

    Both are plain dicts: nothing of os.environ is read (each read decodes, and each name it lacks raises KeyError).
    The timezone is read again when TZ changed.
    """
    current = os.environ
    for name in known.keys() - environ.keys():
        del current[name]
    for name, value in environ.items():
        if known.get(name) != value:
            current[name] = value
    if known.get("TZ") != environ.get("TZ"):
        time.tzset()


def _disarm() -> str | None:
    """What a call left armed to send or write on a signal (disarmed now), or None."""
    if (fd := signal.set_wakeup_fd(-1)) != -1:
        return f"the call left a wake-up descriptor for signals ({fd})"
    for which, name in _TIMERS:
        if signal.getitimer(which) != (0.0, 0.0):
            signal.setitimer(which, 0)
            return f"the call left a timer armed: {name}"
    return None


def _masks(status: ownstatus.Status | None = None) -> tuple[str, str] | None:
    """The kernel's masks of this process's ignored and caught signals (hex), None without /proc.

    From `status` when given (one read of it, taken after the call ended), else read now.
    """
    status = status or ownstatus.read()
    ignored, caught = status.get(b"SigIgn"), status.get(b"SigCgt")
    return (ignored.decode(), caught.decode()) if ignored and caught else None


def _members(mask: int) -> list[int]:
    """The signal numbers set in a /proc signal mask (bit n-1 is signal n)."""
    return [bit + 1 for bit in range(mask.bit_length()) if mask >> bit & 1]


def _differing(expected: dict[int, object]) -> str | None:
    for signo, disposition in expected.items():
        if signo in _UNCATCHABLE:
            continue
        try:
            now = signal.getsignal(signo)
        except (OSError, ValueError):
            continue
        if now != disposition:
            return f"the call changed the handler of signal {signo}"
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
