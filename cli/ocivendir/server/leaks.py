"""Owns: what a call may have left behind in a reused worker, and the other reasons to retire it.

`Baseline` is taken once, when the worker is born (after the server's preload): its threads, its open descriptors,
the modules loaded (the warm set: `preload.WARM` and everything those import). After each call, `left_behind` names
the first thing that is not as it was — a thread still running, a descriptor still open (but the cache indexes and
the idle registry connections kept on purpose: `cache/opened.py`, `registry/keptpools.py`), a module imported that
the warm set does not hold — and `retire_reason` adds the call count and the resident size. A worker with a reason
answers its call and exits; the parent forks a fresh one from the preloaded image. A descriptor open only in garbage
(an answer's socket in a reference cycle, which CPython closes when it collects it) is no leak: when the check finds
one, it collects once and looks again, rather than retire a worker (a fork and a warm-up) for it.
"""

from __future__ import annotations

import gc
import os
import resource
import sys
import threading
import time

from ocivendir.cache import opened
from ocivendir.fs.fileid import device_inode
from ocivendir.registry import keptpools
from ocivendir.server import ownstatus

__all__ = ["MAX_RSS", "RESIDENT_THREADS", "Baseline", "resident_bytes"]

MAX_RSS = 256 << 20  # a worker past this resident size is retired (the preloaded image is ~30 MiB)
_SETTLE_TRIES = 25
# threads that serve every call and keep nothing of one: the registry client's deadline watchdog (started on a call's
# first alarm; an alarm holds only its socket, which the descriptor check sees if a call leaves one open)
RESIDENT_THREADS = frozenset({"ocivendir-watchdog"})
_PROBE = 256


def resident_bytes(status: ownstatus.Status | None = None) -> int:
    """This process's resident set size, from its /proc status; without /proc (the sidecar's chroot), its peak."""
    if (resident := (status or ownstatus.read()).get(b"VmRSS")) is not None:
        return int(resident.split()[0]) << 10  # `12345 kB`
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def _open_descriptors() -> list[int]:
    """This process's open descriptors: from /proc/self/fd, else probed with fstat.

    Without /proc (the sidecar's chroot, where kapp-controller runs the native client) the numbers are probed up to
    `_PROBE` past the highest one found: a descriptor a call leaves open took the lowest free number (POSIX), so it
    lies within that reach of the ones the worker was born with.
    """
    try:
        return [int(name) for name in os.listdir("/proc/self/fd")]  # the listing's own is gone once it is made
    except OSError:
        pass
    found: list[int] = []
    fd = gap = 0
    while gap < _PROBE:
        try:
            os.fstat(fd)
        except OSError:
            gap += 1
        else:
            found.append(fd)
            gap = 0
        fd += 1
    return found


def _descriptors() -> frozenset[tuple[int, str]]:
    """Each open descriptor as (number, `device:inode`)."""
    found = []
    for fd in _open_descriptors():
        try:
            info = os.fstat(fd)
        except OSError:
            continue
        found.append((fd, device_inode(info)))
    return frozenset(found)


def _shown(fd: int, identity: str) -> str:
    """A descriptor as a retirement reason names it: `number device:inode target` (the target where /proc has it)."""
    try:
        target = os.readlink(f"/proc/self/fd/{fd}")
    except OSError:
        target = ""
    return f"{fd} {identity} {target}"


def _threads(status: ownstatus.Status | None = None) -> int:
    """The threads of this process: the kernel's count where /proc shows it, else Python's."""
    if (count := (status or ownstatus.read()).get(b"Threads")) is not None:
        return int(count)
    return threading.active_count()


def _settled_threads(expected: int, status: ownstatus.Status | None = None) -> int:
    """The thread count, given a thread that has just returned a few moments to end (it is joined, not leaked).

    The first count is `status`'s when given (taken after the call ended): a count that was the expected one then
    stays so (nothing of the call is left to start a thread); any other is read again until it settles.
    """
    count = _threads(status)
    for _ in range(_SETTLE_TRIES):
        if count == expected:
            break
        time.sleep(0.002)
        count = _threads()
    return count


class Baseline:
    """The worker as it was born: what every call must leave as it found it."""

    def __init__(self) -> None:
        """Take the worker's threads, descriptors and modules now (its own /proc status opened first: it is one)."""
        ownstatus.open_status()
        self.threads = _threads()
        self.descriptors = _descriptors()
        self.modules = frozenset(sys.modules)

    def left_behind(self, connection: int, status: ownstatus.Status | None = None) -> str | None:
        """The first thing a finished call left behind (with the worker's own world back in place), or None.

        `connection` is the call's own connection, still open for its answer; `status` this process's /proc status
        read after the call ended (else it is read here).
        """
        resident = sum(1 for thread in threading.enumerate() if thread.name in RESIDENT_THREADS)
        if (count := _settled_threads(self.threads + resident, status)) != self.threads + resident:
            names = sorted(
                t.name
                for t in threading.enumerate()
                if t.name not in RESIDENT_THREADS and t is not threading.main_thread()
            )
            return f"{count - 1 - resident} threads were left running ({', '.join(names) or 'not Python threads'})"
        if self._extra_descriptors(connection):
            gc.collect()  # one held only by garbage (a reference cycle) closes when it is collected: no leak
            if extra := self._extra_descriptors(connection):
                return f"descriptors left open: {', '.join(_shown(fd, identity) for fd, identity in extra)}"
        if not sys.modules.keys() <= self.modules and (new := set(sys.modules) - self.modules):
            shown = sorted(new)
            return f"modules outside the warm set imported: {', '.join(shown[:5])}{' …' if len(shown) > 5 else ''}"  # noqa: PLR2004
        return None

    def _extra_descriptors(self, connection: int) -> list[tuple[int, str]]:
        """Descriptors open now that the worker was not born with, but the call's connection and what is kept.

        Kept on purpose (issue 33): the cache index connections and the idle registry connections.
        """
        kept = opened.kept_files() | keptpools.kept_sockets()
        return sorted(
            (fd, identity)
            for fd, identity in _descriptors() - self.descriptors
            if fd != connection and identity not in kept
        )

    def retire_reason(self, calls: int, max_calls: int, status: ownstatus.Status | None = None) -> str | None:
        """Why a worker that served `calls` calls and left nothing behind must still end, or None (`status`: above)."""
        if calls >= max_calls:
            return f"served {calls} calls (OCIVENDIR_SERVER_MAX_CALLS={max_calls})"
        if resource.getrlimit(resource.RLIMIT_CPU)[0] != resource.RLIM_INFINITY:
            # the limit counts a process's CPU over all its calls; in-process, each call has the whole limit
            return "a CPU time limit (RLIMIT_CPU) is set: each call gets a fresh worker, whose CPU time starts at 0"
        if (size := resident_bytes(status)) > MAX_RSS:
            return f"resident size {size >> 20} MiB passes {MAX_RSS >> 20} MiB"
        return None
