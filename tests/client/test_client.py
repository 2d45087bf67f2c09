"""The native thin client (client/ocivendir-client.c) against a fake server: protocol v1's client side, on its own."""

from __future__ import annotations

import os
import resource
import select
import signal
import socket
import stat
import struct
import subprocess
import time
from pathlib import Path

import pytest

from tests.client.conftest import BUILD, Install
from tests.support.fakeserver import WORKER_PID, Call, fake_server
from tests.support.foreign import foreign_listener

ENOENT_TEXT = os.strerror(2)


def finish_with(status: int, stdout: bytes = b"", stderr: bytes = b""):
    def script(call: Call) -> None:
        call.start()
        call.finish(status, stdout, stderr)

    return script


def refuse(call: Call) -> None:
    call.refuse("too busy")


def nothing(call: Call) -> None:
    """Reads the request and answers nothing: the connection closes when the test's server does."""


def wait_catching(pid: int, sig: int) -> None:
    """Until the client catches `sig` (it installs its handlers once the call started: /proc's SigCgt shows it)."""
    status = Path(f"/proc/{pid}/status")
    for _ in range(2000):
        caught = next(line for line in status.read_text().splitlines() if line.startswith("SigCgt:"))
        if int(caught.split()[1], 16) & (1 << (sig - 1)):
            return
        time.sleep(0.01)
    pytest.fail(f"the client never installed a handler for signal {sig}")


def expected_body(argv: list[str], env: dict[str, str], umask: str, cwd: str) -> bytes:
    words = ["call", BUILD, umask, cwd, str(len(argv)), *argv, str(len(env)), *(f"{k}={v}" for k, v in env.items())]
    return b"".join(w.encode() + b"\0" for w in words)


# ---- the request ----------------------------------------------------------------------------------------------


