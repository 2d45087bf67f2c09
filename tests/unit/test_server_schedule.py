"""A worker takes on its caller's scheduling for a call and puts its own back, or says why it cannot.

Each case runs in a child process with real system calls: as the suite runs (with CAP_SYS_NICE where it is root),
and without CAP_SYS_NICE (`setpriv --bounding-set=-sys_nice,-sys_admin`, as an unprivileged worker is): a priority the worker
lowers it can take back only with that capability, and one a caller has above the worker's it cannot take at all.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from ocivendir.server import schedule

CLI = Path(__file__).resolve().parents[2] / "cli"
IDLE_IO = 3 << 13 | 7  # `ionice -c 3`: class idle, as the kernel reports it

PRELUDE = """
import json, os, sys
from dataclasses import replace
from ocivendir.server import schedule
own = schedule.of(0)
def report(**found):
    print(json.dumps(found, default=sorted))
"""


def _run(code: str, *, capable: bool = True) -> dict[str, object]:
    """Run `code` after PRELUDE in a child (without CAP_SYS_NICE unless `capable`); what it reported."""
    command = [sys.executable, "-c", PRELUDE + code]
    if not capable:
        setpriv = shutil.which("setpriv")
        if setpriv is None or os.geteuid() != 0:
            pytest.skip("needs root and setpriv(1) to run a worker without CAP_SYS_NICE")
        command = [setpriv, "--bounding-set=-sys_nice,-sys_admin", *command]  # either lets real-time I/O in
    elif os.geteuid() != 0:
        pytest.skip("needs CAP_SYS_NICE (root) to put a lowered priority back")
    done = subprocess.run(command, capture_output=True, text=True, check=False, timeout=60,
                          env={**os.environ, "PYTHONPATH": str(CLI)})  # fmt: skip
    assert done.returncode == 0, done.stderr
    return dict(json.loads(done.stdout))


TAKE_ON_AND_BACK = """
caller = replace(own, {change})
refused = schedule.take_on(caller, own)
during = schedule.of(0)
stuck = schedule.put_back(own)
report(refused=refused and refused.reason, during=getattr(during, {field!r}), taken=during == caller, stuck=stuck,
       back=schedule.of(0) == own)
"""


def _take_on(change: str, field: str, *, capable: bool = True) -> dict[str, object]:
    return _run(TAKE_ON_AND_BACK.format(change=change, field=field), capable=capable)


@pytest.mark.parametrize("capable", [True, False], ids=["root", "without CAP_SYS_NICE"])
def test_a_cpu_set_and_an_idle_io_class_are_taken_on_and_put_back_by_any_worker(capable: bool) -> None:
    """`taskset -c 0` and `ionice -c 3` need no privilege either way: every worker serves such callers and stays."""
    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) < 2:
        pytest.skip("needs two CPUs to pin a caller to fewer")
    found = _take_on(f"cpus=frozenset({{{cpus[0]}}})", "cpus", capable=capable)
    assert found == {"refused": None, "during": [cpus[0]], "taken": True, "stuck": None, "back": True}
    if schedule.io_priority() is None:
        pytest.skip(f"ioprio_set's number is not known on {os.uname().machine}")
    found = _take_on(f"io={IDLE_IO}", "io", capable=capable)
    assert found == {"refused": None, "during": IDLE_IO, "taken": True, "stuck": None, "back": True}


@pytest.mark.parametrize(("change", "field", "value"), [
    ("nice=own.nice + 5", "nice", 5),
    ("policy=os.SCHED_IDLE", "policy", os.SCHED_IDLE),
], ids=["nice", "SCHED_IDLE"])  # fmt: skip
def test_a_lower_priority_is_taken_on_and_put_back_with_cap_sys_nice(change: str, field: str, value: int) -> None:
    found = _take_on(change, field)
    assert found["during"] == (value if field == "policy" else os.getpriority(os.PRIO_PROCESS, 0) + value)
    assert (found["refused"], found["taken"], found["stuck"], found["back"]) == (None, True, None, True)


@pytest.mark.parametrize(("change", "field"), [("nice=own.nice + 5", "nice"), ("policy=os.SCHED_IDLE", "policy")],
                         ids=["nice", "SCHED_IDLE"])  # fmt: skip
def test_without_cap_sys_nice_a_lower_priority_is_taken_on_but_cannot_be_put_back(change: str, field: str) -> None:
    """The call runs at its caller's priority; the worker says why it must retire (it cannot raise its own again)."""
    found = _take_on(change, field, capable=False)
    assert (found["refused"], found["taken"], found["back"]) == (None, True, False)
    assert str(found["stuck"]).startswith("the worker's own scheduling cannot be put back after its caller's: ")


