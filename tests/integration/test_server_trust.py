"""The server's trust boundary: a served call never has more rights, nor other start-up settings, than its caller.

A worker runs with the credentials and start-up environment of the server, so it serves only a caller whose uid,
gid, groups, capabilities and resource limits are the server's, whose environment sets nothing that acts when a
program starts (PYTHONPATH, LD_PRELOAD, PYTHONIOENCODING, …) and whose locale is the server's; any other call runs
in-process, with the caller's own rights and settings, and gives the in-process bytes. A server starts with a
scrubbed environment, once for a burst of first calls, and `server start` reports a failure as soon as it is known.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from ocivendir.server.build import build_id
from tests.support.builders import Pusher, make_image
from tests.support.foreign import foreign_listener
from tests.support.registry import Registry
from tests.support.server import ServerPlace, console_script, program, server_parents, server_pids

pytestmark = pytest.mark.integration

NO_CAPS = ["setpriv", "--inh-caps=-all", "--bounding-set=-all"]  # root without capabilities: file modes apply
GROUP = 5555


def _needs_root() -> None:
    if os.geteuid() != 0 or shutil.which("setpriv") is None or shutil.which("prlimit") is None:
        pytest.skip("needs root, setpriv and prlimit to start a server with other credentials")


def run(prefix: list[str], place: ServerPlace, binary: Path, *args: str, cwd: Path, server: str = "on",
        **env: str) -> tuple[int, str, str]:  # fmt: skip
    done = subprocess.run([*prefix, str(binary), *args], capture_output=True, text=True, cwd=cwd, timeout=120,
                          env=place.env(OCIVENDIR_SERVER=server, **env), check=False)  # fmt: skip
    return done.returncode, done.stdout, done.stderr


def start_as(prefix: list[str], place: ServerPlace) -> int:
    done = subprocess.run([*prefix, str(console_script()), "server", "start", "--json"], capture_output=True,
                          text=True, env=place.env(), timeout=60, check=False)  # fmt: skip
    assert done.returncode == 0, done.stderr
    pid = json.loads(done.stdout)["result"]["pid"]
    assert isinstance(pid, int)
    return pid


def test_a_caller_without_the_servers_group_runs_in_process_and_is_refused_as_in_process(
    place: ServerPlace, tmp_path: Path
) -> None:
    """A server started with group 5555 copied a group-only `directory:` source for a caller without that group."""
    _needs_root()
    source = tmp_path / "group-only"
    source.mkdir()
    (source / "secret.txt").write_text("for the group only")
    for path in (source, source / "secret.txt"):
        os.chown(path, 65534, GROUP)
    source.chmod(0o750)  # another owner's: for root without capabilities, the group's bits decide
    (source / "secret.txt").chmod(0o640)
    (tmp_path / "vendir.yml").write_text(
        "apiVersion: vendir.k14s.io/v1alpha1\nkind: Config\ndirectories:\n- path: out\n  contents:\n"
        f"  - path: .\n    directory: {{path: {source}}}\n"
    )
    vendir = program(tmp_path / "bin", "vendir")
    start_as([*NO_CAPS, "--groups", str(GROUP)], place)
    member = [*NO_CAPS, "--groups", str(GROUP)]
    stranger = [*NO_CAPS, "--clear-groups"]
    args = ("sync", "--lock-file", "/dev/null")

    served = run(member, place, vendir, *args, "--debug", cwd=tmp_path)
    assert served[0] == 0, served[2]  # a caller with the server's group is served (no fallback) and may read it
    assert "running in-process" not in served[2]
    assert (tmp_path / "out" / "secret.txt").read_text() == "for the group only"
    shutil.rmtree(tmp_path / "out")

    in_process = run(stranger, place, vendir, *args, cwd=tmp_path, server="off")
    assert in_process[0] != 0
    assert "permission denied" in in_process[2].lower()
    assert run(stranger, place, vendir, *args, cwd=tmp_path) == in_process
    assert not (tmp_path / "out").exists()
    debug = run(stranger, place, vendir, *args, "--debug", cwd=tmp_path)[2]
    assert "vendir: debug: ocivendir server unavailable (the caller's groups are not the server's); running" in debug


def test_a_caller_without_the_servers_file_size_limit_pulls_as_in_process(
    place: ServerPlace, registry: Registry, pusher: Pusher, repo_prefix: str, tmp_path: Path
) -> None:
    """A server started under `ulimit -f 200` made a later caller's 3 MiB pull fail with `file too large`."""
    _needs_root()
    ref = pusher.image(f"{repo_prefix}/big", make_image({"big.bin": os.urandom(3 << 20)}))
    start_as(["prlimit", "--fsize=204800"], place)
    binary = program(tmp_path / "bin", "ocivendir")
    outcomes = {}
    for server in ("off", "on"):
        code, out, err = run([], place, binary, "pull", "-i", ref, "-o", f"out-{server}", cwd=tmp_path, server=server,
                             OCIVENDIR_CACHE_DIR=str(tmp_path / f"cache-{server}"))  # fmt: skip
        outcomes[server] = (code, out.replace(f"out-{server}", "OUT"), err)
        assert (tmp_path / f"out-{server}" / "big.bin").stat().st_size == 3 << 20
    assert outcomes["on"] == outcomes["off"]
    assert outcomes["on"][0] == 0
    debug = run([], place, binary, "version", "--debug", cwd=tmp_path)[2]
    assert "(the caller's resource limits are not the server's); running in-process" in debug
    limited = run(["prlimit", "--fsize=204800"], place, binary, "version", "--debug", cwd=tmp_path)
    assert (limited[0], "running in-process" in limited[2]) == (0, False)  # the same limits: served


