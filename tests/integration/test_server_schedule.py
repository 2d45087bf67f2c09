"""A served call runs at its caller's scheduling: `nice`, `chrt`, `taskset` and `ionice` reach the worker.

Each test starts a real server and calls it with the venv's client linked as `vendir`, under the tools a user runs.
The server is started by hand with the suite's hooks on, so a call can ask its worker to report the scheduling it
runs with (`OCIVENDIR_SERVER_TEST_LEAK=scheduling`) instead of running. As root a worker puts its own scheduling back
after any call; without CAP_SYS_NICE (`setpriv --bounding-set=-sys_nice,-sys_admin`, for the server and its callers
alike, so their capabilities match) it cannot lower a nice value again, and it retires after such a call. A server
started under `nice` cannot serve an ordinary caller at all: it refuses it and retires, and that caller's next call
starts a server that serves both.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ocivendir import version_line
from tests.integration.test_kapp_controller import PLACEHOLDER, config, lock
from tests.support.builders import Pusher, make_image
from tests.support.registry import Registry
from tests.support.server import ServerPlace, console_script, ended, program, workers

pytestmark = pytest.mark.integration

HOOKS = {"OCIVENDIR_SERVER_TEST_HOOKS": "1", "OCIVENDIR_SERVER_WORKERS": "2", "OCIVENDIR_SERVER_MAX_CALLS": "100000"}
REPORT = {"OCIVENDIR_SERVER_TEST_LEAK": "scheduling"}


@pytest.fixture
def bin_dir(tmp_path: Path) -> Path:
    return tmp_path / "bin"


def _tool(name: str) -> str:
    found = shutil.which(name)
    if found is None:
        pytest.skip(f"needs {name}(1)")
    return found


def _unprivileged() -> list[str]:
    """The prefix that runs a program as root without CAP_SYS_NICE (and CAP_SYS_ADMIN, which allows real-time I/O)."""
    if os.geteuid() != 0:
        pytest.skip("needs root and setpriv(1) to run the server and its callers without CAP_SYS_NICE")
    return [_tool("setpriv"), "--bounding-set=-sys_nice,-sys_admin"]


def _start(place: ServerPlace, *prefix: str, **env: str) -> int:
    """Start a server under `prefix` (e.g. `nice -n 5`); its pid."""
    done = subprocess.run([*prefix, str(console_script()), "server", "start", "--json"], env=place.env(**env),
                          capture_output=True, text=True, check=False, timeout=60)  # fmt: skip
    assert done.returncode == 0, done.stderr
    pid = place.status()["pid"]
    assert isinstance(pid, int)
    return pid


def _report(place: ServerPlace, bin_dir: Path, *prefix: str) -> dict[str, object]:
    """The scheduling a served call runs with, as its worker reports it."""
    done = subprocess.run([*prefix, str(program(bin_dir, "vendir")), "version"], env=place.env(**REPORT),
                          capture_output=True, text=True, check=False, timeout=60)  # fmt: skip
    assert (done.returncode, done.stdout) == (0, ""), (done.stderr, place.log_tail())
    return dict(json.loads(done.stderr))


def _nice(pid: int) -> int:
    return int(Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[16])  # field 19 of the stat line


def test_a_niced_caller_is_served_at_its_priority_and_the_worker_serves_the_next_at_its_own(
    place: ServerPlace, bin_dir: Path
) -> None:
    """`nice -n 5 vendir sync` was refused (run in-process, ~100 ms); now its call runs in a worker at nice 5."""
    _start(place, **HOOKS)
    own = _report(place, bin_dir)
    niced = _report(place, bin_dir, _tool("nice"), "-n", "5")
    after = _report(place, bin_dir)
    assert niced["nice"] == own["nice"] + 5  # type: ignore[operator]
    if os.geteuid() == 0:  # CAP_SYS_NICE: the worker takes its own priority back and stays
        assert after == own
    else:  # it cannot: another worker, at the server's priority
        assert (after["nice"], after["pid"] != niced["pid"]) == (own["nice"], True)


def test_a_caller_on_fewer_cpus_and_at_idle_io_is_served_so_and_the_worker_stays(
    place: ServerPlace, bin_dir: Path
) -> None:
    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) < 2:
        pytest.skip("needs two CPUs to pin a caller to fewer")
    _start(place, *_unprivileged(), **HOOKS)
    own = _report(place, bin_dir, *_unprivileged())
    pinned = _report(place, bin_dir, *_unprivileged(), _tool("taskset"), "-c", str(cpus[0]))
    idle = _report(place, bin_dir, *_unprivileged(), _tool("ionice"), "-c", "3")
    after = _report(place, bin_dir, *_unprivileged())
    assert pinned["cpus"] == [cpus[0]]
    assert idle["io"] is not None
    assert int(idle["io"]) >> 13 == 3  # type: ignore[call-overload] # class idle
    assert after == own  # the same worker, with its own CPUs and I/O priority back: no privilege needed for either
    assert pinned["pid"] == idle["pid"] == own["pid"]


def test_without_cap_sys_nice_a_niced_callers_worker_retires_after_its_call(place: ServerPlace, bin_dir: Path) -> None:
    server = _start(place, *_unprivileged(), **HOOKS)
    own = _report(place, bin_dir, *_unprivileged())
    niced = _report(place, bin_dir, *_unprivileged(), _tool("nice"), "-n", "5")
    assert niced["nice"] == own["nice"] + 5  # type: ignore[operator]
    deadline = time.monotonic() + 20
    while niced["pid"] in workers(server):
        assert time.monotonic() < deadline, "the worker that could not take its priority back lived on"
        time.sleep(0.05)
    after = _report(place, bin_dir, *_unprivileged())
    assert after["nice"] == own["nice"]
    assert "cannot be put back after its caller's" in place.log_tail()


def test_a_server_started_under_nice_makes_way_for_an_ordinary_caller(place: ServerPlace, bin_dir: Path) -> None:
    """Such a server refused every ordinary caller (in-process each time) for as long as niced callers kept it."""
    unprivileged = _unprivileged()
    niced_server = _start(place, *unprivileged, _tool("nice"), "-n", "5")
    vendir = program(bin_dir, "vendir")
    done = subprocess.run([*unprivileged, str(vendir), "version"], env=place.env(), capture_output=True, text=True,
                          check=False, timeout=60)  # fmt: skip
    assert (done.returncode, done.stdout, done.stderr) == (0, version_line("vendir") + "\n", "")  # in-process
    deadline = time.monotonic() + 20
    while not ended(niced_server):
        assert time.monotonic() < deadline, "a server refusing a caller favoured over it lived on"
        time.sleep(0.05)
    assert "the caller's nice value cannot be taken on" in place.log_tail()
    assert "refused a caller favoured over this server" in place.log_tail()
    again = subprocess.run([*unprivileged, str(vendir), "version"], env=place.env(), capture_output=True, text=True,
                           check=False, timeout=60)  # fmt: skip
    assert (again.returncode, again.stdout, again.stderr) == (0, version_line("vendir") + "\n", "")
    while not (server := place.status().get("pid")):  # that call started a server at its own priority
        assert time.monotonic() < deadline, "no server started after the niced one made way"
        time.sleep(0.05)
    assert isinstance(server, int)
    assert server != niced_server
    assert _nice(server) == os.getpriority(os.PRIO_PROCESS, 0)
    niced = subprocess.run([*unprivileged, _tool("nice"), "-n", "5", str(vendir), "version"], env=place.env(),
                           capture_output=True, text=True, check=False, timeout=60)  # fmt: skip
    assert (niced.returncode, niced.stdout, niced.stderr) == (0, version_line("vendir") + "\n", "")
    assert place.status().get("pid") == server  # a niced caller is served by it, and makes no way
    assert "call 1 ended: exit status 0" in place.log_tail()


def _cpus_of_each_thread(pid: int) -> set[str]:
    """Each thread's allowed CPUs, as /proc lists them (one entry when all agree)."""
    found = set()
    for task in Path(f"/proc/{pid}/task").iterdir():
        status = (task / "status").read_text()
        found.add(next(line.split()[1] for line in status.splitlines() if line.startswith("Cpus_allowed_list:")))
    return found


