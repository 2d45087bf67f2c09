"""Owns: whether a worker may run a caller's call — the caller's credentials and start-up settings against its own.

A worker runs a call with the server's credentials, whoever started it. So a call is served only when the caller
has exactly the worker's, as the kernel reports them — never as the request asserts them:
- SO_PEERCRED's uid and gid and SO_PEERGROUPS's supplementary groups, from the pid SO_PEERCRED names; where /proc
  is not mounted, every resource limit (soft and hard) read with prlimit(2);
- where /proc is mounted, also /proc/<pid>: uid and gid (real, effective, saved, filesystem), groups, capabilities,
  no_new_privs, seccomp mode, every resource limit (soft and hard: the same the 16 prlimit(2) calls would read, in
  one file), oom_score_adj, the security label (where a security module answers: which do is the kernel's, so where
  none answers the server none answers any process), the control groups (a caller held to
  less memory, CPU or fewer processes by its cgroup must not be served outside it), the mount, network, user and
  cgroup namespaces and the root directory. A caller whose entry cannot be read there (another pid namespace, gone)
  is refused. The reading goes through one directory descriptor of /proc/<pid>, so every file read is of one process.
  A /proc that is not of the server's pid namespace (`unshare --pid` without `--mount-proc`, a parent's /proc bind-
  mounted) names other processes by the caller's pid: every caller is refused, and the limits are read with prlimit(2).
- the caller still lives once all of that was read (a pidfd from SO_PEERPIDFD, where the kernel has it): a caller
  that ended may have left its pid to a process with more rights, which would have vouched for it.
The call's environment must set nothing that acts at a program's start-up and name the locale the server started in
(`server/interpreter.py`). Otherwise the worker refuses (`R`) before anything runs, and the client runs the call
in-process: never more rights, nor other settings, than the caller's own. The caller's scheduling (nice value,
policy, CPU affinity, I/O priority) is read with the rest and is not compared: the worker takes it on for the call
(`server/schedule.py`), or refuses where it cannot.
"""

from __future__ import annotations

import errno
import os
import resource
import signal
import socket
import struct

from ocivendir.server import schedule
from ocivendir.server.interpreter import locale_key, startup_variable
from ocivendir.server.ownstatus import field, whole

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping

    from ocivendir.server.schedule import Scheduling

__all__ = ["check", "describe"]

_PEERCRED = struct.Struct("3i")
_SO_PEERGROUPS = getattr(socket, "SO_PEERGROUPS", 59)  # Linux's, where the socket module does not name it
_SO_PEERPIDFD = getattr(socket, "SO_PEERPIDFD", 77)  # Linux 6.5's: a pidfd of the process that connected
_GROUPS_BUFFER = 1024  # Python's getsockopt() bound: 256 groups (more: ERANGE, a refusal)
_STATUS = ("Uid", "Gid", "Groups", "CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb", "NoNewPrivs", "Seccomp",
           "Seccomp_filters")  # fmt: skip
_STATUS_KEYS = tuple((name.encode(), name) for name in _STATUS)
_NONE = "none"
_NAMESPACES = ("mnt", "net", "user", "cgroup")
_PLURAL = frozenset({"resource limits"})
_LIMITS = tuple(getattr(resource, name) for name in sorted(dir(resource)) if name.startswith("RLIMIT_"))
_SERVER_LOCALE = locale_key(os.environ)  # as the server started (imported before any call adopts an environment)


def check(conn: socket.socket, env: Mapping[str, str]) -> str | Scheduling:
    """Why the peer of `conn`, calling with `env`, must run its call in-process; its scheduling when it may be served.

    The scheduling is the caller's, for the worker to take on (`server/schedule.py`), read like the rest while the
    caller is known to live.
    """
    variable = startup_variable(env)
    if variable is not None:
        return f"{variable} is set: it acts when a program starts, so the call runs in-process"
    if locale_key(env) != _SERVER_LOCALE:
        return f"the call's locale ({locale_key(env)}) is not the server's ({_SERVER_LOCALE})"
    try:
        pidfd = conn.getsockopt(socket.SOL_SOCKET, _SO_PEERPIDFD)
    except OSError as exc:
        if exc.errno not in (errno.ENOPROTOOPT, errno.EINVAL):  # a kernel before 6.5 has none: the pid is all there is
            return "the caller's process is gone"
        pidfd = -1
    pid, uid, gid = _PEERCRED.unpack(conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, _PEERCRED.size))
    try:
        found = _kernel_check(conn, pid, uid, gid)
        return found if isinstance(found, str) else _proc_mismatch(pid) or _gone(pidfd) or found
    finally:
        if pidfd >= 0:
            os.close(pidfd)


def _gone(pidfd: int) -> str | None:
    """Why the caller no longer vouches for what was read by its pid: it ended (the pid may be another's now)."""
    if pidfd < 0:
        return None
    try:
        signal.pidfd_send_signal(pidfd, 0)
    except OSError:
        return "the caller's process is gone"
    return None