def test_the_request_carries_argv_env_umask_cwd_and_the_callers_own_descriptors(
    install: Install, tmp_path: Path
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    (tmp_path / "in").write_bytes(b"apiVersion: x\n")
    env = install.env(HOME="/home/someone", EMPTY="", WITH_EQUALS="a=b=c")
    with fake_server(install.server_dir, BUILD, finish_with(0, b"from the worker\n")) as server, \
            (tmp_path / "in").open("rb") as stdin, (tmp_path / "err").open("wb") as stderr:  # fmt: skip
        proc = install.popen(["sync", "-f", "-", "--lock-file", "/dev/null"], env=env, cwd=work, umask=0o027,
                             stdin=stdin, stderr=stderr)  # fmt: skip
        pipe = os.fstat(proc.stdout.fileno()) if proc.stdout else None
        out, _ = proc.communicate(timeout=30)
        call = server.only_call()
    assert proc.returncode == 0
    assert out == b"from the worker\n"
    assert (tmp_path / "err").read_bytes() == b""
    request = call.request
    assert request is not None
    assert request.body == expected_body(
        ["vendir", "sync", "-f", "-", "--lock-file", "/dev/null"], env, "27", str(work)
    )
    assert request.header == b"OVD1" + struct.pack(">I", len(request.body))
    assert request.ancillary_flags == 0  # nothing truncated: exactly the 4 descriptors
    assert len(request.stats) == 4
    stdin_stat, stdout_stat, stderr_stat, cwd_stat = request.stats
    assert (stdin_stat.st_dev, stdin_stat.st_ino) == ((tmp_path / "in").stat().st_dev, (tmp_path / "in").stat().st_ino)
    assert pipe is not None
    assert stat.S_ISFIFO(stdout_stat.st_mode)
    assert stdout_stat.st_ino == pipe.st_ino
    assert stderr_stat.st_ino == (tmp_path / "err").stat().st_ino
    assert stat.S_ISDIR(cwd_stat.st_mode)
    assert (cwd_stat.st_dev, cwd_stat.st_ino) == (work.stat().st_dev, work.stat().st_ino)
    assert install.runs() == []
    assert install.processes() == []


def test_closed_stdio_goes_as_dev_null(install: Install) -> None:
    with fake_server(install.server_dir, BUILD, finish_with(0)) as server:
        done = install.run(preexec_fn=lambda: os.close(0))
        call = server.only_call()
    assert done.returncode == 0
    assert call.request is not None
    assert call.request.stats[0].st_rdev == Path("/dev/null").stat().st_rdev
    assert stat.S_ISCHR(call.request.stats[0].st_mode)


@pytest.mark.parametrize("status", [0, 1, 2, 42, 255])
def test_the_exit_status_and_the_workers_output_pass_through(install: Install, status: int) -> None:
    with fake_server(install.server_dir, BUILD, finish_with(status, b"out\n", b"vendir: Error: x\n")) as server:
        done = install.run()
        server.only_call()
    assert (done.returncode, done.stdout, done.stderr) == (status, b"out\n", b"vendir: Error: x\n")


def test_frames_other_than_x_after_the_start_are_skipped(install: Install) -> None:
    def script(call: Call) -> None:
        call.start()
        call.send(b"I", b'{"pid": 1}')
        call.send(b"Q", b"")
        call.finish(7)

    with fake_server(install.server_dir, BUILD, script) as server:
        done = install.run()
        server.only_call()
    assert done.returncode == 7


# ---- before 'P': in-process; after 'P': never -----------------------------------------------------------------


def test_a_refusal_runs_the_call_in_process_with_argv0_kept_and_the_server_switched_off(install: Install) -> None:
    env = install.env(KEEP="me")
    with fake_server(install.server_dir, BUILD, refuse) as server:
        done = install.run(["sync", "-f", "-"], env=env)
        server.only_call()
    assert (done.returncode, done.stdout, done.stderr) == (3, b"in-process\n", b"")  # silent without --debug
    [run] = install.runs()
    assert run["argv"] == ["vendir", "sync", "-f", "-"]
    assert run["env"] == [f"{k}={v}" for k, v in env.items()] + ["OCIVENDIR_SERVER=off"]
    assert run["children"] == "none"
    assert install.processes() == []  # a refusal starts no server


def test_debug_names_why_the_call_runs_in_process(install: Install) -> None:
    with fake_server(install.server_dir, BUILD, refuse) as server:
        done = install.run(["sync", "--debug"])
        server.only_call()
    assert done.stderr == b"vendir: debug: ocivendir server unavailable (too busy); running in-process\n"
    assert install.runs()[0]["argv"] == ["vendir", "sync", "--debug"]


def hang_up(call: Call) -> None:
    call.hang_up()


def unknown_frame(call: Call) -> None:
    call.send(b"Z", b"?")


def oversized_frame(call: Call) -> None:
    call.conn.sendall(b"R" + struct.pack(">I", 1 << 30))


def short_start(call: Call) -> None:
    call.send(b"P", b"\0\0")


@pytest.mark.parametrize("script", [hang_up, unknown_frame, oversized_frame, short_start])
def test_eof_or_garbage_before_the_start_runs_the_call_in_process(install: Install, script) -> None:
    with fake_server(install.server_dir, BUILD, script) as server:
        done = install.run()
        server.only_call()
    assert (done.returncode, done.stdout, done.stderr) == (3, b"in-process\n", b"")
    assert len(install.runs()) == 1


def started_then_gone(call: Call) -> None:
    call.start()
    call.hang_up()


def bad_status(call: Call) -> None:
    call.start()
    call.send(b"X", struct.pack(">I", 256))


def half_an_exit(call: Call) -> None:
    call.start()
    call.conn.sendall(b"X\0\0")
    call.hang_up()


@pytest.mark.parametrize("script", [started_then_gone, bad_status, half_an_exit])
def test_eof_after_the_start_is_a_vendir_style_error_and_never_a_second_run(install: Install, script) -> None:
    with fake_server(install.server_dir, BUILD, script) as server:
        done = install.run(argv0="vendir")
        server.only_call()
    assert done.returncode == 1
    assert done.stderr == (b"vendir: Error: ocivendir server: the call ended without an exit status "
                           b"(worker %d stopped)\n" % WORKER_PID)  # fmt: skip
    assert done.stdout == b""
    assert install.runs() == []


# ---- signals --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT, signal.SIGHUP])
def test_signals_are_forwarded_to_the_worker(install: Install, sig: int) -> None:
    def script(call: Call) -> None:
        call.start()
        frame = call.read_frame()
        assert frame is not None
        call.finish(128 + frame[1][0])

    with fake_server(install.server_dir, BUILD, script) as server:
        proc = install.popen()
        wait_catching(proc.pid, sig)
        proc.send_signal(sig)
        proc.communicate(timeout=30)
        call = server.only_call()
    assert call.frames == [(b"S", bytes([sig]))]
    assert proc.returncode == 128 + sig


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT, signal.SIGHUP])
def test_a_forwarded_signal_then_eof_kills_the_client_with_that_signal(install: Install, sig: int) -> None:
    def script(call: Call) -> None:
        call.start()
        call.read_frame()
        call.hang_up()

    with fake_server(install.server_dir, BUILD, script) as server:
        proc = install.popen()
        wait_catching(proc.pid, sig)
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=30)
        call = server.only_call()
    assert call.frames == [(b"S", bytes([sig]))]
    assert proc.returncode == -sig
    assert err == b""