def test_a_caller_with_fewer_capabilities_runs_in_process(place: ServerPlace, tmp_path: Path) -> None:
    """Root in a container without CAP_DAC_OVERRIDE must not borrow a full root server's (only /proc says so)."""
    _needs_root()
    place.start()
    vendir = program(tmp_path / "bin", "vendir")
    code, out, err = run(NO_CAPS, place, vendir, "version", "--debug", cwd=tmp_path)
    assert (code, out.startswith("vendir version ")) == (0, True)
    assert "(the caller's CapPrm is not the server's); running in-process" in err
    assert "running in-process" not in run([], place, vendir, "version", "--debug", cwd=tmp_path)[2]


_SITECUSTOMIZE = """
import os
with open({marker!r}, "a") as marker:
    marker.write(f"{{os.getpid()}} {{os.environ.get('IMGPKG_REGISTRY_PASSWORD_0', '-')}}\\n")
"""


def test_a_sitecustomize_on_pythonpath_runs_only_in_the_calls_that_carry_it(place: ServerPlace,
                                                                           tmp_path: Path) -> None:  # fmt: skip
    """A PYTHONPATH given to the first served call was loaded by the server, and captured later callers' secrets."""
    planted = tmp_path / "planted"
    planted.mkdir()
    marker = tmp_path / "marker"
    (planted / "sitecustomize.py").write_text(_SITECUSTOMIZE.format(marker=str(marker)))
    vendir = program(tmp_path / "bin", "vendir")
    carried = []
    for _ in range(2):
        process = subprocess.Popen([str(vendir), "version", "--debug"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                   text=True, cwd=tmp_path, env=place.env(PYTHONPATH=str(planted)))  # fmt: skip
        out, err = process.communicate(timeout=60)
        assert (process.returncode, out.startswith("vendir version ")) == (0, True)
        assert "(PYTHONPATH is set: it acts when a program starts); running in-process" in err
        carried.append(process.pid)
    assert place.status() == {}  # no server was started for calls no server could run
    server = place.start()
    for _ in range(2):
        code, _out, err = run([], place, vendir, "version", "--debug", cwd=tmp_path, IMGPKG_REGISTRY_PASSWORD_0="pw")
        assert (code, "running in-process" in err) == (0, False)
    lines = marker.read_text().splitlines()
    assert lines == [f"{pid} -" for pid in carried]  # in the carrying calls' own processes, nowhere else
    environ = Path(f"/proc/{server}/environ").read_bytes().split(b"\0")
    assert not [entry for entry in environ if entry.startswith((b"PYTHON", b"LD_", b"IMGPKG_"))]


def test_a_server_starts_with_a_scrubbed_environment_and_an_isolated_interpreter(place: ServerPlace,
                                                                                tmp_path: Path) -> None:  # fmt: skip
    """A first call's environment never becomes the server's: credentials, proxies, the harmless PYTHON*, hooks."""
    process = subprocess.run([str(program(tmp_path / "bin", "vendir")), "version"], capture_output=True, cwd=tmp_path,
                             env=place.env(IMGPKG_PASSWORD="secret", HTTPS_PROXY="http://proxy:1",
                                           PYTHONDONTWRITEBYTECODE="1", PYTHONUNBUFFERED="1", LANG="C.UTF-8",
                                           TMPDIR=str(tmp_path), OCIVENDIR_SERVER_TEST_HOOKS="1"),
                             timeout=60, check=False)  # fmt: skip
    assert process.returncode == 0
    place.wait_for(lambda: place.status() != {})
    [pid] = server_parents(place.dir)
    environ = sorted(Path(f"/proc/{pid}/environ").read_bytes().decode().split("\0")[:-1])
    names = {entry.partition("=")[0] for entry in environ}
    assert names <= {"PATH", "HOME", "TMPDIR", "XDG_RUNTIME_DIR", "LC_ALL", "LC_CTYPE", "LANG"} | {
        name for name in names if name.startswith("OCIVENDIR_SERVER_")}  # fmt: skip
    assert {"OCIVENDIR_SERVER_DIR", "LANG", "TMPDIR"} <= names
    assert "OCIVENDIR_SERVER_TEST_HOOKS" not in names  # only a server started by hand takes the suite's hook switch
    cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    assert cmdline[1] in {b"-EsP", b"-EP"}  # no PYTHON* variable read, no script directory on sys.path


_AUDIT_HOOK = """
import os, sys
def spy(event, args):
    if event == "os.putenv" and args[0] == b"IMGPKG_REGISTRY_PASSWORD_0":
        with open({marker!r}, "a") as marker:
            marker.write(f"{{os.getpid()}} saw {{args[1]!r}}\\n")
sys.addaudithook(spy)
"""


def test_a_server_started_by_hand_restarts_without_what_its_environment_planted(place: ServerPlace,
                                                                                tmp_path: Path) -> None:  # fmt: skip
    """`server start --foreground` with a PYTHONPATH whose sitecustomize hooks every later call's environment."""
    planted = tmp_path / "planted"
    planted.mkdir()
    marker = tmp_path / "marker"
    (planted / "sitecustomize.py").write_text(_AUDIT_HOOK.format(marker=str(marker)))
    server = subprocess.Popen([str(console_script()), "server", "start", "--foreground"], stderr=subprocess.DEVNULL,
                              env=place.env(PYTHONPATH=str(planted), IMGPKG_PASSWORD="secret"))  # fmt: skip
    try:
        place.wait_for(lambda: place.status() != {})
        code, _out, err = run([], place, program(tmp_path / "bin", "vendir"), "version", "--debug", cwd=tmp_path,
                              IMGPKG_REGISTRY_PASSWORD_0="pw")  # fmt: skip
        assert (code, "running in-process" in err) == (0, False)
        assert not marker.exists()  # the served call's environment reached no hook
        environ = Path(f"/proc/{server.pid}/environ").read_bytes().split(b"\0")
        assert not [entry for entry in environ if entry.startswith((b"PYTHON", b"IMGPKG_"))]
        assert place.status()["pid"] == server.pid  # the same process, exec'd again
    finally:
        server.terminate()
        server.wait(30)


def _bytes(place: ServerPlace, binary: Path, cwd: Path, server: str, env: dict[str, str]) -> tuple[int, bytes, bytes]:
    done = subprocess.run([str(binary), "pull", "-i", "127.0.0.1:9/caf\u00e4:v1", "-o", "out"], capture_output=True,
                          cwd=cwd, timeout=60, check=False, env=place.env(OCIVENDIR_SERVER=server, **env))  # fmt: skip
    return done.returncode, done.stdout, done.stderr


@pytest.mark.parametrize("env", [{"PYTHONIOENCODING": "ascii"}, {"PYTHONUTF8": "0", "LC_ALL": "C"}, {"LC_ALL": "C"},
                                 {"LC_ALL": "", "LC_CTYPE": "C", "LANG": ""}])  # fmt: skip
def test_a_call_with_other_encoding_settings_gives_the_in_process_bytes(place: ServerPlace, tmp_path: Path,
                                                                        env: dict[str, str]) -> None:  # fmt: skip
    """`ä` in a reference: `\\xe4` or surrogates in-process, `ä` served — the worker had the server's encodings."""
    place.start(LANG="C.UTF-8", LC_ALL="", LC_CTYPE="")
    binary = program(tmp_path / "bin", "ocivendir")
    base = {"LANG": "C.UTF-8", "LC_ALL": "", "LC_CTYPE": ""}
    in_process = _bytes(place, binary, tmp_path, "off", {**base, **env})
    assert in_process[0] != 0
    assert b"caf" in in_process[2]
    assert _bytes(place, binary, tmp_path, "on", {**base, **env}) == in_process
    same = _bytes(place, binary, tmp_path, "on", base)  # the server's own settings: served, `ä` as UTF-8
    assert "caf\u00e4".encode() in same[2]
    assert same == _bytes(place, binary, tmp_path, "off", base)


def test_a_burst_of_first_calls_starts_one_server(place: ServerPlace, tmp_path: Path) -> None:
    """Six first calls at once: one server process is started (today's calls 2..n each started one that lost)."""
    vendir = program(tmp_path / "bin", "vendir")
    code = textwrap.dedent(f"""
        import ctypes, json, os, subprocess, sys
        ctypes.CDLL(None, use_errno=True).prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER: daemons become ours
        calls = [subprocess.Popen([{str(vendir)!r}, "version"], stdout=subprocess.DEVNULL) for _ in range(6)]
        direct = {{call.pid for call in calls}}
        codes = [call.wait() for call in calls]
        sys.stdout.write(json.dumps(codes) + "\\n")
        sys.stdout.flush()
        sys.stdin.read()  # the test has stopped the server
        adopted = 0
        while True:
            try:
                pid, _status = os.wait()
            except ChildProcessError:
                break
            adopted += pid not in direct
        sys.stdout.write(json.dumps(adopted) + "\\n")
    """)
    helper = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                              env=place.env(), cwd=tmp_path)  # fmt: skip
    assert helper.stdin is not None
    assert helper.stdout is not None
    assert json.loads(helper.stdout.readline()) == [0] * 6
    place.wait_for(lambda: place.status() != {})
    assert place.server("stop").returncode == 0
    place.wait_for(lambda: server_pids(place.dir) == [])
    helper.stdin.close()
    assert json.loads(helper.stdout.readline()) == 1  # every daemon started was adopted and reaped here: one
    assert helper.wait(30) == 0


