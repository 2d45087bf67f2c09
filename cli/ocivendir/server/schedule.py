"""Owns: a process's scheduling as the kernel reports it, and a worker taking on its caller's for one call.

Scheduling is the nice value, the policy and its static priority (`chrt`), the CPU affinity (`taskset`) and the I/O
priority (`ionice`: ioprio_get(2) and ioprio_set(2) through libc's syscall(), on the architectures whose numbers are
known here; elsewhere it is neither compared nor taken on). A call runs as its caller would run it in its own process:
before the call the worker takes on the caller's (`take_on`), after it the worker puts its own back (`put_back`).

- What the worker cannot put back retires it after the call: without CAP_SYS_NICE a raised nice value cannot be
  lowered again, nor SCHED_IDLE left, so `nice -n 5 vendir sync` is served by a worker that then ends (a fork, not
  an interpreter's start-up in the caller). Affinity and the I/O classes but real time are always put back.
- What the worker cannot take on refuses the call, which then runs in-process: a caller favoured over the server (a
  lower nice value, a real-time policy or I/O class) without CAP_SYS_NICE, a CPU set outside the worker's cpuset,
  SCHED_DEADLINE. A favoured caller's refusal says so (`Refusal.favoured`): a server takes the scheduling of the
  caller that started it, so one started under `nice` would otherwise refuse every ordinary caller for as long as
  niced ones kept it busy. It retires instead, and the favoured caller's next call starts a server that serves both.
  Favoured means favoured in every respect, by a server it would start (`_favoured`): not a caller under
  SCHED_RESET_ON_FORK, nor one less favoured in another respect — or servers would make way call after call.

On Linux all of it is per thread: the worker's main thread, which runs every call, takes it on; the threads a call
starts inherit it, and a thread that outlives calls (the registry's watchdog) keeps what it was started with.
"""

from __future__ import annotations

import errno
import os
from dataclasses import dataclass
from functools import cache

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = ["Refusal", "Scheduling", "io_priority", "of", "put_back", "take_on"]

# ioprio_get's and ioprio_set's numbers by the architecture of the ABI this interpreter was built for (sysconfig's
# MULTIARCH, as x86_64-linux-gnu: not `uname -m`, the kernel's or the personality's, which a 32-bit interpreter on a
# 64-bit kernel or `linux32` makes another ABI's); asm-generic's for the newer ports
_NR_IOPRIO = {"x86_64": (252, 251), "i386": (290, 289), "aarch64": (31, 30), "riscv64": (31, 30),
              "loongarch64": (31, 30), "arm": (315, 314), "powerpc64le": (274, 273),
              "powerpc64": (274, 273)}  # fmt: skip
_IOPRIO_WHO_PROCESS = 1
_IOPRIO_CLASS_SHIFT = 13  # class "none" (0) at any level: none set, the nice value and policy decide
_IOPRIO_CLASS_RT, _IOPRIO_CLASS_IDLE, _IOPRIO_LEVEL = 1, 3, 7
_FAVOURED = frozenset({errno.EPERM, errno.EACCES})  # the kernel's answer to a rise in priority without CAP_SYS_NICE


@dataclass(frozen=True, slots=True)
class Scheduling:
    """A thread's scheduling: what decides when, where and how fast its CPU and block I/O work runs."""

    nice: int
    policy: int  # as sched_getscheduler(2) reports it, SCHED_RESET_ON_FORK included
    priority: int  # the policy's static priority: 1-99 for the real-time ones, else 0
    cpus: frozenset[int]
    io: int | None  # class and level as set (class none is 0 at any level); None where it cannot be read here


@dataclass(frozen=True, slots=True)
class Refusal:
    """Why a worker could not take on a caller's scheduling; nothing of it is left in place (unless `stuck`)."""

    reason: str
    favoured: bool  # the caller has a priority the server was not started with and cannot take: a new server could
    stuck: str | None = None  # what could not be put back after a partial take-on: the worker must retire


