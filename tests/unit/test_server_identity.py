"""A worker serves only a caller with its own credentials, read from the kernel for the connection's peer.

Each case connects a real child process (whose limits or environment differ, as an unprivileged caller can make
them) to a socket of this process, which plays the worker. A caller it admits is answered with its scheduling, which
the worker takes on for the call (`tests/unit/test_server_schedule.py`).
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from ocivendir.server import identity, schedule

CLI = Path(__file__).resolve().parents[2] / "cli"
CLEAN = {"PATH": "/usr/bin:/bin", **{k: v for k, v in os.environ.items() if k in ("LANG", "LC_ALL", "LC_CTYPE")}}


@pytest.fixture
def listener() -> Iterator[tuple[socket.socket, str]]:
    where = Path(tempfile.mkdtemp(prefix="ovi-", dir="/tmp"))
    path = str(where / "s")
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.bind(path)
        sock.listen(1)
        sock.settimeout(30)
        yield sock, path
    Path(path).unlink()
    where.rmdir()


def _peer(listener: tuple[socket.socket, str], code: str = "") -> str | schedule.Scheduling:
    """Connect a child (after running `code` in it) and ask what keeps it from being served, or its scheduling."""
    sock, path = listener
    child = subprocess.Popen([sys.executable, "-c", f"import resource, socket, sys\n{code}\ns = socket.socket("
                              f"socket.AF_UNIX)\ns.connect({path!r})\nsys.stdin.read()"], stdin=subprocess.PIPE)  # fmt: skip
    try:
        conn, _ = sock.accept()
        conn.settimeout(None)
        with conn:
            return identity.check(conn, CLEAN)
    finally:
        assert child.stdin is not None
        child.stdin.close()
        child.wait(30)


def _peer_reason(listener: tuple[socket.socket, str], code: str = "") -> str | None:
    """Why the child is refused, or None when it is admitted."""
    found = _peer(listener, code)
    return found if isinstance(found, str) else None


def test_a_caller_with_the_workers_credentials_is_served_with_its_own_scheduling(
    listener: tuple[socket.socket, str],
) -> None:
    assert _peer(listener) == schedule.of(0)


@pytest.mark.parametrize("limit", ["RLIMIT_FSIZE", "RLIMIT_NOFILE", "RLIMIT_STACK"])
def test_a_caller_with_a_lower_limit_is_refused(listener: tuple[socket.socket, str], limit: str) -> None:
    """Either way a limit differs, the worker's call would not be the caller's: ulimit -f 200 fails a 3 MiB pull."""
    code = (f"soft, hard = resource.getrlimit(resource.{limit})\nlow = 200 * 1024 if hard == resource.RLIM_INFINITY "
            f"else hard // 2\nresource.setrlimit(resource.{limit}, (low if soft == resource.RLIM_INFINITY else "
            "min(soft, low), hard))")  # fmt: skip
    assert _peer_reason(listener, code) == "the caller's resource limits are not the server's"


def test_a_caller_with_a_lower_hard_limit_only_is_refused(listener: tuple[socket.socket, str]) -> None:
    code = (
        "soft, hard = resource.getrlimit(resource.RLIMIT_CPU)\nnew = 10**6 if hard == resource.RLIM_INFINITY "
        "else hard - 1\nresource.setrlimit(resource.RLIMIT_CPU, (new if soft == resource.RLIM_INFINITY else "
        "min(soft, new), new))"
    )
    assert _peer_reason(listener, code) == "the caller's resource limits are not the server's"


@pytest.mark.parametrize(("env", "reason"), [
    ({"PYTHONPATH": "/planted"}, "PYTHONPATH is set: it acts when a program starts, so the call runs in-process"),
    ({"LD_PRELOAD": "/x.so"}, "LD_PRELOAD is set: it acts when a program starts, so the call runs in-process"),
    ({"LC_ALL": "C"}, "the call's locale (LC_ALL=C) is not the server's"),
])  # fmt: skip
def test_a_call_with_other_start_up_settings_is_refused_before_its_credentials_are_read(
    env: dict[str, str], reason: str
) -> None:
    left, right = socket.socketpair()
    with left, right:
        found = identity.check(left, {**CLEAN, **env})
    assert isinstance(found, str)
    assert found.startswith(reason)


def test_what_a_process_has_is_read_from_proc() -> None:
    own = identity.describe("self")
    assert own["Groups"] == " ".join(str(g) for g in sorted(os.getgroups()))
    assert own["resource limits"].startswith("Limit")
    assert {"Uid", "Gid", "CapEff", "CapBnd", "NoNewPrivs", "mnt namespace", "user namespace", "root directory"} <= set(
        own
    )


def _own_pids_group() -> Path | None:
    """This process's control group in the pids hierarchy, where a child group can be made (root), else None."""
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        _number, controllers, where = line.split(":", 2)
        if "pids" in controllers.split(","):
            group = Path("/sys/fs/cgroup/pids") / where.lstrip("/")
            return group if os.access(group, os.W_OK) else None
    return None


