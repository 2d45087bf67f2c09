"""Reused workers: calls back to back through ONE worker give what the same calls give in-process, one after another.

Each test starts a server with one worker that is never retired for its call count, runs its calls through it with
a client that speaks the wire itself (so the `P` frame's pid shows which worker served), and runs the same calls
in-process. What one call put in place — credentials, proxies, offline, umask, directory, stdin — is gone for the
next; a call that leaves something behind (a thread, a descriptor, an environment variable) or raises retires its
worker, and the next call is served by a fresh one. Held connections never stall a call, `status` or `stop`.
"""

from __future__ import annotations

import os
import resource
import signal
import socket
import stat
import struct
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

from ocivendir.fs.fileid import SETTLED_NS
from ocivendir.server import wire
from ocivendir.server.build import build_id
from tests.integration.test_kapp_controller import PLACEHOLDER, config, lock
from tests.support.builders import Pusher, make_bundle, make_image
from tests.support.cutter import CuttingProxy
from tests.support.faults import silent_server
from tests.support.registry import PASSWORD, USERNAME, Registry
from tests.support.server import ServerPlace, ended, program, worker_in, workers

pytestmark = pytest.mark.integration

Outcome = tuple[int, str, str]


class OneWorker:
    """A server with one reused worker, and the two ways of making a call: through it, and in-process."""

    def __init__(self, place: ServerPlace, bin_dir: Path, **env: str) -> None:
        """Start the server (one worker, never retired for its count)."""
        self.place, self.bin_dir = place, bin_dir
        self.server_pid = place.start(**{"OCIVENDIR_SERVER_WORKERS": "1", "OCIVENDIR_SERVER_MAX_CALLS": "100000",
                                         "OCIVENDIR_SERVER_TEST_HOOKS": "1", **env})  # fmt: skip

    def retired(self) -> int:
        """How many workers the server has retired (its `status` facts, asked over the wire)."""
        import json  # noqa: PLC0415

        request = wire.Request(op="status", build=build_id(), umask=0o022, cwd="/", argv=[], env={})
        with socket.socket(socket.AF_UNIX) as sock, Path(os.devnull).open("rb") as null:
            sock.connect(str(self.place.dir / f"server-{build_id()}.sock"))
            root = os.open("/", os.O_RDONLY | os.O_DIRECTORY)
            try:
                wire.send_request(sock, wire.encode_request(request), [null.fileno()] * 3 + [root])
            finally:
                os.close(root)
            kind, payload = wire.read_frame(sock) or (b"", b"")
        assert kind == b"I", (kind, payload)
        facts = json.loads(payload)
        self.last_retired = facts["last_retired"]
        return int(facts["retired"])

    def env(self, **extra: str) -> dict[str, str]:
        return self.place.env(**extra)

    def served(self, prog: str, *args: str, cwd: Path | int, stdin: bytes = b"", umask: int = 0o022,
               env: dict[str, str] | None = None) -> tuple[Outcome, int]:  # fmt: skip
        """The call through the server's worker, and that worker's pid (from its `P` frame)."""
        environ = env if env is not None else self.env()
        request = wire.Request(op="call", build=build_id(), umask=umask, cwd=str(cwd), argv=[str(program(self.bin_dir, prog)), *args], env=environ)  # fmt: skip
        with tempfile.TemporaryFile() as given, tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
            given.write(stdin)
            given.seek(0)
            directory = cwd if isinstance(cwd, int) else os.open(cwd, os.O_RDONLY | os.O_DIRECTORY)
            with socket.socket(socket.AF_UNIX) as sock:
                sock.connect(str(self.place.dir / f"server-{build_id()}.sock"))
                wire.send_request(sock, wire.encode_request(request), [given.fileno(), out.fileno(), err.fileno(), directory])  # fmt: skip
                if not isinstance(cwd, int):
                    os.close(directory)
                kind, payload = wire.read_frame(sock) or (b"", b"")
                assert kind == b"P", (kind, payload)
                pid = struct.unpack(">I", payload)[0]
                code = -1
                while (got := wire.read_frame(sock)) is not None:
                    if got[0] == b"X":
                        code = struct.unpack(">I", got[1])[0]
            out.seek(0)
            err.seek(0)
            return (code, out.read().decode(), err.read().decode()), pid

    def in_process(self, prog: str, *args: str, cwd: Path, stdin: bytes = b"", umask: int = 0o022,
                   env: dict[str, str] | None = None) -> Outcome:  # fmt: skip
        """The same call run by the program itself, the server switched off."""
        environ = {**(env if env is not None else self.env()), "OCIVENDIR_SERVER": "off"}
        done = subprocess.run([str(program(self.bin_dir, prog)), *args], input=stdin, capture_output=True, cwd=cwd,
                              env=environ, timeout=120, check=False, preexec_fn=lambda: os.umask(umask))  # fmt: skip
        return done.returncode, done.stdout.decode(), done.stderr.decode()