def test_a_killed_client_closes_the_workers_connection(install: Install) -> None:
    def script(call: Call) -> None:
        call.start()
        call.read_frame()

    with fake_server(install.server_dir, BUILD, script) as server:
        proc = install.popen()
        wait_catching(proc.pid, signal.SIGTERM)
        proc.kill()
        proc.communicate(timeout=30)
        call = server.only_call()
    assert call.eof
    assert call.frames == []
    assert install.runs() == []


# ---- no server yet: a detached start -----------------------------------------------------------------------------


def _assert_started_detached(install: Install, client_pid: int, env: dict[str, str]) -> None:
    [start] = install.starts(expect=1)
    assert start["argv"] == [str(install.dir / "ocivendir"), "server", "start", "--foreground"]
    kept = ("PATH", "HOME", "TMPDIR", "XDG_RUNTIME_DIR", "LC_ALL", "LC_CTYPE", "LANG")
    assert start["env"] == [f"{k}={v}" for k, v in env.items() if k in kept or k.startswith("OCIVENDIR_SERVER_")]
    lock = str(install.server_dir / f"server-{BUILD}.start")  # held until the server listens
    assert start["fds"] == {"0": "/dev/null", "1": "/dev/null", "2": "/dev/null", "3": lock}
    assert start["ppid"] != client_pid  # not the client's child: nobody needs to reap it but init
    assert start["sid"] not in (client_pid, os.getsid(0))  # a session of its own
    assert start["sid"] != start["pid"]  # and not its leader: it can never acquire a terminal
    assert start["cwd"] == "/"
    os.kill(start["pid"], 0)  # still running, after the client's caller saw EOF


def test_no_server_yet_starts_one_detached_and_runs_the_call_in_process(install: Install) -> None:
    install.server_dir.rmdir()  # D missing
    env = install.env(HOME="/nonexistent", LANG="C.UTF-8", IMGPKG_PASSWORD="secret", OCIVENDIR_SERVER_IDLE="1m",
                      PYTHONDONTWRITEBYTECODE="1")  # the server gets its place, settings, PATH, HOME, locale only  # fmt: skip
    leak_read, leak_write = os.pipe()  # a descriptor the client inherits: the server must not keep it
    os.set_inheritable(leak_write, True)  # noqa: FBT003 - the stdlib signature
    try:
        proc = install.popen(env=env, pass_fds=(leak_write,))
        os.close(leak_write)
        out, err = proc.communicate(timeout=30)  # EOF on the client's stdout pipe: the started server holds none
        assert (proc.returncode, out, err) == (3, b"in-process\n", b"")
        _assert_started_detached(install, proc.pid, env)
        ready, _, _ = select.select([leak_read], [], [], 10)
        assert ready == [leak_read]
        assert os.read(leak_read, 1) == b""  # every writer closed, the server included
    finally:
        os.close(leak_read)
    [run] = install.runs()
    assert run["pid"] == proc.pid  # the fallback is the client itself, exec'd
    assert run["children"] == "none"  # the start left no zombie behind
    assert run["env"] == [f"{k}={v}" for k, v in env.items()] + ["OCIVENDIR_SERVER=off"]