def test_a_caller_in_another_control_group_is_refused(listener: tuple[socket.socket, str]) -> None:
    """A caller held to fewer processes (or less memory, CPU) by its cgroup would be served outside the limit."""
    parent = _own_pids_group()
    if parent is None:
        pytest.skip("needs a writable pids cgroup (root)")
    group = Path(tempfile.mkdtemp(prefix="ovi-caller-", dir=parent))
    try:
        code = f"open({str(group / 'cgroup.procs')!r}, 'w').write(str(__import__('os').getpid()))"
        assert _peer_reason(listener, code) == "the caller's control group list is not the server's"
    finally:
        group.rmdir()


@pytest.mark.parametrize(("code", "field", "value"), [
    ("os.nice(5)", "nice", 5),
    ("os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))", "policy", os.SCHED_IDLE),
], ids=["nice", "SCHED_IDLE"])  # fmt: skip
def test_a_caller_running_at_a_lower_priority_is_admitted_with_it(listener: tuple[socket.socket, str], code: str,
                                                                  field: str, value: int) -> None:  # fmt: skip
    """`nice -n 5 vendir sync` (or a SCHED_IDLE batch job) is admitted: the worker runs its call at that priority."""
    found = _peer(listener, f"import os\n{code}")
    assert isinstance(found, schedule.Scheduling)
    assert getattr(found, field) == value
    assert found != schedule.of(0)


def test_a_caller_held_to_fewer_cpus_is_admitted_with_them(listener: tuple[socket.socket, str]) -> None:
    """`taskset -c 0 vendir sync` is admitted: the worker runs its call on those CPUs."""
    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) < 2:
        pytest.skip("needs two CPUs to pin a caller to fewer")
    found = _peer(listener, f"import os\nos.sched_setaffinity(0, {{{cpus[0]}}})")
    assert isinstance(found, schedule.Scheduling)
    assert found.cpus == {cpus[0]}


def test_a_caller_at_a_lower_io_priority_is_admitted_with_it(listener: tuple[socket.socket, str]) -> None:
    """`ionice -c 3 vendir sync` (idle I/O) is admitted: the worker runs its call at that I/O priority."""
    if schedule.io_priority() is None:
        pytest.skip(f"ioprio_get's number is not known on {os.uname().machine}")
    ionice = shutil.which("ionice")
    if ionice is None:
        pytest.skip("no ionice (util-linux) to lower the caller's I/O priority")
    code = f"import os, subprocess\nsubprocess.run([{ionice!r}, '-c', '3', '-p', str(os.getpid())], check=True)"
    found = _peer(listener, code)
    assert isinstance(found, schedule.Scheduling)
    assert found.io is not None
    assert found.io >> 13 == 3  # class idle