def tree(root: Path) -> list[tuple[str, int, bytes]]:
    return sorted((str(p.relative_to(root)), stat.S_IMODE(p.lstat().st_mode), p.read_bytes() if p.is_file() else b"")
                  for p in root.rglob("*"))  # fmt: skip


@pytest.fixture
def bin_dir(tmp_path: Path) -> Path:
    return tmp_path / "bin"


@pytest.fixture
def one(place: ServerPlace, bin_dir: Path) -> OneWorker:
    return OneWorker(place, bin_dir)


def _sync_both(one: OneWorker, tmp_path: Path, name: str, stream: str, umask: int = 0o022,
               **env: str) -> tuple[Outcome, int]:  # fmt: skip
    """A vendir sync through the worker and in-process, each with a fresh cache and directory; they must agree."""
    results = {}
    pid = 0
    for how in ("served", "in-process"):
        work = tmp_path / f"{name}-{how}"
        work.mkdir()
        environ = one.env(VENDIR_CACHE_DIR=str(tmp_path / f"cache-{name}-{how}"), **env)
        args = ("sync", "-f", "-", "--lock-file", "/dev/null")
        if how == "served":
            outcome, pid = one.served("vendir", *args, cwd=work, stdin=stream.encode(), umask=umask, env=environ)
        else:
            outcome = one.in_process("vendir", *args, cwd=work, stdin=stream.encode(), umask=umask, env=environ)
        results[how] = (*outcome, tree(work))
    assert results["served"] == results["in-process"], name
    return results["served"][:3], pid  # type: ignore[return-value]


def test_credentials_with_then_without_then_wrong_are_each_the_calls_own(
    one: OneWorker, auth_registry: Registry, tmp_path: Path
) -> None:
    ref = Pusher(auth_registry).image("reuse/private", make_image({"p.txt": "private"}))
    stream = config("image", ref, secret=None)
    good = {"IMGPKG_REGISTRY_HOSTNAME": auth_registry.host, "IMGPKG_REGISTRY_USERNAME": USERNAME,
            "IMGPKG_REGISTRY_PASSWORD": PASSWORD}  # fmt: skip
    first, pid = _sync_both(one, tmp_path, "with", stream, **good)
    assert first == (0, lock("image", ref), "")
    second, again = _sync_both(one, tmp_path, "without", stream)
    assert second[0] == 1
    third, still = _sync_both(one, tmp_path, "wrong", stream, **{**good, "IMGPKG_REGISTRY_PASSWORD": "wrong"})
    assert third[0] == 1
    assert pid == again == still, one.place.status()["last_retired"]  # one worker served all three