def test_a_first_call_waits_for_the_server_it_starts_and_runs_in_process_only_once_it_could_not_listen(
    install: Install,
) -> None:
    """A start costs a server's start-up once; running the call in-process beside it would cost a second one.

    The fake server holds the start lock a while and lets it go without listening (a start that failed): the call
    waited for that, then ran in-process.
    """
    install.server_dir.rmdir()  # D missing
    done = install.run(["sync", "--debug"], env=install.env(OCIVENDIR_SERVER_TEST_START_HOLD_MS="300"))
    assert (done.returncode, done.stdout) == (3, b"in-process\n")
    assert len(install.starts(expect=1)) == 1
    [run] = install.runs()
    assert run["after_release"] is True


def test_calls_of_a_burst_that_find_a_server_starting_wait_for_it(install: Install) -> None:
    stale = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    stale.bind(str(install.server_dir / f"server-{BUILD}.sock"))
    stale.close()  # ECONNREFUSED: each call tries to start one
    env = install.env(OCIVENDIR_SERVER_TEST_START_HOLD_MS="300")
    processes = [install.popen(env=env) for _ in range(4)]
    assert [proc.communicate(timeout=30)[0] for proc in processes] == [b"in-process\n"] * 4
    assert len(install.starts(expect=1)) == 1
    assert [run["after_release"] for run in install.runs()] == [True] * 4


def test_a_stale_socket_file_starts_a_server(install: Install) -> None:
    stale = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    stale.bind(str(install.server_dir / f"server-{BUILD}.sock"))
    stale.close()  # the file stays, nobody listens: ECONNREFUSED
    proc = install.popen(["sync", "--debug"])
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 3
    assert b"(no server yet (%s/server-%s.sock: Connection refused); one is starting)" % (
        str(install.server_dir).encode(), BUILD.encode()) in err  # fmt: skip
    _assert_started_detached(install, proc.pid, install.env())


def test_no_server_yet_with_debug_says_so(install: Install) -> None:
    done = install.run(["sync", "--debug"])  # D exists, the socket does not
    assert done.stderr == (b"vendir: debug: ocivendir server unavailable (no server yet (%s/server-%s.sock: %s); one "
                           b"is starting); running in-process\n"
                           % (str(install.server_dir).encode(), BUILD.encode(), ENOENT_TEXT.encode()))  # fmt: skip
    assert len(install.starts(expect=1)) == 1


def test_a_burst_of_first_calls_starts_one_server(install: Install) -> None:
    """Six calls at once with no server: all run in-process, one starts a server (the others find the start lock)."""
    install.server_dir.rmdir()
    processes = [install.popen() for _ in range(6)]
    for proc in processes:
        assert proc.communicate(timeout=30)[0] == b"in-process\n"
    assert len(install.starts(expect=1)) == 1
    assert len(install.runs()) == 6
    time.sleep(0.5)  # a second start, had there been one, would have recorded itself by now
    assert len(install.starts()) == 1


def test_a_start_that_ended_lets_the_next_call_start_another(install: Install) -> None:
    """The start lock dies with the process that holds it: a server that failed to start blocks no later start."""
    install.run()
    [first] = install.starts(expect=1)
    os.kill(first["pid"], signal.SIGKILL)
    for _ in range(2000):  # until it has died (a zombie holds no descriptor)
        stat_file = Path(f"/proc/{first['pid']}/stat")
        if not stat_file.exists() or stat_file.read_text().rsplit(")", 1)[1].split()[0] in {"Z", "X"}:
            break
        time.sleep(0.01)
    install.run()
    assert len(install.starts(expect=2)) == 2


@pytest.mark.parametrize("variable", ["PYTHONPATH", "PYTHONIOENCODING", "PYTHONUTF8", "LD_PRELOAD", "LD_LIBRARY_PATH",
                                      "GLIBC_TUNABLES", "MALLOC_ARENA_MAX", "OPENSSL_CONF", "GCONV_PATH", "LOCPATH"])  # fmt: skip
def test_a_variable_that_acts_at_start_up_runs_the_call_in_process_and_starts_nothing(
    install: Install, tmp_path: Path, variable: str
) -> None:
    with fake_server(install.server_dir, BUILD, finish_with(0)) as server:
        done = install.run(["sync", "--debug"], env=install.env(**{variable: "/x"}))
        assert server.calls == []
    assert done.returncode == 3
    assert f"({variable} is set: it acts when a program starts); running in-process".encode() in done.stderr
    assert len(install.runs()) == 1
    missing = tmp_path / "d"
    assert install.run(env=install.env(OCIVENDIR_SERVER_DIR=str(missing), **{variable: "/x"})).returncode == 3
    assert not missing.exists()  # no server started for a call it could not serve
    assert install.processes() == []