def test_an_io_priority_that_cannot_be_read_is_a_refusal(listener: tuple[socket.socket, str],
                                                         monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    def unreadable(_pid: int) -> int:
        raise OSError(1, "Operation not permitted")

    monkeypatch.setattr(schedule, "io_priority", lambda: (unreadable, None))
    assert _peer_reason(listener) == "cannot read the caller's credentials: Operation not permitted"


IO_PRIORITY_READ = """
import json, os
from ocivendir.server import schedule
before = len(os.listdir("/proc/self/fd"))
try:
    reason = None if schedule.of(os.getppid()).io == schedule.of(0).io else "another I/O priority"
except OSError as exc:
    reason = str(exc)
print(json.dumps({"machine": os.uname().machine, "reason": reason, "opened": len(os.listdir("/proc/self/fd")) - before}))
"""


def test_the_io_priority_is_read_with_the_syscall_numbers_of_the_interpreters_own_abi() -> None:
    """The syscall numbers are the interpreter's ABI's; `uname -m` names the kernel's machine, or the personality's.

    A 32-bit interpreter on a 64-bit kernel hears `x86_64` (whose ioprio_get is i386's exit_group) or `aarch64`; a
    64-bit one under `linux32` hears `i686` (whose ioprio_get is x86_64's eventfd2). Either way no caller was served.
    """
    setarch = shutil.which("setarch")
    if os.uname().machine != "x86_64" or setarch is None:
        pytest.skip("needs an x86_64 kernel and setarch(8) to give a 64-bit process the i686 personality")
    done = subprocess.run([setarch, "i686", sys.executable, "-c", IO_PRIORITY_READ], check=False, capture_output=True,
                          text=True, env={**os.environ, "PYTHONPATH": str(CLI)}, timeout=60)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {"machine": "i686", "reason": None, "opened": 0}


def test_a_caller_whose_io_priority_is_unset_is_served_whatever_level_the_kernel_reports_for_it(
    listener: tuple[socket.socket, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Unset is class "none", which kernels before 5.15 report at level 4 or 0 (whether it ever submitted block I/O).

    Either way the process is scheduled by its nice value and policy, which are compared already.
    """
    monkeypatch.setattr(schedule, "io_priority", lambda: (lambda pid: 0 if pid == 0 else 4, None))
    assert _peer(listener) == schedule.of(0)


def test_a_caller_that_asked_to_be_killed_first_on_oom_is_refused(listener: tuple[socket.socket, str]) -> None:
    """A raised oom_score_adj is the caller's to give (lowering it again takes CAP_SYS_RESOURCE): not served lower."""
    own = int(Path("/proc/self/oom_score_adj").read_text())
    if own >= 1000:  # the kernel's maximum
        pytest.skip("this process's oom_score_adj is already the highest")
    code = f"open('/proc/self/oom_score_adj', 'w').write('{own + 1}')"
    assert _peer_reason(listener, code) == "the caller's oom_score_adj is not the server's"


def _fork_at(pid: int) -> int | None:
    """A child (sleeping until killed) given `pid` by setting the kernel's last pid (root); None if another took it."""
    for _ in range(20):
        try:
            Path("/proc/sys/kernel/ns_last_pid").write_text(str(pid - 1))
        except OSError:
            return None
        child = os.fork()
        if child == 0:
            os.execv("/bin/sleep", ["sleep", "60"])  # noqa: S606 - a fixed argv; the server's own rights
        if child == pid:
            return child
        os.kill(child, 9)
        os.waitpid(child, 0)
    return None


def test_a_caller_whose_pid_went_to_another_process_is_refused(listener: tuple[socket.socket, str]) -> None:
    """What is read by pid is the caller's own only while it lives.

    A pid reused by a process with the server's rights must not vouch for the caller that connected with fewer.
    """
    if os.geteuid() != 0:
        pytest.skip("setting the kernel's last pid needs root")
    sock, path = listener
    code = "import resource\nresource.setrlimit(resource.RLIMIT_NOFILE, (64, 64))"
    caller = subprocess.Popen([sys.executable, "-c", f"{code}\nimport socket\ns = socket.socket(socket.AF_UNIX)\n"
                               f"s.connect({path!r})\nimport os\nos._exit(0)"])  # fmt: skip
    conn, _ = sock.accept()
    with conn:
        caller.wait(30)  # the caller is gone; its connection stays
        other = _fork_at(caller.pid)
        if other is None:
            pytest.skip("another process took the pid first")
        try:
            reason = identity.check(conn, CLEAN)
        finally:
            os.kill(other, 9)
            os.waitpid(other, 0)
    assert isinstance(reason, str)


FOREIGN_PROC = """
import os, socket, subprocess, sys, tempfile
from ocivendir.server import identity
path = tempfile.mkdtemp(prefix="ovi-") + "/s"
server = socket.socket(socket.AF_UNIX)
server.bind(path)
server.listen(1)
env = {k: v for k, v in os.environ.items() if k in ("PATH", "LANG", "LC_ALL", "LC_CTYPE")}
for code in ("resource.setrlimit(resource.RLIMIT_NOFILE, (64, 64))", "pass"):
    caller = subprocess.Popen([sys.executable, "-c", f"import resource, socket, sys\\n{code}\\n"
                               f"s = socket.socket(socket.AF_UNIX)\\ns.connect({path!r})\\nsys.stdin.read()"],
                              stdin=subprocess.PIPE)
    conn, _ = server.accept()
    print(identity.check(conn, env))
    conn.close()
    caller.stdin.close()
    caller.wait()
"""


def test_where_proc_is_another_pid_namespaces_the_callers_limits_are_still_its_own() -> None:
    """Where /proc is a parent pid namespace's, the caller's limits are read from the caller, and it is refused.

    In a pid namespace whose /proc is its parent's (`unshare --pid` without `--mount-proc`), /proc/<pid> names another
    process than the caller (a kernel thread, or a process with the server's rights).

    The caller's limits are read with prlimit(2), which names processes as the worker does: a lowered limit is seen.
    Whatever else /proc would say of the caller is not the caller's: refused, with that reason.
    """
    unshare = shutil.which("unshare")
    command = [unshare or "unshare", "--user", "--map-root-user", "--pid", "--fork", sys.executable, "-c"]
    if unshare is None or subprocess.run([*command, "pass"], capture_output=True, check=False).returncode != 0:
        pytest.skip("needs unshare(1) and unprivileged user and pid namespaces")
    done = subprocess.run([*command, FOREIGN_PROC], env={**os.environ, "PYTHONPATH": str(CLI)},
                          capture_output=True, text=True, check=False, timeout=60)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "the caller's resource limits are not the server's",
        "/proc here is another pid namespace's: the caller's entry there is not the caller's",
    ]


LABEL_READS = """
import errno, json, os, socket, subprocess, sys
from ocivendir.server import identity
opened = []
sys.addaudithook(lambda event, args: opened.append(str(args[0])) if event == "open" else None)
left, right = socket.socketpair()
env = {k: v for k, v in os.environ.items() if k in ("PATH", "LANG", "LC_ALL", "LC_CTYPE")}
reason = found if isinstance(found := identity.check(left, env), str) else None
child = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE)
try:
    with open(f"/proc/{child.pid}/attr/current", "rb") as label:
        label.read()
    childs = "answered"
except OSError as exc:
    childs = "EINVAL" if exc.errno == errno.EINVAL else "other"
child.stdin.close()
child.wait()
print(json.dumps({"reason": reason, "no_labels": identity._NO_LABELS, "label_reads": opened.count("attr/current"),
                  "own": identity._OWN["security label"], "childs": childs}))
"""


def test_the_security_label_is_read_per_caller_only_where_a_security_module_answers() -> None:
    """Which modules answer attr/current is the kernel's: where none answers the server, none answers any process.

    Then a caller's label is "none" as the server's is, without reading it (a failed read and its exception per
    call); where one answers, it is read and compared as before.
    """
    done = subprocess.run([sys.executable, "-c", LABEL_READS], check=False, capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(CLI)}, timeout=60)  # fmt: skip
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["reason"] is None
    if report["no_labels"]:
        assert report["childs"] == "EINVAL"  # another process's read fails the same way
        assert report["own"] == "none"
        assert report["label_reads"] == 0
    else:
        assert report["childs"] in ("answered", "other")
        assert report["label_reads"] == 1