def test_proxy_variables_set_then_unset(one: OneWorker, registry: Registry, pusher: Pusher, repo_prefix: str,
                                        tmp_path: Path) -> None:  # fmt: skip
    ref = pusher.image(f"{repo_prefix}/img", make_image({"a.yml": "a"}))
    stream = config("image", ref, secret=None)
    with silent_server() as proxy:
        dead = {"HTTP_PROXY": proxy.url, "HTTPS_PROXY": proxy.url, "http_proxy": proxy.url, "NO_PROXY": "",
                "OCIVENDIR_TIMEOUT": "2s"}  # fmt: skip
        _, pid = _sync_both(one, tmp_path, "proxied", stream, **dead)
    unset, again = _sync_both(one, tmp_path, "direct", stream)
    assert unset == (0, lock("image", ref), "")
    assert pid == again, one.place.status()["last_retired"]


def test_offline_set_then_unset(one: OneWorker, registry: Registry, pusher: Pusher, repo_prefix: str,
                                tmp_path: Path) -> None:  # fmt: skip
    ref = pusher.image(f"{repo_prefix}/img", make_image({"a.yml": "a"}))
    stream = config("image", ref, secret=None)
    offline, pid = _sync_both(one, tmp_path, "offline", stream, OCIVENDIR_OFFLINE="1")
    assert offline[0] == 1
    online, again = _sync_both(one, tmp_path, "online", stream)
    assert online == (0, lock("image", ref), "")
    assert pid == again, one.place.status()


def test_umask_077_then_022(one: OneWorker, registry: Registry, pusher: Pusher, repo_prefix: str,
                            tmp_path: Path) -> None:  # fmt: skip
    ref = pusher.image(f"{repo_prefix}/img", make_image({"a.yml": "a", "d/b.txt": "b"}))
    stream = config("image", ref, secret=None)
    _, pid = _sync_both(one, tmp_path, "u077", stream, umask=0o077)
    _, again = _sync_both(one, tmp_path, "u022", stream, umask=0o022)
    assert stat.S_IMODE((tmp_path / "u022-served" / "0" / "d").stat().st_mode) == 0o755
    assert pid == again, one.place.status()["last_retired"]


def test_the_callers_directory_removed(one: OneWorker, tmp_path: Path) -> None:
    gone = tmp_path / "gone"
    gone.mkdir()
    directory = os.open(gone, os.O_RDONLY | os.O_DIRECTORY)
    gone.rmdir()
    try:
        served, pid = one.served("vendir", "sync", cwd=directory)
    finally:
        os.close(directory)
    (tmp_path / "gone-too").mkdir()
    expected = subprocess.run(
        [str(program(one.bin_dir, "vendir")), "sync"], capture_output=True, cwd=tmp_path / "gone-too", check=False,
        env={**one.env(), "OCIVENDIR_SERVER": "off"}, timeout=60,
        preexec_fn=(tmp_path / "gone-too").rmdir,
    )  # fmt: skip
    assert served == (expected.returncode, expected.stdout.decode(), expected.stderr.decode())
    after, again = one.served("vendir", "version", cwd=tmp_path)
    assert after == one.in_process("vendir", "version", cwd=tmp_path)
    assert pid == again, one.place.status()["last_retired"]


def test_stdin_not_read_to_the_end_is_not_seen_by_the_next_call(
    one: OneWorker, registry: Registry, pusher: Pusher, repo_prefix: str, tmp_path: Path
) -> None:
    ref = pusher.image(f"{repo_prefix}/img", make_image({"a.yml": "a"}))
    unread = b"x" * (1 << 20)
    first, pid = one.served("vendir", "version", cwd=tmp_path, stdin=unread)
    assert first == one.in_process("vendir", "version", cwd=tmp_path, stdin=unread)
    second, again = _sync_both(one, tmp_path, "after", PLACEHOLDER + config("image", ref))
    assert second == (0, lock("image", ref), "")
    assert pid == again, one.place.status()["last_retired"]


