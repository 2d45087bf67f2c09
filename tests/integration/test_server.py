"""The resident server and its Python client: the same call gives the same bytes, whoever runs it.

A call through the server gives exactly the stdout, stderr, exit code and tree of the same call in-process; the
first call runs in-process and leaves a server behind; anything unexpected in the server's place means in-process;
signals reach the worker; a kill of client, worker or server never hangs a caller and never costs the target.
"""

from __future__ import annotations

import os
import random
import resource
import signal
import socket
import stat
import struct
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from ocivendir import version_line
from ocivendir.fs.locks import hold_lock
from ocivendir.server import wire
from ocivendir.server.build import build_id
from tests.integration.test_kapp_controller import PLACEHOLDER, config, lock
from tests.support.builders import Pusher, make_image, publish_bundle
from tests.support.faults import silent_server
from tests.support.registry import Registry
from tests.support.server import ServerPlace, ended, left, program, server_parents, worker_in, workers

pytestmark = pytest.mark.integration


@pytest.fixture
def bin_dir(tmp_path: Path) -> Path:
    return tmp_path / "bin"


def call(place: ServerPlace, binary: Path, *args: str, stdin: str = "", cwd: Path, server: str = "on",
         **env: str) -> subprocess.CompletedProcess[str]:  # fmt: skip
    return subprocess.run([str(binary), *args], input=stdin, capture_output=True, text=True, cwd=cwd, timeout=120,
                          env=place.env(OCIVENDIR_SERVER=server, **env), check=False)  # fmt: skip


def tree(root: Path) -> list[tuple[str, int, bytes]]:
    return sorted((str(p.relative_to(root)), stat.S_IMODE(p.lstat().st_mode), p.read_bytes() if p.is_file() else b"")
                  for p in root.rglob("*"))  # fmt: skip


def kapp_call(place: ServerPlace, vendir: Path, ref: str, work: Path, *, server: str = "on",
              cache: Path | None = None) -> subprocess.CompletedProcess[str]:  # fmt: skip
    work.mkdir(parents=True)
    extra = {"VENDIR_CACHE_DIR": str(cache)} if cache else {}
    return call(place, vendir, "sync", "-f", "-", "--lock-file", "/dev/null", stdin=PLACEHOLDER + config("image", ref),
                cwd=work, server=server, **extra)  # fmt: skip


def served_calls(place: ServerPlace) -> int:
    return int(place.status().get("calls", -1))  # type: ignore[call-overload]


def test_the_first_call_runs_in_process_and_leaves_a_server_that_serves_the_next(
    place: ServerPlace, registry: Registry, pusher: Pusher, repo_prefix: str, bin_dir: Path, tmp_path: Path
) -> None:
    ref = pusher.image(f"{repo_prefix}/img", make_image({"a.yml": "a: 1\n"}))
    vendir = program(bin_dir, "vendir")
    assert place.status() == {}
    first = kapp_call(place, vendir, ref, tmp_path / "w1", server="auto", cache=tmp_path / "cache")
    assert (first.returncode, first.stdout, first.stderr) == (0, lock("image", ref), "")
    place.wait_for(lambda: place.status() != {})
    before = served_calls(place)
    second = kapp_call(place, vendir, ref, tmp_path / "w2", server="auto", cache=tmp_path / "cache")
    assert (second.returncode, second.stdout, second.stderr) == (0, lock("image", ref), "")
    assert served_calls(place) == before + 2  # the warm call, then this status query
    assert tree(tmp_path / "w1") == tree(tmp_path / "w2")


@pytest.mark.parametrize("prog", ["vendir", "ocivendir"])
def test_a_served_call_gives_the_bytes_exit_code_and_tree_of_the_in_process_call(
    place: ServerPlace, registry: Registry, pusher: Pusher, repo_prefix: str, bin_dir: Path, tmp_path: Path, prog: str
) -> None:
    ref = pusher.image(f"{repo_prefix}/img", make_image({"a.yml": "a: 1\n", "dir/b.txt": "b"}))
    binary = program(bin_dir, prog)
    place.start()
    stdins = [PLACEHOLDER + config("image", ref), "kind: Config\napiVersion: nope\n", "directories: [\n"]
    for number, stdin in enumerate(stdins):
        results = {}
        for server in ("off", "on"):
            work = tmp_path / f"{server}{number}"
            work.mkdir()
            done = call(place, binary, "sync", "-f", "-", "--lock-file", "lock.yml", stdin=stdin, cwd=work,
                        server=server, OCIVENDIR_CACHE_DIR=str(tmp_path / f"cache-{server}"))  # fmt: skip
            results[server] = (done.returncode, done.stdout, done.stderr, tree(work))
        assert results["on"] == results["off"]
    assert served_calls(place) >= len(stdins) + 1