def test_a_thread_that_outlives_calls_keeps_the_workers_own_scheduling(
    place: ServerPlace, registry: Registry, pusher: Pusher, repo_prefix: str, bin_dir: Path, tmp_path: Path
) -> None:
    """The registry's deadline watchdog serves every later call: started in a pinned call, it stayed on one CPU."""
    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) < 2:
        pytest.skip("needs two CPUs to pin a caller to fewer")
    ref = pusher.image(f"{repo_prefix}/img", make_image({"a.yml": "a: 1\n"}))
    _start(place, **HOOKS)
    worker = _report(place, bin_dir)["pid"]
    assert isinstance(worker, int)
    work = tmp_path / "w"
    work.mkdir()
    done = subprocess.run([_tool("taskset"), "-c", str(cpus[0]), str(program(bin_dir, "vendir")), "sync", "-f", "-",
                           "--lock-file", "/dev/null"], input=PLACEHOLDER + config("image", ref), capture_output=True,
                          text=True, cwd=work, env=place.env(VENDIR_CACHE_DIR=str(tmp_path / "cache")), check=False,
                          timeout=120)  # fmt: skip
    assert (done.returncode, done.stdout, done.stderr) == (0, lock("image", ref), "")
    assert _report(place, bin_dir)["pid"] == worker  # the call that armed the watchdog was this worker's
    assert _cpus_of_each_thread(worker) == _cpus_of_each_thread(os.getpid())


