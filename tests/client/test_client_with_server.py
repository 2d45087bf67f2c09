"""The native client against the real resident server (this venv's `python -m ocivendir server`), end to end.

The client is compiled with this venv's build id (what the server computes for itself); its install directory holds
an `ocivendir` that runs this venv's entry point with argv[0] kept (as the frozen build's program does), for the
in-process fallback and the detached start. Whatever runs the call, the caller sees the same bytes.
"""

from __future__ import annotations

import os
import shutil
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ocivendir.server.build import build_id
from tests.client.conftest import compile_client
from tests.integration.test_kapp_controller import PLACEHOLDER, config, lock
from tests.support.builders import Pusher, make_image
from tests.support.faults import silent_server
from tests.support.registry import Registry
from tests.support.server import ServerPlace, left, program, worker_in

pytestmark = pytest.mark.integration

# The build's program, for this venv: argv[0] kept (a `#!` script would lose it to its own path).
PROGRAM = r"""
#include <stdlib.h>
#include <unistd.h>
int main(int argc, char **argv) {
    char **args = calloc((size_t)argc + 4, sizeof(char *));
    if (!args) return 127;
    args[0] = PYTHON; args[1] = "-c";
    args[2] = "import sys; del sys.argv[0]; from ocivendir.commands import run; run()";
    for (int i = 0; i < argc; i++) args[3 + i] = argv[i];
    execv(PYTHON, args);
    return 127;
}
"""