def test_imgpkg_mode_and_usage_errors_match_in_process(place: ServerPlace, bin_dir: Path, tmp_path: Path,
                                                       registry: Registry) -> None:  # fmt: skip
    place.start()
    cases = [("imgpkg", ["pull", "-i", f"{registry.host}/no/such:tag", "-o", "out"]),
             ("ocivendir", ["pull", "--no-such-flag"]), ("ocivendir", ["version"]), ("vendir", ["version"]),
             ("ocivendir", ["sync", "--chdir", "/nonexistent"])]  # fmt: skip
    for prog, args in cases:
        outcomes = [call(place, program(bin_dir, prog), *args, cwd=tmp_path, server=server) for server in ("off", "on")]
        assert (outcomes[0].returncode, outcomes[0].stdout, outcomes[0].stderr) == (
            outcomes[1].returncode, outcomes[1].stdout, outcomes[1].stderr), (prog, args)  # fmt: skip


def _eof_after_exit(place: ServerPlace, binary: Path, cwd: Path) -> float:
    process = subprocess.Popen([str(binary), "version"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                               cwd=cwd, env=place.env())  # fmt: skip
    assert process.stdout is not None
    data = process.stdout.read1(4096)
    process.wait(30)
    exited = time.monotonic()
    got: list[bytes] = []
    reader = threading.Thread(target=lambda: got.append(process.stdout.read()), daemon=True)  # type: ignore[union-attr]
    reader.start()
    reader.join(5)
    assert not reader.is_alive(), "stdout never reached EOF after the client exited"
    assert data.startswith(b"ocivendir ")
    return time.monotonic() - exited


def test_a_reader_of_stdout_sees_eof_as_soon_as_the_client_exits_first_call_included(
    place: ServerPlace, bin_dir: Path, tmp_path: Path
) -> None:
    binary = program(bin_dir, "ocivendir")
    assert _eof_after_exit(place, binary, tmp_path) < 1.0  # the first call: a server is being started
    place.wait_for(lambda: place.status() != {})
    assert _eof_after_exit(place, binary, tmp_path) < 1.0


def test_the_worker_works_in_the_callers_directory_with_its_umask_and_environment(
    place: ServerPlace, registry: Registry, pusher: Pusher, repo_prefix: str, bin_dir: Path, tmp_path: Path
) -> None:
    ref = pusher.image(f"{repo_prefix}/img", make_image({"a.yml": "a"}))
    place.start()
    work = tmp_path / "work"
    work.mkdir()
    stream = config("image", ref, secret=None)
    cache = tmp_path / "callers-cache"
    done = subprocess.run([str(program(bin_dir, "ocivendir")), "sync", "-f", "-"], input=stream, text=True,
                          capture_output=True, cwd=work, timeout=60, check=False,
                          env=place.env(OCIVENDIR_CACHE_DIR=str(cache)),
                          preexec_fn=lambda: os.umask(0o077))  # the caller's umask  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert stat.S_IMODE((work / "vendir.lock.yml").stat().st_mode) == 0o600
    assert (work / "0" / "a.yml").read_text() == "a"
    assert cache.is_dir()
    assert served_calls(place) >= 2


def _stalled(place: ServerPlace, bin_dir: Path, tmp_path: Path, url: str) -> subprocess.Popen[str]:
    work = tmp_path / f"stalled-{time.monotonic_ns()}"
    work.mkdir()
    process = subprocess.Popen([str(program(bin_dir, "vendir")), "sync", "-f", "-", "--lock-file", "/dev/null"],
                               stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               cwd=work, env=place.env(OCIVENDIR_TIMEOUT="60s"))  # fmt: skip
    assert process.stdin is not None
    process.stdin.write(config("image", f"{url.removeprefix('http://')}/x/y:v1", secret=None))
    process.stdin.close()
    process.stdin = None  # communicate() then only reads
    return process


def _serving(place: ServerPlace, server_pid: int, process: subprocess.Popen[str]) -> int:
    """The worker serving the stalled call of `process`, once it waits on the silent registry."""
    worker = worker_in(place, server_pid, Path(f"/proc/{process.pid}/cwd").readlink())
    time.sleep(0.3)  # the worker has taken the call and is waiting on the silent registry
    return worker


@pytest.mark.parametrize(("signo", "outcome"), [(signal.SIGTERM, -signal.SIGTERM), (signal.SIGHUP, -signal.SIGHUP),
                                                (signal.SIGINT, 1)])  # fmt: skip
def test_signals_to_the_client_reach_the_worker(place: ServerPlace, bin_dir: Path, tmp_path: Path, signo: int,
                                                outcome: int) -> None:  # fmt: skip
    server_pid = place.start()
    with silent_server() as silent:
        process = _stalled(place, bin_dir, tmp_path, silent.url)
        cwd = Path(f"/proc/{process.pid}/cwd").readlink()
        worker = _serving(place, server_pid, process)
        process.send_signal(signo)
        _, err = process.communicate(timeout=30)
    assert process.returncode == outcome
    if signo == signal.SIGINT:
        assert err == "\nvendir: Error: Aborted\n"  # the worker's KeyboardInterrupt, framed as in-process (click's)
    else:
        place.wait_for(lambda: ended(worker))
    place.wait_for(lambda: left(worker, cwd))


def test_a_killed_client_stops_its_worker(place: ServerPlace, bin_dir: Path, tmp_path: Path) -> None:
    server_pid = place.start()
    with silent_server() as silent:
        process = _stalled(place, bin_dir, tmp_path, silent.url)
        worker = _serving(place, server_pid, process)
        process.kill()
        process.wait(10)
        place.wait_for(lambda: not Path(f"/proc/{worker}").exists())  # SIGTERM, as the in-process call would get


def test_a_killed_worker_fails_the_call_clearly_and_the_next_call_is_served(
    place: ServerPlace, bin_dir: Path, tmp_path: Path
) -> None:
    server_pid = place.start()
    with silent_server() as silent:
        process = _stalled(place, bin_dir, tmp_path, silent.url)
        os.kill(_serving(place, server_pid, process), signal.SIGKILL)
        _, err = process.communicate(timeout=30)
    assert process.returncode == 1
    assert err.startswith("vendir: Error: ocivendir server: the call ended without an exit status (worker ")
    done = call(place, program(bin_dir, "vendir"), "version", cwd=tmp_path)
    assert done.returncode == 0
    assert done.stdout.startswith("vendir version ")


def test_a_killed_server_leaves_running_calls_alone_and_the_next_call_starts_a_new_one(
    place: ServerPlace, registry: Registry, pusher: Pusher, repo_prefix: str, bin_dir: Path, tmp_path: Path
) -> None:
    ref = pusher.image(f"{repo_prefix}/img", make_image({"a.yml": "a"}))
    server_pid = place.start()
    with silent_server() as silent:
        process = _stalled(place, bin_dir, tmp_path, silent.url)
        worker = _serving(place, server_pid, process)
        os.kill(server_pid, signal.SIGKILL)
        time.sleep(0.2)
        assert Path(f"/proc/{worker}").exists()  # the call goes on without its server
        process.send_signal(signal.SIGTERM)
        process.communicate(timeout=30)
    assert process.returncode == -signal.SIGTERM
    first = kapp_call(place, program(bin_dir, "vendir"), ref, tmp_path / "after")  # stale socket: in-process
    assert (first.returncode, first.stdout, first.stderr) == (0, lock("image", ref), "")
    place.wait_for(lambda: place.status().get("pid") not in ({}, None, server_pid))


def test_a_killed_server_refuses_new_calls_at_once_though_its_busy_worker_still_holds_the_socket(
    place: ServerPlace, bin_dir: Path, tmp_path: Path
) -> None:
    """Killed mid-call, its worker goes on and holds a copy of the listening socket; a new call is refused at once.

    It runs in-process and starts a new server (as for any stale socket), instead of waiting in the dead server's
    queue until that call ends. The stalled call would end after a minute; the new call must not wait for it.
    """
    server_pid = place.start()
    with silent_server() as silent:
        process = _stalled(place, bin_dir, tmp_path, silent.url)
        worker = _serving(place, server_pid, process)
        os.kill(server_pid, signal.SIGKILL)
        place.wait_for(lambda: ended(server_pid))
        try:
            done = subprocess.run([str(program(bin_dir, "vendir")), "version", "--debug"], capture_output=True,
                                  text=True, cwd=tmp_path, env=place.env(), timeout=30, check=False)  # fmt: skip
            assert Path(f"/proc/{worker}").exists()  # the call goes on without its server
        finally:
            process.send_signal(signal.SIGTERM)
            process.communicate(timeout=30)
    assert done.returncode == 0
    assert "ocivendir server unavailable (no server yet; one is starting); running in-process" in done.stderr


def test_kills_of_client_or_worker_at_any_moment_leave_the_old_tree_or_the_new_one(
    place: ServerPlace, registry: Registry, pusher: Pusher, repo_prefix: str, bin_dir: Path, tmp_path: Path
) -> None:
    old = pusher.image(f"{repo_prefix}/img", make_image({"version.txt": "old", "pad.bin": "p" * 3_000_000}))
    new = pusher.image(f"{repo_prefix}/img", make_image({"version.txt": "new", "pad.bin": "q" * 3_000_000}))
    server_pid = place.start()
    work = tmp_path / "work"
    work.mkdir()
    env = place.env(OCIVENDIR_CACHE_DIR=str(tmp_path / "cache"))
    vendir = program(bin_dir, "vendir")

    def run(ref: str) -> subprocess.Popen[bytes]:
        stream = config("image", ref, secret=None).replace('path: "0"', "path: vendor")
        process = subprocess.Popen([str(vendir), "sync", "-f", "-", "--lock-file", "/dev/null"], stdin=subprocess.PIPE,
                                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=work, env=env)  # fmt: skip
        assert process.stdin is not None
        process.stdin.write(stream.encode())
        process.stdin.close()
        return process

    assert run(old).wait(60) == 0
    chooser = random.Random(4321)  # noqa: S311 - reproducible kill moments
    for round_number in range(10):
        process = run(new if chooser.random() < 0.5 else old)
        time.sleep(chooser.uniform(0.02, 0.4))
        victims = [process.pid] if round_number % 2 else [*workers(server_pid), process.pid]
        for pid in victims:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        process.wait(30)
        place.wait_for(lambda: place.status().get("busy") == 0)
        version = work / "vendor" / "version.txt"
        if version.exists():
            assert version.read_text() in {"old", "new"}
            assert (work / "vendor/pad.bin").stat().st_size == 3_000_000
        assert run(new).wait(60) == 0
        assert (work / "vendor/version.txt").read_text() == "new"
        assert [p.name for p in work.iterdir()] == ["vendor"]
    assert place.status()["pid"] == server_pid


def test_a_stale_socket_file_means_in_process_and_a_new_server(place: ServerPlace, bin_dir: Path,
                                                                tmp_path: Path) -> None:  # fmt: skip
    place.dir.chmod(0o700)
    stale = place.dir / f"server-{build_id()}.sock"
    with socket.socket(socket.AF_UNIX) as dead:
        dead.bind(str(stale))  # bound, never listening: connect() is refused
    done = call(place, program(bin_dir, "vendir"), "version", cwd=tmp_path)
    assert done.returncode == 0
    assert done.stdout.startswith("vendir version ")
    place.wait_for(lambda: place.status() != {})


@pytest.mark.parametrize("damage", ["mode", "owner", "symlink", "file"])
def test_an_unusable_server_directory_means_in_process_and_no_server(bin_dir: Path, tmp_path: Path,
                                                                     damage: str) -> None:  # fmt: skip
    place = ServerPlace()
    try:
        real = place.dir
        if damage == "mode":
            real.chmod(0o755)
        elif damage == "owner":
            if os.geteuid() != 0:
                pytest.skip("changing a directory's owner needs root")
            os.chown(real, 65534, 65534)
        elif damage == "symlink":
            target = Path(str(real) + "-target")
            target.mkdir(mode=0o700)
            real.rmdir()
            real.symlink_to(target)
        else:
            real.rmdir()
            real.write_text("not a directory")
        done = call(place, program(bin_dir, "vendir"), "--debug", "version", cwd=tmp_path)
        assert done.returncode == 0
        assert done.stdout.startswith("vendir version ")
        assert "vendir: debug: ocivendir server unavailable (" in done.stderr
        quiet = call(place, program(bin_dir, "vendir"), "version", cwd=tmp_path)
        assert quiet.stderr == ""
        time.sleep(0.5)
        if real.is_dir() and not real.is_symlink():
            assert list(real.iterdir()) == []
    finally:
        if place.dir.is_symlink() or place.dir.is_file():
            place.dir.unlink()
            place.dir.mkdir()
        place.cleanup()


def _raw_request(place: ServerPlace, request: wire.Request, uid: int | None = None) -> bytes:
    code = (
        "import os, socket, sys\n"
        "from ocivendir.server import wire\n"
        f"if {uid is not None}: os.setuid({uid})\n"
        f"request = wire.Request(op={request.op!r}, build={request.build!r}, umask=0o22, cwd='/',"
        f" argv={request.argv or ['vendir']!r}, env={request.env!r})\n"
        "s = socket.socket(socket.AF_UNIX)\n"
        f"s.connect({str(place.dir / f'server-{build_id()}.sock')!r})\n"
        "fds = [0, 1, 2, os.open('/', os.O_RDONLY)]\n"
        "try:\n    wire.send_request(s, wire.encode_request(request), fds)\n    got = wire.read_frame(s)\n"
        "except OSError:\n    got = 'closed'\n"
        "sys.stdout.write(repr(got))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=30, check=False,
                          env=place.env(PYTHONPATH=str(Path(__file__).resolve().parents[2] / "cli")))  # fmt: skip
    assert done.returncode == 0, done.stderr
    return done.stdout.encode()


def test_a_request_of_another_build_is_refused_before_it_starts(place: ServerPlace) -> None:
    place.start()
    answer = _raw_request(place, wire.Request(op="call", build="0" * 16, umask=0, cwd="/", argv=[], env={}))
    assert answer.startswith(b"(b'R', b'build 0000000000000000 asked of a server of build ")


@pytest.mark.parametrize("args", [["server", "start", "--foreground"], ["--debug", "server", "start"]])
def test_a_server_command_is_refused_by_a_worker(place: ServerPlace, tmp_path: Path, args: list[str]) -> None:
    """Refused unstarted (its caller runs it itself): it would start a server from the call's environment, or become one.

    No client sends one; this request, made by hand, asks for the suite's hooks switched on as well.
    """
    place.start()
    elsewhere = tmp_path / "elsewhere"
    request = wire.Request(op="call", build=build_id(), umask=0o22, cwd="/", argv=["vendir", *args],
                           env=place.env(OCIVENDIR_SERVER_DIR=str(elsewhere), OCIVENDIR_SERVER_TEST_HOOKS="1"))  # fmt: skip
    answer = _raw_request(place, request)
    assert answer.startswith(b"(b'R', ")
    assert b"a server command runs in the caller's own process" in answer
    time.sleep(0.5)
    assert not elsewhere.exists()
    assert len(server_parents(place.dir)) == 1


def test_another_uid_is_refused(place: ServerPlace) -> None:
    if os.geteuid() != 0:
        pytest.skip("needs root to connect as another uid")
    place.start()
    before = served_calls(place)
    place.dir.chmod(0o711)  # only to let the stranger reach the socket: the peer check is what is tested
    (place.dir / f"server-{build_id()}.sock").chmod(0o666)
    answer = _raw_request(place, wire.Request(op="call", build=build_id(), umask=0, cwd="/", argv=[], env={}),
                          uid=65534)  # fmt: skip
    assert answer in {b"None", b"'closed'"}  # closed without a word: the stranger runs its call itself
    place.dir.chmod(0o700)
    assert served_calls(place) == before + 1  # the stranger's connection got no worker; this query did


def test_an_idle_server_ends_and_removes_its_socket(place: ServerPlace) -> None:
    pid = place.start(OCIVENDIR_SERVER_IDLE="1s")
    socket_file = place.dir / f"server-{build_id()}.sock"
    place.wait_for(lambda: not socket_file.exists(), timeout=20)
    assert place.status() == {}
    place.wait_for(lambda: ended(pid))


def test_a_starting_server_removes_what_servers_of_other_builds_left_but_not_a_running_ones(
    place: ServerPlace,
) -> None:
    """Each build leaves its lock and start files (a killed one its socket too): the directory must not grow with them."""
    old, running = "fedcba9876543210", "00000000deadbeef"
    leftover = [f"server-{old}.lock", f"server-{old}.start", f".server-{old}.4242"]
    for name in [*leftover, f"server-{running}.lock", f"server-{running}.start"]:
        (place.dir / name).touch()
    with socket.socket(socket.AF_UNIX) as stale:  # the socket file of a server killed outright
        stale.bind(str(place.dir / f"server-{old}.sock"))
    held = hold_lock(str(place.dir / f"server-{running}.lock"))  # a server of that build runs
    try:
        place.start()
        place.wait_for(lambda: not any((place.dir / name).exists() for name in [*leftover, f"server-{old}.sock"]))
        assert (place.dir / f"server-{running}.lock").exists()
        assert (place.dir / f"server-{running}.start").exists()
        assert (place.dir / f"server-{build_id()}.sock").exists()
        assert f"server-{old}.lock" in place.log_tail()  # the log says what went
    finally:
        os.close(held)


def _lower_file_size_limit() -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    lower = 1 << 40 if soft == resource.RLIM_INFINITY else soft // 2
    resource.setrlimit(resource.RLIMIT_FSIZE, (lower, hard))  # `ulimit -f`: refused, its limits are not the server's


def test_a_server_that_refuses_every_caller_still_ends_when_idle(place: ServerPlace, bin_dir: Path) -> None:
    """A server whose every caller has other limits refuses them all (they run in-process); refusals are no calls.

    Counted as activity, they kept such a server alive for as long as they came, and every call ran in-process.
    """
    pid = place.start(OCIVENDIR_SERVER_IDLE="2s")
    vendir = program(bin_dir, "vendir")
    deadline = time.monotonic() + 20
    while not ended(pid):
        assert time.monotonic() < deadline, "a server refusing every call lived on"
        done = subprocess.run([str(vendir), "version"], env=place.env(), capture_output=True, text=True, check=False,
                              timeout=30, preexec_fn=_lower_file_size_limit)  # fmt: skip
        assert (done.returncode, done.stdout) == (0, version_line("vendir") + "\n")  # run in-process, refused
        time.sleep(0.2)
    assert "the caller's resource limits are not the server's" in place.log_tail()


def test_eight_clients_at_once_are_all_served(
    place: ServerPlace, registry: Registry, pusher: Pusher, repo_prefix: str, bin_dir: Path, tmp_path: Path
) -> None:
    refs = [pusher.image(f"{repo_prefix}/img{i}", make_image({"n.txt": str(i)})) for i in range(8)]
    place.start(OCIVENDIR_SERVER_WORKERS="3")  # more clients than workers: the rest queue
    vendir = program(bin_dir, "vendir")
    results: dict[int, subprocess.CompletedProcess[str]] = {}
    threads = [threading.Thread(target=lambda i=i: results.__setitem__(
        i, kapp_call(place, vendir, refs[i], tmp_path / f"w{i}", cache=tmp_path / f"c{i}"))) for i in range(8)]  # fmt: skip
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    for i in range(8):
        assert (results[i].returncode, results[i].stdout, results[i].stderr) == (0, lock("image", refs[i]), "")
        assert (tmp_path / f"w{i}/0/n.txt").read_text() == str(i)
    assert served_calls(place) >= 9


def test_the_servers_log_follows_each_call_and_a_client_notes_why_it_ran_in_process(
    place: ServerPlace, bin_dir: Path, tmp_path: Path
) -> None:
    place.start()
    assert call(place, program(bin_dir, "vendir"), "version", cwd=tmp_path).returncode == 0
    refused = call(place, program(bin_dir, "vendir"), "version", cwd=tmp_path, PYTHONWARNINGS="ignore")
    assert refused.returncode == 0
    log = place.log.read_text()
    assert " debug: forked worker " in log
    assert " debug: call 1 ended: exit status 0" in log
    assert " client: runs vendir in-process: PYTHONWARNINGS is set: it acts when a program starts" in log
    assert not any(fd.is_symlink() and str(fd.readlink()) == str(place.log)
                   for fd in Path(f"/proc/{place.status()['pid']}/fd").iterdir())  # fmt: skip


def test_the_server_holds_no_callers_descriptor(place: ServerPlace, bin_dir: Path, tmp_path: Path) -> None:
    pid = place.start()
    for _ in range(3):
        assert call(place, program(bin_dir, "vendir"), "version", cwd=tmp_path).returncode == 0
    links = sorted(str(fd.readlink()) for fd in Path(f"/proc/{pid}/fd").iterdir())
    sockets = [link for link in links if link.startswith("socket:")]
    pipes = [link for link in links if link.startswith("pipe:")]
    assert links.count("/dev/null") == 3
    assert len(sockets) == 1 + len(workers(pid))  # the listening socket, one channel to each worker
    assert len(pipes) == 2  # the signal wake-up pipe
    files = [link for link in links if link not in {"/dev/null", *sockets, *pipes}]
    assert files == [str(place.dir / f"server-{build_id()}.lock")]
    assert str(Path(f"/proc/{pid}/cwd").readlink()) == "/"


def test_status_start_and_stop(place: ServerPlace) -> None:
    assert place.server("status").returncode == 1
    assert place.server("status").stdout == "ocivendir server: not running\n"
    pid = place.start()
    again = place.server("start", "--json")
    assert again.returncode == 0
    assert place.status()["pid"] == pid  # one server per build
    running = place.server("status")
    assert running.returncode == 0
    assert running.stdout.startswith(f"ocivendir server: running (pid {pid}, build {build_id()}, socket ")
    stopped = place.server("stop")
    assert stopped.returncode == 0
    assert place.server("status").returncode == 1
    place.wait_for(lambda: ended(pid))


def test_two_first_calls_start_one_server(place: ServerPlace, bin_dir: Path, tmp_path: Path) -> None:
    processes = [subprocess.Popen([str(program(bin_dir, "vendir")), "version"], stdout=subprocess.PIPE,
                                  env=place.env(), cwd=tmp_path) for _ in range(4)]  # fmt: skip
    for process in processes:
        assert process.wait(30) == 0
    place.wait_for(lambda: place.status() != {})
    time.sleep(1.0)  # the losers of the lock have exited by now
    pid = place.status()["pid"]
    assert isinstance(pid, int)
    running = [int(p.name) for p in Path("/proc").iterdir() if p.name.isdigit() and _runs_server(int(p.name), place)]
    assert sorted(set(running) - set(workers(pid))) == [pid]  # its workers share its command line


def _runs_server(pid: int, place: ServerPlace) -> bool:
    try:
        environ = Path(f"/proc/{pid}/environ").read_bytes()
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False
    return b"--foreground" in cmdline and f"OCIVENDIR_SERVER_DIR={place.dir}".encode() in environ.split(b"\0")


def test_a_frame_from_the_wire_is_bounded() -> None:
    left, right = socket.socketpair()
    with left, right:
        left.sendall(struct.pack(">cI", b"X", wire.MAX_FRAME + 1))
        with pytest.raises(wire.WireError):
            wire.read_frame(right)


def _imported(*args: str, env: dict[str, str] | None = None, cwd: Path | None = None) -> tuple[str, set[str]]:
    """A run of this venv's interpreter with `-X importtime`: its stdout, and every module it imported."""
    done = subprocess.run([sys.executable, "-X", "importtime", *args], capture_output=True, text=True, env=env,
                          cwd=cwd, timeout=60, check=True)  # fmt: skip
    lines = [line for line in done.stderr.splitlines() if line.startswith("import time:")]
    assert len(lines) == len(done.stderr.splitlines()), done.stderr
    return done.stdout, {line.rsplit("|", 1)[1].strip() for line in lines[1:]}  # the first line is the header


def test_a_served_call_loads_only_what_handing_it_over_needs(place: ServerPlace, bin_dir: Path, tmp_path: Path) -> None:
    """The Python client's whole served path loads our client's modules and what `socket` and `signal` bring.

    Nothing else (`-X importtime` sees its late imports too): no error types (only a call run in-process raises
    them), no `struct` or `zlib` (each an extension module: a shared library loaded on every call).
    """
    vendir = program(bin_dir, "vendir")
    place.start()
    before = served_calls(place)
    stdout, loaded = _imported(str(vendir), "version", env=place.env(), cwd=tmp_path)
    assert stdout == f"{version_line('vendir')}\n"
    assert served_calls(place) == before + 2  # served: the call, then this status query
    _, interpreter = _imported("-c", "pass")
    _, network = _imported("-c", "import socket, signal")
    ours = sorted(name for name in loaded if name.startswith("ocivendir"))
    assert ours == [
        "ocivendir",
        "ocivendir.commands",
        "ocivendir.server",
        "ocivendir.server.build",
        "ocivendir.server.client",
        "ocivendir.server.interpreter",
        "ocivendir.server.place",
        "ocivendir.server.wire",
    ]  # flagscan only for a command line that starts with a flag
    assert sorted(loaded - interpreter - network - set(ours)) == ["__future__"]


_WARM_CALLS = """
import json, os, sys
from ocivendir.server.preload import preload
missing = preload()
from ocivendir.commands import main
calls = json.loads(sys.argv[1])
found = {}
for index, (argv, prog, stdin) in enumerate(calls):
    for attempt in ("cold", "first-warm", "warm"):  # fills the cache, writes the read memo; then what is measured
        read, write = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.close(read)
            work = os.path.join(os.environ["WORK"], f"{index}-{attempt}")
            os.makedirs(work)
            os.chdir(work)
            before = set(sys.modules)
            sys.stdin = open(stdin) if stdin else open(os.devnull)
            sys.stdout = open(os.devnull, "w")
            try:
                main(argv, prog)
            except SystemExit as exc:
                code = exc.code
            os.write(write, json.dumps([code, sorted(set(sys.modules) - before)]).encode())
            os._exit(0)
        os.close(write)
        with os.fdopen(read) as pipe:
            answer = pipe.read()
        os.waitpid(pid, 0)
        found[f"{index}: {prog} {' '.join(argv)} ({attempt})"] = json.loads(answer)
print(json.dumps({"missing": missing, "calls": found}))
"""


def test_a_preloaded_server_has_nothing_left_to_import_for_warm_calls(
    registry: Registry, pusher: Pusher, repo_prefix: str, tmp_path: Path
) -> None:
    import json  # noqa: PLC0415

    image = pusher.image(f"{repo_prefix}/img", make_image({"a.yml": "a"}), tag="v1")
    published = publish_bundle(pusher, repo_prefix, images=1)
    bundle = published.ref(registry, published.bundle_repo)
    stream = tmp_path / "kapp.yml"
    stream.write_text(PLACEHOLDER + config("imgpkgBundle", bundle))
    plain = tmp_path / "vendir.yml"
    plain.write_text(config("image", image, secret=None))
    tagged = tmp_path / "tag.yml"
    tagged.write_text(config("image", f"{registry.host}/{repo_prefix}/img:v1", secret=None))
    calls = [
        (["version"], "vendir", None),
        (["sync", "-f", "-", "--lock-file", "/dev/null"], "vendir", str(stream)),
        (["sync", "-f", "-", "--lock-file", "/dev/null"], "vendir", str(tagged)),
        (["sync", "-f", str(plain), "--json"], "ocivendir", None),
        (["pull", "-b", bundle, "-o", "out"], "ocivendir", None),
        (["pull", "-b", bundle, "-o", "out"], "imgpkg", None),
    ]
    env = {**os.environ, "WORK": str(tmp_path / "work"), "OCIVENDIR_CACHE_DIR": str(tmp_path / "cache")}
    done = subprocess.run([sys.executable, "-c", _WARM_CALLS, json.dumps(calls)], capture_output=True, text=True,
                          env=env, check=True, timeout=120)  # fmt: skip
    result = json.loads(done.stdout.splitlines()[-1])
    warm = {call: found for call, found in result["calls"].items() if call.endswith("(warm)")}
    assert all(code in (0, None) for code, _ in warm.values()), warm
    assert {call: imported for call, (_, imported) in warm.items() if imported} == {}