def test_a_failing_call_keeps_the_worker_and_one_that_raises_retires_it(one: OneWorker, tmp_path: Path) -> None:
    failing, pid = one.served("vendir", "sync", "-f", "-", cwd=tmp_path, stdin=b"directories: [\n")
    assert failing == one.in_process("vendir", "sync", "-f", "-", cwd=tmp_path, stdin=b"directories: [\n")
    assert failing[0] == 1
    raised, again = one.served("vendir", "version", cwd=tmp_path, env=one.env(OCIVENDIR_SERVER_TEST_LEAK="raise"))
    assert again == pid
    assert raised[0] == 1
    assert raised[2].startswith("Traceback (most recent call last):")
    assert raised[2].endswith("RuntimeError: OCIVENDIR_SERVER_TEST_LEAK\n")
    after, fresh = one.served("vendir", "version", cwd=tmp_path)
    assert after == one.in_process("vendir", "version", cwd=tmp_path)
    assert fresh != pid
    assert one.retired() == 1


@pytest.mark.parametrize("leak", ["thread", "descriptor", "environ"])
def test_a_call_that_leaves_something_behind_retires_its_worker(one: OneWorker, tmp_path: Path, leak: str) -> None:
    clean, pid = one.served("vendir", "version", cwd=tmp_path)
    _, same = one.served("vendir", "version", cwd=tmp_path)
    assert same == pid
    leaky, again = one.served("vendir", "version", cwd=tmp_path, env=one.env(OCIVENDIR_SERVER_TEST_LEAK=leak))
    assert (leaky, again) == (clean, pid)  # the caller sees nothing of it
    after, fresh = one.served("vendir", "version", cwd=tmp_path)
    assert after == clean
    assert fresh != pid
    assert one.retired() == 1


@pytest.mark.parametrize("leak", ["raise", "thread"])
def test_a_server_not_started_with_the_hooks_switched_on_ignores_a_calls_leak_hook(
    place: ServerPlace, bin_dir: Path, tmp_path: Path, leak: str
) -> None:
    one = OneWorker(place, bin_dir, OCIVENDIR_SERVER_TEST_HOOKS="")
    clean, pid = one.served("vendir", "version", cwd=tmp_path)
    asked, same = one.served("vendir", "version", cwd=tmp_path, env=one.env(OCIVENDIR_SERVER_TEST_LEAK=leak))
    assert (asked, same) == (clean, pid)
    assert one.served("vendir", "version", cwd=tmp_path) == (clean, pid)
    assert one.retired() == 0


def test_max_calls_one_gives_a_fresh_worker_for_every_call(place: ServerPlace, bin_dir: Path, tmp_path: Path) -> None:
    one = OneWorker(place, bin_dir, OCIVENDIR_SERVER_MAX_CALLS="1")
    pids = [one.served("vendir", "version", cwd=tmp_path)[1] for _ in range(3)]
    assert len(set(pids)) == 3


def _stalled(one: OneWorker, tmp_path: Path, url: str) -> tuple[subprocess.Popen[bytes], Path]:
    work = tmp_path / f"stalled-{time.monotonic_ns()}"
    work.mkdir()
    process = subprocess.Popen([str(program(one.bin_dir, "vendir")), "sync", "-f", "-", "--lock-file", "/dev/null"],
                               stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=work,
                               env=one.env(OCIVENDIR_TIMEOUT="60s"))  # fmt: skip
    assert process.stdin is not None
    process.stdin.write(config("image", f"{url.removeprefix('http://')}/x/y:v1", secret=None).encode())
    process.stdin.close()
    process.stdin = None
    return process, work