def test_server_start_reports_the_servers_own_error_at_once(place: ServerPlace) -> None:
    """A daemon that fails (here: a bad setting) is reported with its reason, not as a bare timeout 15 s later."""
    done = place.server("start", OCIVENDIR_SERVER_WORKERS="lots")
    assert done.returncode != 0
    assert "the server did not start: invalid value 'lots' for OCIVENDIR_SERVER_WORKERS" in done.stderr
    assert place.status() == {}


def test_server_start_reports_an_unusable_directory_without_starting_anything(tmp_path: Path) -> None:
    place = ServerPlace()
    try:
        place.dir.chmod(0o755)
        done = place.server("start")
        assert done.returncode != 0
        assert f"the server directory is unusable: {place.dir} has mode 0755, not 0700" in done.stderr
        assert server_pids(place.dir) == []
    finally:
        place.cleanup()


def test_server_start_waits_for_a_start_under_way_and_reports_its_server(place: ServerPlace) -> None:
    """`server start` while another start holds the start lock: it starts no daemon and reports that one's server."""
    from ocivendir.fs.locks import hold_lock  # noqa: PLC0415
    from ocivendir.server.place import start_path  # noqa: PLC0415

    lock = hold_lock(start_path(str(place.dir), build_id()))  # as a client's start holds it
    try:
        starting = subprocess.Popen([str(console_script()), "server", "start", "--json"], stdout=subprocess.PIPE,
                                    text=True, env=place.env())  # fmt: skip
        serving = subprocess.Popen([str(console_script()), "server", "start", "--foreground"], env=place.env(),
                                   stderr=subprocess.DEVNULL)  # fmt: skip
        place.wait_for(lambda: place.status() != {})
    finally:
        os.close(lock)
    out, _ = starting.communicate(timeout=60)
    assert starting.returncode == 0
    assert json.loads(out)["result"]["pid"] == serving.pid
    assert server_parents(place.dir) == [serving.pid]


def test_a_socket_that_leads_to_another_users_listener_is_handed_nothing(tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    """A socket that leads to another user's listener is handed nothing; the call runs in-process.

    The socket directory is checked, then the socket connected to: whoever can swap a path component between the two
    (a TMPDIR in a shared, non-sticky directory) would be handed the call's environment, stdio and working directory.
    """
    from ocivendir.server.client import call_server  # noqa: PLC0415

    with foreign_listener() as theirs:
        ours = tmp_path / "ours"
        ours.mkdir(mode=0o700)
        (ours / f"server-{build_id()}.sock").symlink_to(theirs.socket)  # where the swap would have led
        monkeypatch.setenv("OCIVENDIR_SERVER_DIR", str(ours))
        monkeypatch.setenv("IMGPKG_REGISTRY_PASSWORD", "secret-of-the-caller")
        assert call_server(["ocivendir", "version"]) is None  # run in-process
    assert theirs.received == b""