@pytest.fixture(scope="session")
def native(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An install directory: `vendir` (the native client, this venv's build id) and `ocivendir` (the program)."""
    where = tmp_path_factory.mktemp("native")
    compile_client(where / "vendir", build_id())
    (where / "program.c").write_text(PROGRAM)
    subprocess.run([shutil.which("cc") or "/usr/bin/cc", "-O2", "-o", str(where / "ocivendir"), f'-DPYTHON="{sys.executable}"',
                    str(where / "program.c")], check=True)  # fmt: skip
    return where / "vendir"


def run(place: ServerPlace, binary: Path, *args: str, cwd: Path, stdin: str = "", server: str = "on",
        **env: str) -> tuple[int, str, str]:  # fmt: skip
    done = subprocess.run([str(binary), *args], input=stdin, capture_output=True, text=True, cwd=cwd, timeout=120,
                          env=place.env(OCIVENDIR_SERVER=server, **env), check=False)  # fmt: skip
    return done.returncode, done.stdout, done.stderr


def served(place: ServerPlace) -> int:
    return int(place.status().get("calls", -1))  # type: ignore[call-overload]


def tree(root: Path) -> list[tuple[str, int, bytes]]:
    return sorted((str(p.relative_to(root)), stat.S_IMODE(p.lstat().st_mode), p.read_bytes() if p.is_file() else b"")
                  for p in root.rglob("*"))  # fmt: skip


def test_calls_through_the_native_client_give_the_bytes_of_the_in_process_call(place: ServerPlace, native: Path,
                                                                               tmp_path: Path) -> None:  # fmt: skip
    place.start()
    before = served(place)
    python_vendir = program(tmp_path / "bin", "vendir")
    cases: list[tuple[list[str], str]] = [(["version"], ""), (["sync", "-f", "-"], "kind: Config\napiVersion: nope\n"),
                                          (["sync", "-f", "-"], "directories: [\n"), (["sync", "--no-such-flag"], ""),
                                          (["sync", "-f", "vendir.yml"], "")]  # fmt: skip
    for args, stdin in cases:
        native_on = run(place, native, *args, stdin=stdin, cwd=tmp_path)
        in_process = run(place, python_vendir, *args, stdin=stdin, cwd=tmp_path, server="off")
        assert native_on == in_process, args
        assert native_on[0] != 0 or args == ["version"]
    assert served(place) - before == len(cases) + 1  # the native calls, and the status query itself


def test_a_kapp_shaped_sync_through_the_native_client_gives_the_lock_and_tree_of_the_in_process_sync(
    place: ServerPlace, native: Path, registry: Registry, pusher: Pusher, repo_prefix: str, tmp_path: Path
) -> None:
    ref = pusher.image(f"{repo_prefix}/img", make_image({"a.yml": "a: 1\n", "dir/b.txt": "b"}))
    place.start()
    before = served(place)
    outcomes = {}
    for name, binary, server in (("native", native, "on"), ("python", program(tmp_path / "bin", "vendir"), "off")):
        work = tmp_path / name
        work.mkdir()
        outcome = run(place, binary, "sync", "-f", "-", "--lock-file", "/dev/null", stdin=PLACEHOLDER + config("image", ref),
                      cwd=work, server=server, OCIVENDIR_CACHE_DIR=str(tmp_path / f"cache-{name}"))  # fmt: skip
        outcomes[name] = (*outcome, tree(work))
    assert outcomes["native"] == outcomes["python"]
    assert outcomes["native"][:3] == (0, lock("image", ref), "")
    assert served(place) - before == 2  # the native call and the status query (the in-process one never came)


def test_the_first_native_call_runs_in_process_and_starts_the_server_that_serves_the_next(
    place: ServerPlace, native: Path, tmp_path: Path
) -> None:
    place.dir.rmdir()  # no server directory yet: the server makes it
    process = subprocess.Popen([str(native), "version"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=tmp_path,
                               env=place.env(OCIVENDIR_SERVER="auto"))  # fmt: skip
    out, err = process.communicate(timeout=60)  # EOF on its pipes: the server it started holds none of them
    assert (process.returncode, err) == (0, b"")
    assert out.startswith(b"vendir version ")  # in-process, argv[0] kept
    place.wait_for(lambda: place.status() != {}, timeout=60)
    assert stat.S_IMODE(place.dir.stat().st_mode) == 0o700
    before = served(place)
    assert run(place, native, "version", cwd=tmp_path, server="auto") == (0, out.decode(), "")
    assert served(place) - before == 2  # the call, and this query


def _stalled(place: ServerPlace, native: Path, tmp_path: Path, url: str) -> subprocess.Popen[str]:
    """A native call whose worker waits on a registry that never answers."""
    process = subprocess.Popen([str(native), "sync", "-f", "-", "--lock-file", "/dev/null"], stdin=subprocess.PIPE,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path,
                               env=place.env(OCIVENDIR_TIMEOUT="60s"))  # fmt: skip
    assert process.stdin is not None
    process.stdin.write(config("image", f"{url.removeprefix('http://')}/x/y:v1", secret=None))
    process.stdin.close()
    process.stdin = None
    return process


def _worker(place: ServerPlace, server_pid: int, tmp_path: Path) -> int:
    worker = worker_in(place, server_pid, tmp_path)  # a worker works in its caller's directory
    time.sleep(0.3)  # the worker has taken the call and waits on the silent registry
    return worker


@pytest.mark.parametrize(("signo", "outcome", "stderr"), [
    (signal.SIGTERM, -signal.SIGTERM, ""), (signal.SIGHUP, -signal.SIGHUP, ""),
    (signal.SIGINT, 1, "\nvendir: Error: Aborted\n"),
])  # fmt: skip
def test_signals_to_the_native_client_reach_the_worker(place: ServerPlace, native: Path, tmp_path: Path, signo: int,
                                                       outcome: int, stderr: str) -> None:  # fmt: skip
    server_pid = place.start()
    with silent_server() as silent:
        process = _stalled(place, native, tmp_path, silent.url)
        worker = _worker(place, server_pid, tmp_path)
        process.send_signal(signo)
        _, err = process.communicate(timeout=30)
    assert (process.returncode, err) == (outcome, stderr)
    place.wait_for(lambda: left(worker, tmp_path))  # ended (SIGTERM, SIGHUP) or back in the pool (SIGINT)


def test_a_killed_native_client_stops_its_worker(place: ServerPlace, native: Path, tmp_path: Path) -> None:
    server_pid = place.start()
    with silent_server() as silent:
        process = _stalled(place, native, tmp_path, silent.url)
        worker = _worker(place, server_pid, tmp_path)
        process.kill()
        process.communicate(timeout=30)
        place.wait_for(lambda: not Path(f"/proc/{worker}").exists())


def test_a_killed_worker_fails_the_native_call_clearly_and_the_next_is_served(place: ServerPlace, native: Path,
                                                                              tmp_path: Path) -> None:  # fmt: skip
    server_pid = place.start()
    with silent_server() as silent:
        process = _stalled(place, native, tmp_path, silent.url)
        worker = _worker(place, server_pid, tmp_path)
        os.kill(worker, signal.SIGKILL)
        out, err = process.communicate(timeout=30)
    assert (process.returncode, out) == (1, "")
    assert err == f"vendir: Error: ocivendir server: the call ended without an exit status (worker {worker} stopped)\n"
    assert run(place, native, "version", cwd=tmp_path)[0] == 0


def test_a_first_call_with_no_server_is_served_by_the_server_it_starts(place: ServerPlace, native: Path,
                                                                       tmp_path: Path) -> None:  # fmt: skip
    """It waits for the server to listen rather than run in-process beside its start-up (a second start-up's CPU)."""
    done = run(place, native, "version", "--debug", cwd=tmp_path, OCIVENDIR_SERVER_TEST_HOOKS="1")
    assert done[0] == 0
    assert "running in-process" not in done[2]
    assert served(place) == 1  # the call (a status query reports the connections before its own)
    environ = Path(f"/proc/{place.status()['pid']}/environ").read_bytes().split(b"\0")
    assert f"OCIVENDIR_SERVER_DIR={place.dir}".encode() in environ
    assert not [entry for entry in environ if entry.startswith(b"OCIVENDIR_SERVER_TEST_HOOKS=")]  # by hand only


def test_a_server_of_another_build_is_never_used(place: ServerPlace, native: Path, tmp_path: Path) -> None:
    place.start()
    before = served(place)
    other = compile_client(tmp_path / "vendir", "00000000000000ff")
    (tmp_path / "ocivendir").symlink_to(native.parent / "ocivendir")
    done = run(place, other, "version", "--debug", cwd=tmp_path)
    assert done[0] == 0
    assert "/server-00000000000000ff.sock: No such file or directory); one is starting); running in-process" in done[2]
    assert served(place) - before == 1  # only the status query


def test_a_sitecustomize_on_pythonpath_runs_in_the_native_call_that_carries_it_and_nowhere_else(
    place: ServerPlace, native: Path, tmp_path: Path
) -> None:
    """The native client runs such a call in-process (its own pid, exec'd) and never hands it to a server."""
    planted = tmp_path / "planted"
    planted.mkdir()
    marker = tmp_path / "marker"
    (planted / "sitecustomize.py").write_text(f"import os\nopen({str(marker)!r}, 'a').write(f'{{os.getpid()}}\\n')\n")
    place.start()
    before = served(place)
    process = subprocess.Popen([str(native), "version", "--debug"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True, cwd=tmp_path, env=place.env(PYTHONPATH=str(planted)))  # fmt: skip
    out, err = process.communicate(timeout=60)
    assert (process.returncode, out.startswith("vendir version ")) == (0, True)
    assert "(PYTHONPATH is set: it acts when a program starts); running in-process" in err
    assert run(place, native, "version", cwd=tmp_path)[0] == 0
    assert marker.read_text() == f"{process.pid}\n"
    assert served(place) - before == 2  # the plain call and the status query: the planted one never came


def test_held_connections_stall_no_native_call(place: ServerPlace, native: Path, tmp_path: Path) -> None:
    """Ten connections that send nothing hold the only worker and the server: the native call runs in-process at once."""
    import socket  # noqa: PLC0415

    place.start(OCIVENDIR_SERVER_WORKERS="1")
    held = [socket.socket(socket.AF_UNIX) for _ in range(10)]
    try:
        for sock in held:
            sock.connect(str(place.dir / f"server-{build_id()}.sock"))  # and never send a request
        assert place.status()["busy"] == 1
        code, out, err = run(place, native, "version", "--debug", cwd=tmp_path)
        assert (code, out.startswith("vendir version ")) == (0, True)
        assert "busy: all 1 workers are serving calls" in err
    finally:
        for sock in held:
            sock.close()


INLINE = ("apiVersion: vendir.k14s.io/v1alpha1\nkind: Config\ndirectories:\n- path: vendor\n  contents:\n"
          "  - path: a\n    inline: {paths: {x.txt: hi}}\n")  # fmt: skip


def _with_fd(binary: Path, args: list[str], cwd: Path, env: dict[str, str], fd: int, target: int) -> int:
    """Run `binary` with the caller's descriptor `target` at number `fd`, as `3>file` or `<(…)` gives it."""
    os.dup2(target, fd, inheritable=True)
    try:
        return subprocess.run([str(binary), *args], cwd=cwd, env=env, pass_fds=(fd,), capture_output=True,
                              timeout=120, check=False).returncode  # fmt: skip
    finally:
        os.close(fd)


@pytest.mark.parametrize("client", ["native", "python"])
def test_a_call_naming_its_own_descriptors_runs_in_its_own_process(
    place: ServerPlace, native: Path, tmp_path: Path, client: str
) -> None:
    """`--lock-file /dev/fd/61 61>file` and `-f <(…)` name the caller's descriptors: a worker would reach its own.

    The lock used to land in the worker's descriptor 3 (its /dev/null: success reported, the lock lost), the config
    read failed; both now run in-process, and a cache index the worker keeps open is never written through.
    """
    place.start()
    binary = native if client == "native" else program(tmp_path / "bin", "vendir")
    work = tmp_path / "work"
    (work / "vendor").mkdir(parents=True)
    (work / "vendir.yml").write_text(INLINE)
    env = place.env(OCIVENDIR_SERVER="on", VENDIR_CACHE_DIR=str(tmp_path / "cache"))
    for _ in range(2):  # a served call first: a worker that holds descriptors of its own
        assert run(place, binary, "sync", "-f", "vendir.yml", "--lock-file", "/dev/null", cwd=work)[0] == 0
    lock_file = tmp_path / "lock.yml"
    with lock_file.open("wb") as sink:
        code = _with_fd(binary, ["sync", "--lock-file", "/dev/fd/61"], work, env, 61, sink.fileno())
    assert code == 0
    assert lock_file.read_bytes().startswith(b"apiVersion: vendir.k14s.io/v1alpha1\ndirectories:")
    read_end, write_end = os.pipe()
    os.write(write_end, INLINE.encode())
    os.close(write_end)
    try:
        code = _with_fd(binary, ["sync", "-f", "/dev/fd/63", "--lock-file", "/dev/null"], work, env, 63, read_end)
    finally:
        os.close(read_end)
    assert code == 0
    assert (work / "vendor" / "a" / "x.txt").read_text() == "hi"
    done = run(place, binary, "sync", "-f", "vendir.yml", "--lock-file", "/dev/null", cwd=work)
    assert done[0] == 0, done


def test_a_python_client_with_stdout_closed_runs_in_process_as_it_would_without_a_server(
    place: ServerPlace, tmp_path: Path
) -> None:
    """Its connection would take descriptor 1 and be sent as the call's stdout: the output would enter the frames."""
    place.start()
    binary = program(tmp_path / "bin", "vendir")
    outcomes = []
    for server in ("on", "off"):
        done = subprocess.run(f"exec {binary} version >&-", shell=True, cwd=tmp_path, capture_output=True, text=True,  # noqa: S602
                              env=place.env(OCIVENDIR_SERVER=server), timeout=60, check=False)  # fmt: skip
        outcomes.append((done.returncode, done.stderr.splitlines()[-1:] if done.stderr else []))
    assert outcomes[0] == outcomes[1]


@pytest.mark.parametrize("client", ["native", "python"])
@pytest.mark.parametrize("signo", [signal.SIGHUP, signal.SIGTERM])
def test_a_signal_the_caller_was_started_with_ignored_stays_ignored(
    place: ServerPlace, native: Path, tmp_path: Path, client: str, signo: int
) -> None:
    """`nohup vendir sync … &`: a signal the caller was started with ignored is not relayed to the worker.

    It used to be, which ended the call; in-process the signal stays ignored and the call ends as it would (here at
    its network deadline). The call is still served.
    """
    place.start()
    before = served(place)
    binary = native if client == "native" else program(tmp_path / "bin", "vendir")
    with silent_server() as silent:
        process = subprocess.Popen(
            [str(binary), "sync", "-f", "-", "--lock-file", "/dev/null"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=tmp_path,
            env=place.env(OCIVENDIR_SERVER="on", OCIVENDIR_TIMEOUT="3s"),
            preexec_fn=lambda: signal.signal(signo, signal.SIG_IGN),  # noqa: PLW1509 - one thread starts it
        )
        assert process.stdin is not None
        process.stdin.write(config("image", f"{silent.url.removeprefix('http://')}/x/y:v1", secret=None))
        process.stdin.close()
        process.stdin = None
        time.sleep(1.0)  # the call waits on the silent registry
        process.send_signal(signo)
        _, err = process.communicate(timeout=60)
    assert process.returncode == 1, err
    assert "network deadline of 3s exceeded" in err
    assert served(place) - before == 2  # the call, and this query


def test_a_native_caller_a_server_makes_way_for_starts_the_server_that_replaces_it(place: ServerPlace, native: Path,
                                                                                  tmp_path: Path) -> None:  # fmt: skip
    """A server started under `nice` refuses an ordinary caller as favoured over it (`Y`) and retires; the native
    client waits for its lock to go, starts one at its own scheduling and runs the call in-process.
    """  # noqa: D205
    setpriv, nice = shutil.which("setpriv"), shutil.which("nice")
    if os.geteuid() != 0 or setpriv is None or nice is None:
        pytest.skip("needs root, setpriv(1) and nice(1) to run a server and its caller without CAP_SYS_NICE")
    unprivileged = [setpriv, "--bounding-set=-sys_nice,-sys_admin"]
    subprocess.run([*unprivileged, nice, "-n", "5", str(native.parent / "ocivendir"), "server", "start"],
                   env=place.env(), check=True, capture_output=True, timeout=60)  # fmt: skip
    niced = place.status()["pid"]
    done = subprocess.run([*unprivileged, str(native), "version"], capture_output=True, text=True, cwd=tmp_path,
                          env=place.env(), check=False, timeout=60)  # fmt: skip
    assert (done.returncode, done.stderr) == (0, "")
    assert done.stdout.startswith("vendir version ")
    place.wait_for(lambda: place.status().get("pid") not in (None, niced), timeout=30)
    server = place.status()["pid"]
    assert isinstance(server, int)
    assert Path(f"/proc/{server}/stat").read_text().rpartition(")")[2].split()[16] == str(
        os.getpriority(os.PRIO_PROCESS, 0)
    )
    assert "one at this caller's scheduling is starting" in place.log_tail()