@pytest.mark.parametrize("variable", ["PYTHONDONTWRITEBYTECODE", "PYTHONUNBUFFERED", "PYTHONPATH="])
def test_harmless_or_empty_start_up_variables_are_served(install: Install, variable: str) -> None:
    name, _, value = variable.partition("=")
    with fake_server(install.server_dir, BUILD, finish_with(0)) as server:
        done = install.run(env=install.env(**{name: value or "1"} if "=" not in variable else {name: ""}))
        assert len(server.calls) == 1
    assert done.returncode == 0


# ---- an unusable socket directory: in-process, no server started, none used -----------------------------------------


def _unusable(install: Install, tmp_path: Path, case: str) -> tuple[dict[str, str], str]:
    env = install.env()
    d = install.server_dir
    if case == "mode 0755":
        d.chmod(0o755)
        return env, "has mode 0755, not 0700"
    if case == "another owner":
        os.chown(d, 1, 1)
        return env, "is owned by uid 1, not 0"
    if case == "a symlink":
        link = tmp_path / "link"
        link.symlink_to(d)
        return install.env(OCIVENDIR_SERVER_DIR=str(link)), "is a symbolic link"
    if case == "a file":
        f = tmp_path / "file"
        f.write_text("")
        f.chmod(0o700)
        return install.env(OCIVENDIR_SERVER_DIR=str(f)), "is not a directory"
    if case == "relative":
        return install.env(OCIVENDIR_SERVER_DIR="relative/dir"), "OCIVENDIR_SERVER_DIR is not an absolute path"
    assert case == "too long for sun_path"
    deep = d / ("x" * 100)
    deep.mkdir(mode=0o700)
    return install.env(OCIVENDIR_SERVER_DIR=str(deep)), "is too long for a Unix socket"


@pytest.mark.parametrize("case", ["mode 0755", "another owner", "a symlink", "a file", "relative",
                                  "too long for sun_path"])  # fmt: skip
def test_an_unusable_socket_directory_runs_the_call_in_process_and_starts_nothing(install: Install, tmp_path: Path,
                                                                                  case: str) -> None:  # fmt: skip
    if case == "another owner" and os.geteuid() != 0:
        pytest.skip("chown needs root")
    env, reason = _unusable(install, tmp_path, case)
    with fake_server(install.server_dir, BUILD, finish_with(0)) as server:
        done = install.run(["sync", "--debug"], env=env)
        assert server.calls == []  # the listening server in D is never used
    assert done.returncode == 3
    assert done.stderr.startswith(b"vendir: debug: ocivendir server unavailable (")
    assert reason.encode() in done.stderr
    assert len(install.runs()) == 1
    assert install.processes() == []


def test_a_request_over_4_mib_runs_in_process(install: Install) -> None:
    def bigger_stack() -> None:
        resource.setrlimit(resource.RLIMIT_STACK, (64 << 20, resource.getrlimit(resource.RLIMIT_STACK)[1]))

    _, hard = resource.getrlimit(resource.RLIMIT_STACK)
    if hard != resource.RLIM_INFINITY and hard < 64 << 20:
        pytest.skip("the stack limit is too low for 4 MiB of arguments")
    args = ["x" * (120 << 10)] * 36  # 4.2 MiB
    with fake_server(install.server_dir, BUILD, nothing) as server:
        done = install.run(["sync", "--debug", *args], preexec_fn=bigger_stack)
        call = server.only_call()
    assert done.returncode == 3
    assert b"(the request is larger than 4 MiB)" in done.stderr
    assert call.request is not None
    assert call.request.header == b""  # nothing sent at all
    assert install.processes() == []