def _kernel_check(conn: socket.socket, pid: int, uid: int, gid: int) -> str | Scheduling:
    """What the kernel answers without /proc: SO_PEERCRED (once), SO_PEERGROUPS, scheduling; prlimit(2) if needed."""
    if (uid, gid) != (os.geteuid(), os.getegid()):
        return "the caller's uid or gid is not the server's"
    if pid <= 0:
        return "the caller's process is not visible to the server"
    try:
        if _peer_groups(conn) != sorted(os.getgroups()):
            return "the caller's groups are not the server's"
        if not _PROC_OURS and any(resource.prlimit(pid, limit) != resource.getrlimit(limit) for limit in _LIMITS):
            return "the caller's resource limits are not the server's"
        return schedule.of(pid)
    except OSError as exc:
        return f"cannot read the caller's credentials: {exc.strerror or exc}"


def _peer_groups(conn: socket.socket) -> list[int]:
    raw = conn.getsockopt(socket.SOL_SOCKET, _SO_PEERGROUPS, _GROUPS_BUFFER)
    return sorted(struct.unpack(f"{len(raw) // 4}I", raw[: len(raw) // 4 * 4]))


def _proc_mismatch(pid: int) -> str | None:
    """Where /proc is mounted: what only /proc says (capabilities, namespaces, …) and all of it again."""
    own = _OWN
    if own is None:
        return None  # no /proc here (a chroot): the kernel's answers above decided
    if not _PROC_OURS:
        return "/proc here is another pid namespace's: the caller's entry there is not the caller's"
    try:
        theirs = describe(str(pid))
    except OSError as exc:
        return f"cannot read the caller's credentials: {exc.strerror}"
    return next((f"the caller's {name} {'are' if name in _PLURAL else 'is'} not the server's"
                 for name, value in own.items() if theirs.get(name) != value), None)  # fmt: skip


def describe(pid: str) -> dict[str, str]:
    """What decides a process's rights, by name: /proc/<pid>/status lines, limits, cgroups, label, namespaces, root."""
    proc = os.open(f"/proc/{pid}", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        status = _read(proc, "status")
        found: dict[str, str] = {}
        for key, name in _STATUS_KEYS:
            if (value := field(status, key)) is not None:  # only the lines compared: no split of the whole file
                found[name] = " ".join(value.decode("utf-8", "replace").split())
        found["resource limits"] = _read(proc, "limits").decode("utf-8", "replace")
        found["control group list"] = _read(proc, "cgroup").decode("utf-8", "replace")
        found["oom_score_adj"] = _read(proc, "oom_score_adj").strip().decode("utf-8", "replace")
        found["security label"] = _label(proc)
        for kind in _NAMESPACES:
            found[f"{kind} namespace"] = os.readlink(f"ns/{kind}", dir_fd=proc)
        root = os.stat("root", dir_fd=proc)
        found["root directory"] = f"{root.st_dev}:{root.st_ino}"
        return found
    finally:
        os.close(proc)


def _label(proc: int) -> str:
    """The process's security label: "none" where no security module answers.

    Which modules answer is the kernel's, the same for every process: where the server's own read found none
    (EINVAL), no caller's would find one either, and it is not read again (a read that fails costs an exception).
    """
    if _NO_LABELS:
        return _NONE
    try:
        return _read(proc, "attr/current").strip(b"\0\n").decode("utf-8", "replace")
    except OSError:
        return _NONE  # no security module answers: the same for every process here


def _read(directory: int, name: str) -> bytes:
    """A whole /proc file of one process (read again from its start when longer than one read's buffer)."""
    fd = os.open(name, os.O_RDONLY | os.O_CLOEXEC, dir_fd=directory)
    try:
        return whole(fd)
    finally:
        os.close(fd)


def _no_labels() -> bool:
    """Whether no security module answers for the server's own process (attr/current: EINVAL): then none does."""
    try:
        proc = os.open("/proc/self", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError:
        return False
    try:
        _read(proc, "attr/current")
    except OSError as exc:
        return exc.errno == errno.EINVAL
    finally:
        os.close(proc)
    return False


def _own_description() -> dict[str, str] | None:
    """This process's /proc description, None where /proc is not mounted."""
    try:
        return describe("self")
    except FileNotFoundError:
        return None
    except OSError:
        return {"credentials": "unreadable"}  # /proc is there but says nothing of us: no caller matches


def _proc_is_ours() -> bool:
    """Whether /proc is of this process's pid namespace: its `self` names this process by the pid it has here."""
    try:
        return os.readlink("/proc/self") == str(os.getpid())
    except OSError:
        return False


_NO_LABELS = _no_labels()  # no security module answers here: every process's label is "none", not read per call
_OWN = _own_description()  # read once, in the server before its first fork: a worker has the server's credentials
_PROC_OURS = _OWN is not None and _proc_is_ours()  # else the limits are read with prlimit(2), not in /proc
schedule.io_priority()  # found once, in the server before its first fork: no worker looks it up again