FAVOURED = """
caller = replace(own, {change})
refused = schedule.take_on(caller, own)
report(reason=refused.reason, favoured=refused.favoured, stuck=refused.stuck, unchanged=schedule.of(0) == own)
"""


@pytest.mark.parametrize(("change", "what"), [
    ("nice=own.nice - 1", "nice value"),
    ("policy=os.SCHED_FIFO, priority=1", "scheduling policy"),
    (f"io={1 << 13}", "I/O priority"),  # class real time
], ids=["nice", "SCHED_FIFO", "real-time I/O"])  # fmt: skip
def test_without_cap_sys_nice_a_caller_favoured_over_the_worker_is_refused_and_said_to_be(change: str,
                                                                                          what: str) -> None:  # fmt: skip
    """A server started under `nice` cannot serve an ordinary caller: the refusal says so, and nothing changed."""
    if what == "I/O priority" and schedule.io_priority() is None:
        pytest.skip(f"ioprio_set's number is not known on {os.uname().machine}")
    found = _run(FAVOURED.format(change=change), capable=False)
    assert str(found["reason"]).startswith(f"the caller's {what} cannot be taken on: ")
    assert (found["favoured"], found["stuck"], found["unchanged"]) == (True, None, True)


def test_a_caller_refused_for_a_real_time_policy_leaves_the_nice_value_it_would_raise_untouched() -> None:
    """`nice -n 5` and a real-time policy: the policy is refused before the nice value is taken on, so a worker
    without CAP_SYS_NICE has nothing to put back that it cannot, and stays.
    """  # noqa: D205
    found = _run(FAVOURED.format(change="nice=own.nice + 5, policy=os.SCHED_FIFO, priority=1"), capable=False)
    assert str(found["reason"]).startswith("the caller's scheduling policy cannot be taken on: ")
    assert found["favoured"] is False  # at nice 5 its own server could not take on the ordinary callers either
    assert (found["stuck"], found["unchanged"]) == (None, True)


@pytest.mark.parametrize("change", ["nice=own.nice - 1, policy=os.SCHED_IDLE",
                                    "nice=own.nice + 5, cpus=frozenset({4095})",
                                    "nice=own.nice + 5, policy=6"],  # 6: SCHED_DEADLINE, which os does not name
                         ids=["lower nice value, SCHED_IDLE", "higher nice value, no such CPU",
                              "higher nice value, SCHED_DEADLINE"])  # fmt: skip
def test_a_caller_refused_for_one_part_leaves_no_other_part_the_worker_cannot_put_back(change: str) -> None:
    """What raises a priority (and may be refused) is taken on before what lowers one (never refused, but not put
    back without CAP_SYS_NICE): a refusal finds nothing taken on that cannot be put back, and the worker stays.
    """  # noqa: D205
    found = _run(FAVOURED.format(change=change), capable=False)
    assert "cannot be taken on: " in str(found["reason"])
    assert (found["stuck"], found["unchanged"]) == (None, True)


@pytest.mark.parametrize("change", ["io=0, policy=os.SCHED_FIFO, priority=10", "io=0, policy=6, priority=0"],
                         ids=["SCHED_FIFO for SCHED_RR", "SCHED_DEADLINE"])  # fmt: skip
def test_a_worker_in_a_real_time_io_class_refused_a_lower_policy_keeps_its_io_class(change: str) -> None:
    """A worker without CAP_SYS_NICE that inherited SCHED_RR and real-time I/O (`ionice -c 1 chrt -r 10`): the
    policy, which the kernel refuses (another real-time policy without RLIMIT_RTPRIO, SCHED_DEADLINE), is tried before
    the I/O class is lowered, which it could never take back — the refusal leaves nothing behind, and the worker stays.
    """  # noqa: D205
    tools = [found for name in ("ionice", "chrt", "setpriv") if (found := shutil.which(name))]
    if os.geteuid() != 0 or len(tools) != 3 or schedule.io_priority() is None:
        pytest.skip("needs root, ionice(1), chrt(1), setpriv(1) and ioprio_set's number")
    ionice, chrt, setpriv = tools
    command = [ionice, "-c", "1", "-n", "4", chrt, "-r", "10", setpriv, "--bounding-set=-sys_nice,-sys_admin",
               sys.executable, "-c", PRELUDE + FAVOURED.format(change=change)]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, check=False, timeout=60,
                          env={**os.environ, "PYTHONPATH": str(CLI)})  # fmt: skip
    if done.returncode and "chrt" in done.stderr:
        pytest.skip(f"cannot run under SCHED_RR here: {done.stderr.strip()}")
    found = json.loads(done.stdout)
    assert str(found["reason"]).startswith("the caller's scheduling policy cannot be taken on: ")
    assert (found["stuck"], found["unchanged"]) == (None, True)