# ---- the switch -----------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("argv0", "value", "served"), [
    ("vendir", None, True), ("vendir", "", True), ("vendir", "auto", True), ("/opt/x/vendir", None, True),
    ("vendir", "on", True), ("ocivendir", "on", True), ("imgpkg", "on", True),
    ("vendir", "off", False), ("ocivendir", None, False), ("imgpkg", "auto", False), ("ocivendir", "", False),
])  # fmt: skip
def test_the_switch_and_argv0(install: Install, argv0: str, value: str | None, served: bool) -> None:
    env = install.env() if value is None else install.env(OCIVENDIR_SERVER=value)
    with fake_server(install.server_dir, BUILD, finish_with(0)) as server:
        done = install.run(argv0=argv0, env=env)
        assert len(server.calls) == served
    if served:
        assert done.returncode == 0
        assert install.runs() == []
        return
    assert (done.returncode, done.stderr) == (3, b"")
    [run] = install.runs()
    assert run["argv"][0] == argv0
    assert [e for e in run["env"] if e.startswith("OCIVENDIR_SERVER=")] == ["OCIVENDIR_SERVER=off"]


def test_a_bad_switch_value_runs_in_process_and_leaves_the_value_for_the_program_to_report(install: Install) -> None:
    with fake_server(install.server_dir, BUILD, finish_with(0)) as server:
        done = install.run(env=install.env(OCIVENDIR_SERVER="sometimes"))
        assert server.calls == []
    assert done.returncode == 3
    [run] = install.runs()
    assert [e for e in run["env"] if e.startswith("OCIVENDIR_SERVER=")] == ["OCIVENDIR_SERVER=sometimes"]


# ---- the install directory without /proc ---------------------------------------------------------------------


def test_without_proc_the_install_directory_comes_from_path_or_argv0_and_argv0_still_finds_the_program(
    install: Install, binaries: Path, tmp_path: Path
) -> None:
    """Without /proc, PyInstaller's bootloader finds itself through argv[0].

    So argv[0] must resolve to the program, not to the client, and keep its name (the build's modes/<name> links).
    """
    install.client.write_bytes((binaries / "vendir-noproc").read_bytes())
    elsewhere = tmp_path / "bin"
    elsewhere.mkdir()
    (elsewhere / "vendir").symlink_to(install.client)
    (elsewhere / "imgpkg").symlink_to(install.client)
    (install.dir / "modes").mkdir()
    (install.dir / "modes" / "vendir").symlink_to("../ocivendir")
    off = {"OCIVENDIR_SERVER": "off"}
    by_path = install.run(argv0="vendir", env=install.env(**off, PATH=f"/nonexistent:{elsewhere}:/usr/bin"))
    assert by_path.returncode == 3
    by_link = install.run(argv0=str(elsewhere / "imgpkg"), env=install.env(**off))  # no modes/imgpkg here
    assert by_link.returncode == 3
    runs = sorted(install.runs(), key=lambda r: r["argv"][0])
    assert [r["argv"] for r in runs] == [[str(install.dir / "modes" / "vendir"), "sync", "-f", "-"],
                                         [str(install.dir / "ocivendir"), "sync", "-f", "-"]]  # fmt: skip
    lost = install.run(argv0="vendir", env=install.env(**off, PATH="/nonexistent"))
    assert lost.returncode == 1
    assert lost.stderr == b"vendir: Error: ocivendir client: cannot find its own install directory\n"


def test_without_proc_a_server_start_names_the_program_by_its_path(install: Install, binaries: Path) -> None:
    install.client.write_bytes((binaries / "vendir-noproc").read_bytes())
    install.server_dir.rmdir()
    proc = install.popen(argv0=str(install.client))
    proc.communicate(timeout=30)
    _assert_started_detached(install, proc.pid, install.env())