@pytest.mark.parametrize("how", ["client SIGTERM", "client SIGKILL", "worker SIGKILL", "client SIGINT"])
def test_a_kill_mid_call_ends_or_frees_the_worker_and_the_next_call_is_served(
    one: OneWorker, registry: Registry, pusher: Pusher, repo_prefix: str, tmp_path: Path, how: str
) -> None:
    ref = pusher.image(f"{repo_prefix}/img", make_image({"a.yml": "a"}))
    with silent_server() as silent:
        process, work = _stalled(one, tmp_path, silent.url)
        worker = worker_in(one.place, one.server_pid, work)
        time.sleep(0.3)  # the worker waits on the silent registry
        victim, signo = (worker, signal.SIGKILL) if how.startswith("worker") else (process.pid, getattr(signal, how.split()[1]))  # fmt: skip
        os.kill(victim, signo)
        _, err = process.communicate(timeout=30)
    if how == "worker SIGKILL":
        assert (process.returncode, err.decode()) == (1, f"vendir: Error: ocivendir server: the call ended without an exit status (worker {worker} stopped)\n")  # fmt: skip
    elif how == "client SIGINT":
        assert (process.returncode, err) == (1, b"\nvendir: Error: Aborted\n")
    else:
        assert process.returncode == -signo
    after, pid = _sync_both(one, tmp_path, "after", config("image", ref, secret=None))
    assert after == (0, lock("image", ref), "")
    if how != "client SIGINT":  # an interrupted call frees its worker, clean or retired
        assert pid != worker  # a SIGTERM ends the worker, as it ends the in-process call; a fresh one serves
        one.retired()
        assert workers(one.server_pid) == [pid], one.last_retired


def test_held_connections_stall_no_call_status_or_stop(one: OneWorker, tmp_path: Path) -> None:
    path = str(one.place.dir / f"server-{build_id()}.sock")
    held = [socket.socket(socket.AF_UNIX) for _ in range(10)]
    try:
        for sock in held:
            sock.connect(path)  # and never send a request
        status = one.place.status()
        assert status["busy"] == 1  # the only worker waits for a request; the server answered this itself
        version = subprocess.run([str(program(one.bin_dir, "vendir")), "--debug", "version"], capture_output=True,
                                 text=True, cwd=tmp_path, env=one.env(), timeout=30, check=False)  # fmt: skip
        assert version.returncode == 0
        assert version.stdout.startswith("vendir version ")
        assert (
            "ocivendir server unavailable (busy: all 1 workers are serving calls); running in-process" in version.stderr
        )
        stopped = one.place.server("stop")
        assert stopped.returncode == 0
        assert stopped.stdout.startswith("ocivendir server: stopping (pid ")
    finally:
        for sock in held:
            sock.close()


def _footprint(pid: int) -> tuple[int, int]:
    """A process's open descriptors and resident pages."""
    return len(list(Path(f"/proc/{pid}/fd").iterdir())), int(Path(f"/proc/{pid}/statm").read_text().split()[1])


@pytest.mark.parametrize("app", ["digest-pinned", "tag over https"])
def test_soak_three_hundred_warm_calls_through_one_worker_grow_nothing(
    one: OneWorker, request: pytest.FixtureRequest, repo_prefix: str, tmp_path: Path, app: str
) -> None:
    """300 warm syncs: one worker serves them all; descriptors unchanged, RSS within 10 % from 100 to 300.

    The tag App over https keeps its TLS context and its connection from call to call: neither may grow.
    """
    extra: dict[str, str] = {}
    if app == "digest-pinned":
        ref = Pusher(request.getfixturevalue("registry")).image(
            f"{repo_prefix}/img", make_image({"a.yml": "a: 1\n", "d/b.txt": "b"})
        )
        stream, expected = (PLACEHOLDER + config("image", ref)).encode(), lock("image", ref)
    else:
        tls: Registry = request.getfixturevalue("tls_registry")
        assert tls.ca_cert is not None
        Pusher(tls).image(f"{repo_prefix}/soak", make_image({"a.yml": "a: 1\n"}), tag="v1")
        tagged = f"{tls.host}/{repo_prefix}/soak:v1"
        stream, expected = config("image", tagged, secret=None).encode(), None
        extra["SSL_CERT_FILE"] = str(tls.ca_cert)
    env = one.env(VENDIR_CACHE_DIR=str(tmp_path / "cache"), **extra)
    work = tmp_path / "work"
    work.mkdir()
    pids, marks = set(), {}
    for number in range(1, 301):
        outcome, pid = one.served(
            "vendir", "sync", "-f", "-", "--lock-file", "/dev/null", cwd=work, stdin=stream, env=env
        )
        expected = expected or outcome[1]  # a tag's lock names the digest it resolved to: the first call's
        assert outcome == (0, expected, ""), number
        pids.add(pid)
        if number in (100, 300):
            marks[number] = _footprint(pid)
    assert len(pids) == 1, (one.retired(), one.last_retired)
    (fds_100, rss_100), (fds_300, rss_300) = marks[100], marks[300]
    assert fds_300 == fds_100
    assert rss_300 <= rss_100 * 1.1