def of(pid: int) -> Scheduling:
    """`pid`'s scheduling (0: the calling thread's); OSError when the kernel will not say."""
    io = io_priority()
    return Scheduling(
        os.getpriority(os.PRIO_PROCESS, pid),
        os.sched_getscheduler(pid),
        os.sched_getparam(pid).sched_priority,
        frozenset(os.sched_getaffinity(pid)),
        None if io is None else _as_set(io[0](pid)),
    )


def take_on(caller: Scheduling, own: Scheduling) -> Refusal | None:
    """Give this thread `caller`'s scheduling where it differs from `own` (this thread's now); why not, or None.

    On a refusal whatever was taken on is put back (`Refusal.stuck` says what could not be). The changes that raise
    a priority, which the kernel may refuse but lets a thread that made them undo, go first; those that lower one,
    which it may not let a thread without CAP_SYS_NICE undo (a raised nice value, SCHED_IDLE, SCHED_RESET_ON_FORK, a
    real-time I/O class left), last, the policy first among them (the only one it may refuse: SCHED_DEADLINE, one
    real-time policy for another): a refusal then leaves nothing to put back that cannot be.
    """
    steps = [  # (what, whether it raises a priority, the change); of those that lower one, the policy goes first: the
        # kernel may refuse it too (SCHED_DEADLINE, SCHED_FIFO for SCHED_RR), after a real-time I/O class left for good
        ("CPU affinity", True, None if caller.cpus == own.cpus else lambda: os.sched_setaffinity(0, caller.cpus)),
        ("scheduling policy", _policy_rank(caller) > _policy_rank(own) or _clears_reset(caller, own),
         None if (caller.policy, caller.priority) == (own.policy, own.priority)
         else lambda: os.sched_setscheduler(0, caller.policy, os.sched_param(caller.priority))),
        ("I/O priority", _io_rank(caller.io) > _io_rank(own.io), _io_change(caller, own)),
        ("nice value", caller.nice < own.nice,
         None if caller.nice == own.nice else lambda: os.setpriority(os.PRIO_PROCESS, 0, caller.nice)),
    ]  # fmt: skip
    for what, _raises, change in sorted(steps, key=lambda step: not step[1]):  # stable: raises first
        if change is None:
            continue
        try:
            change()
        except OSError as exc:
            return Refusal(f"the caller's {what} cannot be taken on: {exc.strerror or exc}",
                           favoured=exc.errno in _FAVOURED and what != "CPU affinity" and _favoured(caller, own),
                           stuck=put_back(own))  # fmt: skip
    return None


def _io_change(caller: Scheduling, own: Scheduling) -> Callable[[], None] | None:
    """Setting the caller's I/O priority on this thread, or None where nothing is to change (or can be, here)."""
    io = io_priority()
    if caller.io == own.io or caller.io is None or io is None:
        return None
    value, write = caller.io, io[1]
    return lambda: write(value)


def _clears_reset(caller: Scheduling, own: Scheduling) -> bool:
    """Whether the caller's policy lacks SCHED_RESET_ON_FORK where the worker's has it (only a privileged thread may
    clear the flag).
    """  # noqa: D205
    return bool(own.policy & os.SCHED_RESET_ON_FORK) and not caller.policy & os.SCHED_RESET_ON_FORK


def _favoured(caller: Scheduling, own: Scheduling) -> bool:
    """Whether a server `caller` starts would have its scheduling and could take on `own`, so serve every caller this
    one serves: at least as favoured in every respect (nice value, policy, I/O class) and more in one.

    Not a caller under SCHED_RESET_ON_FORK (`chrt -R`): the server it forks is reset (SCHED_OTHER, nice 0 or more)
    and would refuse it again, a server started every other call. Not one less favoured in another respect either
    (`nice -n 5` against `chrt -i 0`): each one's server would refuse the other's calls, and make way in turn.
    """  # noqa: D205
    if caller.policy & os.SCHED_RESET_ON_FORK:
        return False
    ranks = list(zip(_ranks(caller), _ranks(own), strict=True))
    return all(theirs >= ours for theirs, ours in ranks) and any(theirs > ours for theirs, ours in ranks)


def _ranks(scheduling: Scheduling) -> tuple[tuple[int, int], ...]:
    """How favoured each of the nice value, the policy and the I/O priority is (more is favoured)."""
    return (-scheduling.nice, 0), _policy_rank(scheduling), _io_rank(scheduling.io)