def test_a_caller_under_reset_on_fork_is_refused_but_not_favoured() -> None:
    """`chrt -R`: the server such a caller starts is reset (nice 0, SCHED_OTHER) and would refuse it in turn."""
    found = _run(FAVOURED.format(change="nice=own.nice - 1, policy=os.SCHED_OTHER | os.SCHED_RESET_ON_FORK"),
                 capable=False)  # fmt: skip
    assert str(found["reason"]).startswith("the caller's nice value cannot be taken on: ")
    assert (found["favoured"], found["stuck"], found["unchanged"]) == (False, None, True)


RT = 1 << 13  # class real time, level 0
_ORDINARY = schedule.Scheduling(nice=0, policy=os.SCHED_OTHER, priority=0, cpus=frozenset({0}), io=0)


@pytest.mark.parametrize(("caller", "own", "favoured"), [
    ({}, {"nice": 5}, True),  # an ordinary caller, a server started under `nice`
    ({"policy": os.SCHED_FIFO, "priority": 10}, {}, True),
    ({"io": RT | 4}, {}, True),
    ({"io": RT}, {"io": RT | 4}, True),
    ({"nice": -5, "policy": os.SCHED_OTHER | os.SCHED_RESET_ON_FORK}, {}, False),  # its server: nice 0
    ({"policy": os.SCHED_RR | os.SCHED_RESET_ON_FORK, "priority": 10}, {}, False),  # its server: SCHED_OTHER
    ({"policy": os.SCHED_IDLE}, {"nice": 5}, False),  # `chrt -i 0` against `nice -n 5`: each refuses the other
    ({"nice": 5}, {"policy": os.SCHED_IDLE}, False),
    ({"io": RT | 4, "nice": 5}, {}, False),
    ({"policy": os.SCHED_FIFO, "priority": 10}, {"policy": os.SCHED_RR, "priority": 10}, False),
    ({"policy": 6}, {}, False),  # SCHED_DEADLINE (not in the os module)
], ids=["nice", "FIFO", "RT I/O", "RT I/O level", "reset nice", "reset RR", "idle against nice", "nice against idle",
        "RT I/O at nice", "FIFO against RR", "DEADLINE"])  # fmt: skip
def test_a_caller_is_favoured_only_when_its_own_server_would_serve_this_ones_callers(
    caller: dict[str, Any], own: dict[str, Any], favoured: bool
) -> None:
    """A server makes way only for a caller whose server could take on its own scheduling: no two make way in turn."""
    theirs, ours = replace(_ORDINARY, **caller), replace(_ORDINARY, **own)
    assert schedule._favoured(theirs, ours) is favoured
    assert not (favoured and schedule._favoured(ours, theirs))


def test_a_cpu_set_outside_the_workers_is_refused_but_not_favoured() -> None:
    """A CPU the worker may not run on (none online here) is no reason for the server to make way."""
    found = _run(FAVOURED.format(change="cpus=frozenset({4095})"))
    assert str(found["reason"]).startswith("the caller's CPU affinity cannot be taken on: ")
    assert (found["favoured"], found["stuck"], found["unchanged"]) == (False, None, True)


def test_what_is_read_is_the_kernels() -> None:
    found = _run("os.nice(3)\nos.sched_setaffinity(0, {min(os.sched_getaffinity(0))})\nnow = schedule.of(0)\n"
                 "report(nice=now.nice, cpus=now.cpus, policy=now.policy, priority=now.priority)", capable=True)  # fmt: skip
    assert found == {"nice": os.getpriority(os.PRIO_PROCESS, 0) + 3, "cpus": [min(os.sched_getaffinity(0))],
                     "policy": os.SCHED_OTHER, "priority": 0}  # fmt: skip