def test_a_call_running_when_the_server_stops_still_gets_its_answer(one: OneWorker, tmp_path: Path) -> None:
    """`server stop` mid-call: the call ends as it would in-process (here: its deadline), not `without an exit status`."""
    with silent_server() as silent:
        work = tmp_path / "work"
        work.mkdir()
        stream = config("image", f"{silent.url.removeprefix('http://')}/x/y:v1", secret=None)
        process = subprocess.Popen([str(program(one.bin_dir, "vendir")), "sync", "-f", "-", "--lock-file", "/dev/null"],
                                   stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                   cwd=work, env=one.env(OCIVENDIR_TIMEOUT="3s"))  # fmt: skip
        process.stdin.write(stream)  # type: ignore[union-attr]
        process.stdin.close()  # type: ignore[union-attr]
        process.stdin = None
        worker = worker_in(one.place, one.server_pid, work)
        assert one.place.server("stop").returncode == 0
        _, err = process.communicate(timeout=60)
        expected = one.in_process("vendir", "sync", "-f", "-", "--lock-file", "/dev/null", cwd=work,
                                  stdin=stream.encode(), env=one.env(OCIVENDIR_TIMEOUT="3s"))  # fmt: skip
    assert (process.returncode, err) == expected[::2]
    assert "without an exit status" not in err
    one.place.wait_for(lambda: ended(worker))


def test_a_trickling_request_frees_its_worker_within_the_request_deadline(one: OneWorker, tmp_path: Path) -> None:
    """A client that sends its request a byte a second is cut off before its twelfth byte (the deadline is 5 s in all)."""
    body = b"call\0"
    with socket.socket(socket.AF_UNIX) as sock:
        sock.connect(str(one.place.dir / f"server-{build_id()}.sock"))
        null = os.open(os.devnull, os.O_RDONLY)
        try:
            socket.send_fds(sock, [struct.pack(">4sI", wire.MAGIC, 1000)], [null] * 4)
        finally:
            os.close(null)
        sock.settimeout(1.0)
        closed_after = None
        for sent in range(12):
            try:
                if sock.recv(1) == b"":
                    closed_after = sent  # closed by the worker
                    break
            except TimeoutError:
                pass
            sock.send(body[sent % len(body) : sent % len(body) + 1])
    assert closed_after is not None
    assert closed_after < 12
    done, _ = one.served("vendir", "version", cwd=tmp_path)
    assert done[0] == 0