def _policy_rank(scheduling: Scheduling) -> tuple[int, int]:
    """How favoured a policy is: SCHED_IDLE, then the normal ones, then real time by priority (SCHED_DEADLINE, which
    no server forks with, least).
    """  # noqa: D205
    policy = scheduling.policy & ~os.SCHED_RESET_ON_FORK
    if policy in (os.SCHED_FIFO, os.SCHED_RR):
        return 2, scheduling.priority
    if policy in (os.SCHED_OTHER, os.SCHED_BATCH):
        return 1, 0
    return (0, 0) if policy == os.SCHED_IDLE else (-1, 0)


def _io_rank(io: int | None) -> tuple[int, int]:
    """How favoured an I/O priority is: class idle, then none and best effort (any level: no privilege), then real time
    by level.
    """  # noqa: D205
    if io is None:
        return 1, 0
    kind = io >> _IOPRIO_CLASS_SHIFT
    if kind == _IOPRIO_CLASS_RT:
        return 2, -(io & _IOPRIO_LEVEL)
    return (0, 0) if kind == _IOPRIO_CLASS_IDLE else (1, 0)


def put_back(own: Scheduling) -> str | None:
    """This thread's scheduling back to `own` where it differs; what could not be put back, or None."""
    try:
        now = of(0)
        if now.cpus != own.cpus:
            os.sched_setaffinity(0, own.cpus)
        if now.io != own.io and own.io is not None and (io := io_priority()) is not None:
            io[1](own.io)
        if (now.policy, now.priority) != (own.policy, own.priority):
            os.sched_setscheduler(0, own.policy, os.sched_param(own.priority))  # before the nice value: leaving
        if now.nice != own.nice:  # SCHED_IDLE asks for the right to the nice value it leaves at
            os.setpriority(os.PRIO_PROCESS, 0, own.nice)
        if of(0) == own:
            return None
    except OSError as exc:
        return f"the worker's own scheduling cannot be put back after its caller's: {exc.strerror or exc}"
    return "the worker's own scheduling is not back after its caller's"


@cache
def io_priority() -> tuple[Callable[[int], int], Callable[[int], None]] | None:
    """A reader of a process's I/O class and level as ioprio_get(2) reports them (OSError when it cannot), and a
    setter of this thread's; None where the syscalls' numbers are unknown here or libc lacks syscall().

    Made once, through libc's syscall() and ctypes (in the server before its first fork).
    """  # noqa: D205
    import sysconfig  # noqa: PLC0415 - once, in the server before its first fork

    abi = sysconfig.get_config_var("MULTIARCH") or ""
    numbers = None if abi.endswith("x32") else _NR_IOPRIO.get(abi.partition("-")[0])  # x32: its own numbers
    if numbers is None:
        return None
    try:
        import ctypes  # noqa: PLC0415 - in the server's warm set (fs/swap.py's renameat2)

        syscall: Callable[..., int] = ctypes.CDLL(None, use_errno=True).syscall
    except (ImportError, AttributeError, OSError):
        return None
    syscall.restype = ctypes.c_long  # type: ignore[attr-defined]
    get, put = numbers  # every argument a long: syscall() is variadic and reads each as one

    def checked(value: int) -> int:
        if value < 0:
            code = ctypes.get_errno()
            raise OSError(code, os.strerror(code))
        return value

    def read(pid: int) -> int:
        return checked(syscall(ctypes.c_long(get), ctypes.c_long(_IOPRIO_WHO_PROCESS), ctypes.c_long(pid)))

    def write(value: int) -> None:
        checked(syscall(ctypes.c_long(put), ctypes.c_long(_IOPRIO_WHO_PROCESS), ctypes.c_long(0), ctypes.c_long(value)))

    return read, write


def _as_set(value: int) -> int:
    """An I/O priority as it was set: class "none" is one, whatever level the kernel reports with it.

    Before 5.15 it reports level 4 for a process that never submitted block I/O, 0 for one that did.
    """
    return value if value >> _IOPRIO_CLASS_SHIFT else 0