def _in_process(place: ServerPlace, *command: str) -> None:
    done = subprocess.run(list(command), env=place.env(), capture_output=True, text=True, check=False, timeout=60)
    assert (done.returncode, done.stdout, done.stderr) == (0, version_line("vendir") + "\n", ""), place.log_tail()


@pytest.mark.parametrize(("server", "caller"), [
    (("chrt", "-o", "0"), ("chrt", "-r", "-R", "10")),  # its server is reset to SCHED_OTHER
    (("nice", "-n", "5"), ("chrt", "-i", "0")),  # each would refuse the other's calls
    (("chrt", "-i", "0"), ("nice", "-n", "5")),
], ids=["SCHED_RESET_ON_FORK", "idle against nice", "nice against idle"])  # fmt: skip
def test_a_caller_whose_own_server_would_not_serve_this_ones_callers_makes_no_way(
    place: ServerPlace, bin_dir: Path, server: tuple[str, ...], caller: tuple[str, ...]
) -> None:
    """A server made way for any caller it could not take on: one under `chrt -R` restarted a server every other call
    (its own is reset, and refuses it again), and `nice -n 5` and `chrt -i 0` callers restarted one in turn.
    """  # noqa: D205
    unprivileged = _unprivileged()
    pid = _start(place, _tool(server[0]), *server[1:], *unprivileged)
    vendir = str(program(bin_dir, "vendir"))
    for _ in range(2):
        _in_process(place, _tool(caller[0]), *caller[1:], *unprivileged, vendir, "version")
    assert place.status().get("pid") == pid, place.log_tail()
    assert "favoured over this server" not in place.log_tail()


# a caller that hands its call over and reads nothing more (as one killed then would): the worker's `P` fails
GONE = """
import os, socket, sys, time
from ocivendir.server.wire import Request, encode_request, send_request
sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
sock.connect(sys.argv[1])
sock.shutdown(socket.SHUT_RD)
send_request(sock, encode_request(Request(op="call", build=sys.argv[2], umask=0o22, cwd=os.getcwd(),
                                          argv=["vendir", "version"], env=dict(os.environ))),
             [0, 1, 2, os.open(".", os.O_RDONLY | os.O_DIRECTORY)])
time.sleep(1)
"""


def test_a_worker_that_cannot_put_its_priority_back_after_a_caller_gone_before_the_call_retires(
    place: ServerPlace, bin_dir: Path
) -> None:
    """It went on serving at the niced caller's priority, and refused the next ordinary caller as favoured over it:
    the whole server retired.
    """  # noqa: D205
    unprivileged = _unprivileged()
    server = _start(place, *unprivileged)
    facts = place.status()
    done = subprocess.run([*unprivileged, _tool("nice"), "-n", "5", sys.executable, "-c", GONE, str(facts["socket"]),
                           str(facts["build"])], env=place.env(), capture_output=True, text=True, check=False,
                          timeout=60)  # fmt: skip
    assert done.returncode == 0, done.stderr
    deadline = time.monotonic() + 20
    while any(_nice(worker) != _nice(server) for worker in workers(server)):
        assert time.monotonic() < deadline, f"a worker stayed at its caller's priority\n{place.log_tail()}"
        time.sleep(0.05)
    served = subprocess.run([*unprivileged, str(program(bin_dir, "vendir")), "version"], env=place.env(),
                                    capture_output=True, text=True, check=False, timeout=60)  # fmt: skip
    assert served.returncode == 0, served.stderr
    assert place.status().get("pid") == server, place.log_tail()
    assert "favoured over this server" not in place.log_tail()


def test_niced_and_ordinary_callers_in_turn_end_up_served_by_one_server(place: ServerPlace, bin_dir: Path) -> None:
    """A niced caller that finds no server starts one at its priority; the next ordinary caller makes it retire and
    starts one at its own (`Y`), which then serves both kinds — not a server started every other call, none serving.
    """  # noqa: D205
    unprivileged = _unprivileged()
    vendir = str(program(bin_dir, "vendir"))
    nice = (_tool("nice"), "-n", "5")
    _in_process(place, *unprivileged, *nice, vendir, "version")  # no server yet: this starts one, at nice 5
    place.wait_for(lambda: bool(place.status()), timeout=30)
    niced_server = place.status()["pid"]
    _in_process(place, *unprivileged, vendir, "version")  # refused as favoured: that server retires, this starts one
    place.wait_for(lambda: place.status().get("pid") not in (None, niced_server), timeout=30)
    server = place.status()["pid"]
    assert isinstance(server, int)
    assert _nice(server) == os.getpriority(os.PRIO_PROCESS, 0)
    for _ in range(3):
        _in_process(place, *unprivileged, *nice, vendir, "version")
        _in_process(place, *unprivileged, vendir, "version")
    assert place.status().get("pid") == server, place.log_tail()
    assert place.log_tail(2000).count(" info: serving on ") == 2  # the niced server and its replacement, no other
    assert int(place.status()["calls"]) >= 6  # type: ignore[call-overload] # every call after the replacement served