def test_a_tag_app_over_https_keeps_its_worker_and_its_warm_reconcile_costs_one_request(
    one: OneWorker, tls_registry: Registry, tmp_path: Path
) -> None:
    """A registry reached over TLS is served as a plain one is: the worker stays for the next call.

    Every https registry loads the TLS modules; none may be missing from the warm set, or each such call retires its
    worker (with its remembered challenges and TLS contexts). A warm reconcile of a tag App is then one HEAD.
    """
    Pusher(tls_registry).image("reuse/tls", make_image({"t.txt": "tls"}), tag="v1")
    ref = f"{tls_registry.host}/reuse/tls:v1"
    assert tls_registry.ca_cert is not None
    stream = config("image", ref, secret=None)
    trust = {"SSL_CERT_FILE": str(tls_registry.ca_cert)}
    first, pid = _sync_both(one, tmp_path, "cold", stream, **trust)
    assert first[0] == 0, first
    work = tmp_path / "warm"
    work.mkdir()
    env = one.env(VENDIR_CACHE_DIR=str(tmp_path / "cache-cold-served"), **trust)
    mark = tls_registry.mark()
    warm, again = one.served("vendir", "sync", "-f", "-", "--lock-file", "/dev/null", cwd=work,
                             stdin=stream.encode(), env=env)  # fmt: skip
    assert warm[:2] == first[:2]
    assert [method for method, _, _ in tls_registry.since(mark)] == ["HEAD"]
    assert again == pid, one.place.status()["last_retired"]
    assert one.retired() == 0


def test_https_calls_through_one_worker_share_a_connection_only_where_each_would_have_made_it(
    one: OneWorker, tls_registry: Registry, tmp_path: Path
) -> None:
    """A worker keeps its idle registry connections for the next call that would make the very same one.

    Warm reconciles of a tag App over https go out on the connection the call before left open: no TCP connect and
    no TLS handshake each (the registry counts one connection, not one per call). A call that trusts the registry
    through another CA file connects anew; a connection the registry dropped meanwhile is replaced unnoticed. Every
    answer is the in-process one, and the worker is never retired for the sockets it keeps.
    """
    Pusher(tls_registry).image("reuse/kept", make_image({"k.txt": "kept"}), tag="v1")
    assert tls_registry.ca_cert is not None
    other_ca = tmp_path / "same-ca-elsewhere.pem"
    other_ca.write_bytes(tls_registry.ca_cert.read_bytes())
    # a TLS context is kept only once the files it was made from have settled (`fs/fileid.py`): so is a connection
    newest = max(path.stat().st_ctime_ns for path in (tls_registry.ca_cert, other_ca))
    time.sleep(max(0, newest + SETTLED_NS - time.time_ns()) / 1e9)
    with CuttingProxy(tls_registry.host, 0) as relay:  # counts the TCP connections made to the registry
        stream = config("image", f"{relay.host}/reuse/kept:v1", secret=None)
        first, pid = _sync_both(one, tmp_path, "cold", stream, SSL_CERT_FILE=str(tls_registry.ca_cert))
        assert first[0] == 0, first

        def warm(name: str, ca: Path) -> tuple[Outcome, int]:
            work = tmp_path / name
            work.mkdir()
            env = one.env(VENDIR_CACHE_DIR=str(tmp_path / "cache-cold-served"), SSL_CERT_FILE=str(ca))
            outcome, served_by = one.served("vendir", "sync", "-f", "-", "--lock-file", "/dev/null", cwd=work,
                                            stdin=stream.encode(), env=env)  # fmt: skip
            assert served_by == pid
            assert outcome[:2] == first[:2]
            return outcome, len(relay.sent)

        connections = len(relay.sent)
        assert [warm(f"warm-{n}", tls_registry.ca_cert)[1] for n in range(3)] == [connections] * 3
        assert warm("other-trust", other_ca)[1] == connections + 1
        assert warm("same-trust-again", tls_registry.ca_cert)[1] == connections + 1
        relay.hang_up()
        assert warm("after-the-registry-hung-up", tls_registry.ca_cert)[1] == connections + 2
    assert one.retired() == 0