@pytest.mark.parametrize(("given", "expected"), [
    ({"XDG_RUNTIME_DIR": "{tmp}/run"}, "{tmp}/run/ocivendir"),
    ({"OCIVENDIR_SERVER_DIR": "", "XDG_RUNTIME_DIR": "{tmp}/run", "TMPDIR": "{tmp}/t"}, "{tmp}/run/ocivendir"),
    ({"XDG_RUNTIME_DIR": "run", "TMPDIR": "{tmp}/t"}, "{tmp}/t/ocivendir-{uid}"),
    ({"XDG_RUNTIME_DIR": "", "TMPDIR": "{tmp}/t"}, "{tmp}/t/ocivendir-{uid}"),
    ({"TMPDIR": "t"}, "/tmp/ocivendir-{uid}"),  # noqa: S108 - the protocol's default
    ({}, "/tmp/ocivendir-{uid}"),  # noqa: S108 - the protocol's default
])  # fmt: skip
def test_the_socket_directory_is_resolved_as_the_server_resolves_it(install: Install, tmp_path: Path,
                                                                    given: dict[str, str], expected: str) -> None:  # fmt: skip
    def fill(text: str) -> str:
        return text.format(tmp=tmp_path, uid=os.geteuid())

    env = {"PATH": "/usr/bin:/bin", **{k: fill(v) for k, v in given.items()}}
    done = install.run(["sync", "--debug"], env=env)
    assert done.returncode == 3
    assert done.stderr.startswith(b"vendir: debug: ocivendir server unavailable (")
    assert b"%s/server-%s.sock" % (fill(expected).encode(), BUILD.encode()) in done.stderr or \
        b"(%s" % fill(expected).encode() in done.stderr  # fmt: skip


def test_eight_clients_at_once_each_get_their_own_status(install: Install) -> None:
    def script(call: Call) -> None:
        assert call.request is not None
        call.start(1000 + int(call.request.argv[1]))
        call.finish(int(call.request.argv[1]), stdout=call.request.argv[1].encode())

    with fake_server(install.server_dir, BUILD, script) as server:
        procs = [install.popen([str(n)]) for n in range(8)]
        outs = [proc.communicate(timeout=30)[0] for proc in procs]
        assert len(server.calls) == 8
    assert [(proc.returncode, out) for proc, out in zip(procs, outs, strict=True)] == [
        (n, str(n).encode()) for n in range(8)
    ]


def test_a_socket_that_leads_to_another_users_listener_is_handed_nothing(install: Install) -> None:
    """A socket that leads to another user's listener is handed nothing; the call runs in-process.

    A path component swapped after the directory's check (a TMPDIR in a shared directory) could lead there: the client
    hands a call only to a server of its own uid (SO_PEERCRED).
    """
    with foreign_listener() as theirs:
        (install.server_dir / f"server-{BUILD}.sock").symlink_to(theirs.socket)
        done = install.run(["sync", "-f", "-"], env=install.env(IMGPKG_REGISTRY_PASSWORD="secret-of-the-caller"))
    assert done.stdout == b"in-process\n"
    assert theirs.received == b""


def test_a_call_that_finds_a_server_holding_its_lock_starts_no_second_one(install: Install) -> None:
    """A refused socket with this build's server holding its lock: the call starts no second server.

    The server lives (a start would only lose that lock and exit); the call runs in-process once the start lock is free.
    """
    import fcntl  # noqa: PLC0415

    stale = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    stale.bind(str(install.server_dir / f"server-{BUILD}.sock"))
    stale.close()
    held = os.open(install.server_dir / f"server-{BUILD}.lock", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(held, fcntl.LOCK_EX)
        done = install.run(["sync"])
    finally:
        os.close(held)
    assert (done.returncode, done.stdout) == (3, b"in-process\n")
    assert install.starts() == []


def make_way(call: Call) -> None:
    call.close_fds()
    call.send(b"Y", b"the caller's nice value cannot be taken on: Permission denied")


@pytest.mark.parametrize("how", ["no server", "made way"])
def test_a_fifo_at_the_lock_path_is_never_waited_on(install: Install, how: str) -> None:
    """A FIFO planted at D/server-<build>.lock (or .start): the client looking whether the server holds its lock (no
    socket, or a server that made way for it: `Y`) opens it without waiting for a writer, and runs the call in-process.
    """  # noqa: D205
    for kind in ("lock", "start"):
        os.mkfifo(install.server_dir / f"server-{BUILD}.{kind}", 0o600)

    def call() -> tuple[int | None, bytes]:
        proc = install.popen(["sync"])
        try:
            out, _err = proc.communicate(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()
            pytest.fail("the client waited on a FIFO at the lock path")
        return proc.returncode, out

    if how == "made way":
        with fake_server(install.server_dir, BUILD, make_way) as server:
            done = call()
            server.only_call()
    else:
        done = call()
    assert done == (3, b"in-process\n")