def test_a_cold_pull_of_a_large_blob_keeps_its_worker(
    one: OneWorker, registry: Registry, pusher: Pusher, repo_prefix: str, tmp_path: Path
) -> None:
    """A cold pull of a blob past 8 MiB leaves its worker serving the next call: nothing is imported mid-call.

    Such a blob is hashed on a thread of its own and its file written directly: what that takes is in the warm set,
    so the worker is not retired for a module, and the next cold pull costs no fresh fork and no cold start.
    """
    payload = os.urandom(9 << 20)  # incompressible: the layer's blob is past 8 MiB as well
    ref = pusher.image(f"{repo_prefix}/large", make_bundle({"data.bin": payload}, []))
    work = tmp_path / "work"
    work.mkdir()
    env = one.env(OCIVENDIR_CACHE_DIR=str(tmp_path / "cache"))
    pulled, pid = one.served("ocivendir", "pull", "-b", ref, "-o", "out", "-q", cwd=work, env=env)
    assert pulled[0] == 0, pulled
    assert (work / "out" / "data.bin").read_bytes() == payload
    _, again = one.served("vendir", "version", cwd=work)
    assert again == pid
    assert one.retired() == 0


def test_a_cpu_time_limit_gives_each_call_a_fresh_worker(place: ServerPlace, bin_dir: Path, tmp_path: Path) -> None:
    """RLIMIT_CPU counts a process's CPU over all its calls, so each call gets a worker whose CPU time starts at 0.

    A reused worker was killed by `ulimit -t 1` after some 400 calls that in-process each stay far under it. The
    caller and the server share the limit (or the call is refused as coming from a caller unlike the server).
    """
    soft, hard = resource.getrlimit(resource.RLIMIT_CPU)
    resource.setrlimit(resource.RLIMIT_CPU, (100_000, hard))
    try:
        one = OneWorker(place, bin_dir)
        outcomes = [one.served("vendir", "version", cwd=tmp_path) for _ in range(3)]
    finally:
        resource.setrlimit(resource.RLIMIT_CPU, (soft, hard))
    assert [outcome for outcome, _ in outcomes] == [outcomes[0][0]] * 3
    assert len({pid for _, pid in outcomes}) == 3
    assert "RLIMIT_CPU" in str(one.place.status()["last_retired"])


def test_an_index_opened_read_only_is_not_kept_once_the_cache_is_writable_again(
    one: OneWorker, registry: Registry, pusher: Pusher, repo_prefix: str, tmp_path: Path
) -> None:
    """A read-only index connection is not kept for the next call.

    A cache on a file system remounted read-only is read through one; remounted writable, the next pulls store and
    record again, as in-process (a kept one failed them all: 'attempt to write a readonly database').
    """
    from tests.support.mounts import small_tmpfs  # noqa: PLC0415 - mounts need root

    first = pusher.image(f"{repo_prefix}/img", make_image({"a.yml": "a"}))
    second = pusher.image(f"{repo_prefix}/img2", make_image({"b.yml": "b"}))
    work = tmp_path / "work"
    work.mkdir()
    with small_tmpfs(tmp_path / "mnt", size="8m") as mount:
        env = one.env(OCIVENDIR_CACHE_DIR=str(mount.path / "cache"))
        codes = [one.served("ocivendir", "pull", "-i", first, "-o", "o1", cwd=work, env=env)[0][0]]
        mount._mount("-o", "remount,ro")
        codes += [one.served("ocivendir", "pull", "-i", first, "-o", "o2", cwd=work, env=env)[0][0]]
        mount.writable()
        for out in ("o3", "o4"):
            done, _ = one.served("ocivendir", "pull", "-i", second, "-o", out, cwd=work, env=env)
            assert done[0] == 0, done
        assert codes == [0, 0]
        listed = one.served("ocivendir", "cache", "ls", "--json", cwd=work, env=env)[0]
        assert second in listed[1]


def test_help_keeps_its_worker(one: OneWorker, tmp_path: Path) -> None:
    """`--help` wraps its text with click's own textwrap, which the warm set holds: no retirement for a module."""
    first, pid = one.served("ocivendir", "sync", "--help", cwd=tmp_path)
    assert first[0] == 0
    assert first == one.in_process("ocivendir", "sync", "--help", cwd=tmp_path)
    assert one.served("vendir", "version", cwd=tmp_path)[1] == pid
    assert one.retired() == 0
