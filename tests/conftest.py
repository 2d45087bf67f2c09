"""Suite-wide fixtures: an isolated environment for every test, no real retry sleeps, and the real registries."""

from __future__ import annotations

import contextlib
import io
import os
import signal
import sys
import tempfile
from collections.abc import Generator, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from ocivendir.cache import verified
from ocivendir.commands import main
from ocivendir.fs import replay
from ocivendir.registry import authmemo
from tests.support import registry as registry_support
from tests.support.builders import Pusher
from tests.support.server import ServerPlace, program

_SCRUB = ("OCIVENDIR_", "VENDIR_", "IMGPKG_")
# `OCIVENDIR_TEST_SERVER=on ./scripts/test.sh` runs every CLI call of the suite through a resident server; `one`
# through ONE long-lived worker of it (never retired for its call count), so every call follows another in one process
THROUGH_SERVER = os.environ.get("OCIVENDIR_TEST_SERVER") in ("on", "one")
ONE_WORKER = os.environ.get("OCIVENDIR_TEST_SERVER") == "one"


def _dispositions_as_a_terminal_gives_them() -> None:
    """The programs the suite runs get the dispositions a terminal gives, however the suite was started.

    Started in the background (`nohup`, `cmd &` in a script), SIGHUP or SIGINT is ignored; a client started with a
    signal ignored does not relay it (in-process it would be ignored), and the tests that send one expect it relayed.
    A signal ignored here is caught by a handler that does nothing instead: still ignored by the suite itself (nohup
    keeps its meaning), while a program it starts gets the default (exec resets a caught signal, not an ignored one).
    """
    for signo in (signal.SIGHUP, signal.SIGINT, signal.SIGTERM):
        if signal.getsignal(signo) == signal.SIG_IGN:
            signal.signal(signo, _still_ignored)


def _still_ignored(_signo: int, _frame: object) -> None:
    """A signal the suite was started with ignored: still nothing happens."""


_dispositions_as_a_terminal_gives_them()


@pytest.fixture(scope="session")
def server_place() -> Iterator[ServerPlace]:
    """The session's server socket directory, where the servers that its calls start live, stopped at its end.

    Calls as `vendir` start one (OCIVENDIR_SERVER's default), and every call under OCIVENDIR_TEST_SERVER=on.
    """
    place = ServerPlace()
    try:
        yield place
    finally:
        place.cleanup()


@pytest.fixture
def place() -> Iterator[ServerPlace]:
    """A socket directory of the test's own, with its servers stopped at the end (the session's is server_place)."""
    made = ServerPlace()
    try:
        yield made
    finally:
        made.cleanup()


@pytest.fixture(autouse=True)
def isolated_env(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch, server_place: ServerPlace
) -> Path:
    home = tmp_path_factory.mktemp("home")
    for name in list(os.environ):
        if name.startswith(_SCRUB) or name.lower() in {"http_proxy", "https_proxy", "no_proxy", "all_proxy"}:
            monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("OCIVENDIR_SERVER_DIR", str(server_place.dir))
    monkeypatch.setenv("OCIVENDIR_SERVER_IDLE", "2m")  # a server a test started and left behind does not linger
    if THROUGH_SERVER:
        monkeypatch.setenv("OCIVENDIR_SERVER", "on")
        monkeypatch.setenv("OCIVENDIR_SERVER_LOG", str(server_place.log))  # shown when a test fails (makereport)
    if ONE_WORKER:  # the session's server is started by a call with these
        monkeypatch.setenv("OCIVENDIR_SERVER_WORKERS", "1")
        monkeypatch.setenv("OCIVENDIR_SERVER_MAX_CALLS", "1000000")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_CACHE_HOME", str(home / ".cache"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / ".config"))
    monkeypatch.delenv("XDG_RUNTIME_DIR", raising=False)
    monkeypatch.delenv("DOCKER_CONFIG", raising=False)
    monkeypatch.delenv("NO_COLOR", raising=False)
    return home


@pytest.fixture(autouse=True)
def fresh_process_memos() -> None:
    """Each test starts as a fresh process does: no challenge, token or layer kept from an earlier test's calls."""
    authmemo.forget_all()
    replay.forget_all()
    verified.forget_all()
    if (contexts := sys.modules.get("ocivendir.registry.tlscontexts")) is not None:  # imported with TLS only
        contexts.forget_all()


@pytest.fixture(autouse=True)
def no_retry_sleep(monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest) -> list[float]:
    slept: list[float] = []
    monkeypatch.setattr("ocivendir.registry.retry._sleep", slept.append)
    reads_sleeps = "no_retry_sleep" in getattr(request.function, "__code__", _NO_CODE).co_varnames
    _CURRENT[:] = [monkeypatch, reads_sleeps or request.node.get_closest_marker("in_process") is not None]
    return slept


_SESSION_BIN = Path(tempfile.mkdtemp(prefix="ocivendir-test-bin-"))  # this checkout's console script, by mode name
_CURRENT: list[object] = []  # the running test's monkeypatch, and whether its calls must stay in this process
_NO_CODE = (lambda: None).__code__
SERVED_CALLS = {"server": 0, "in-process": 0}


def _servable() -> bool:
    """Whether a call can go through a server: the test patched nothing in this process but the retry sleep."""
    if len(_CURRENT) != 2 or _CURRENT[1]:  # reads the sleeps it counts here, or marked in_process
        return False
    patch = _CURRENT[0]
    assert isinstance(patch, pytest.MonkeyPatch)
    patched = [(getattr(obj, "__name__", ""), name) for obj, name, _ in patch._setattr]
    return patched == [("ocivendir.registry.retry", "_sleep")]


@dataclass
class CliResult:
    exit_code: int
    stdout: str
    stderr: str


def run_cli(*args: str, prog: str = "ocivendir", stdin: str | bytes | None = None) -> CliResult:
    """Run ocivendir's main() in-process with its own stdout/stderr, as a user would see them.

    Under OCIVENDIR_TEST_SERVER=on the same call goes through the Python client to the session's server instead,
    unless the test patched something in this process (a monkeypatch a server's worker cannot see).
    """
    if THROUGH_SERVER:
        served = _servable()
        SERVED_CALLS["server" if served else "in-process"] += 1
        if served:
            return _through_server(args, prog, stdin)
    out, err = io.StringIO(), io.StringIO()
    code = 0
    old_stdin = sys.stdin
    if isinstance(stdin, bytes):
        sys.stdin = io.TextIOWrapper(io.BytesIO(stdin), encoding="utf-8")
    elif stdin is not None:
        sys.stdin = io.StringIO(stdin)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                main(list(args), prog)
            except SystemExit as exc:
                code = int(exc.code or 0)
    finally:
        sys.stdin = old_stdin
    return CliResult(code, out.getvalue(), err.getvalue())


def _through_server(args: tuple[str, ...], prog: str, stdin: str | bytes | None) -> CliResult:
    import subprocess  # noqa: PLC0415

    binary = program(_SESSION_BIN, prog)
    data = stdin.encode() if isinstance(stdin, str) else stdin
    done = subprocess.run([str(binary), *args], input=data if data is not None else b"", capture_output=True,
                          check=False, timeout=300)  # fmt: skip
    return CliResult(done.returncode, done.stdout.decode(), done.stderr.decode())


@pytest.fixture
def cli() -> type[object]:
    return run_cli  # type: ignore[return-value]


def _require_registry() -> None:
    if registry_support.binary() is None:
        if os.environ.get("CI"):
            pytest.fail("docker-registry is not installed and CI is set: integration tests must run")
        pytest.skip("docker-registry not installed (install it with: apt-get install docker-registry)")


def _start(mode: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[registry_support.Registry]:
    _require_registry()
    running = registry_support.Registry(mode=mode, workdir=tmp_path_factory.mktemp(f"registry-{mode}")).start()
    try:
        yield running
    finally:
        running.stop()


@pytest.fixture(scope="session")
def registry(tmp_path_factory: pytest.TempPathFactory) -> Iterator[registry_support.Registry]:
    """A plain-HTTP, anonymous registry shared by the session (tests use fresh repository names)."""
    yield from _start("plain", tmp_path_factory)


@pytest.fixture(scope="session")
def auth_registry(tmp_path_factory: pytest.TempPathFactory) -> Iterator[registry_support.Registry]:
    """A registry that needs Basic credentials (htpasswd)."""
    yield from _start("htpasswd", tmp_path_factory)


@pytest.fixture(scope="session")
def tls_registry(tmp_path_factory: pytest.TempPathFactory) -> Iterator[registry_support.Registry]:
    """An HTTPS registry with a certificate from a throwaway CA."""
    yield from _start("tls", tmp_path_factory)


@pytest.fixture
def own_registry(tmp_path_factory: pytest.TempPathFactory) -> Iterator[registry_support.Registry]:
    """A registry for one test only (for tests that stop it or alter its storage)."""
    _require_registry()
    running = registry_support.Registry(mode="plain", workdir=tmp_path_factory.mktemp("own-registry")).start()
    try:
        yield running
    finally:
        running.stop()


@pytest.fixture
def pusher(registry: registry_support.Registry) -> Pusher:
    return Pusher(registry)


_counter = iter(range(1_000_000))


@pytest.fixture
def repo_prefix(request: pytest.FixtureRequest) -> str:
    """A fresh repository prefix per test."""
    name = "".join(c if c.isalnum() else "-" for c in request.node.name.lower())[:40].strip("-")
    return f"t{next(_counter)}-{name}"


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    """A failed test shows the log of its servers; its teardown report carries its CLI calls.

    The log is that of the test's own place, or under OCIVENDIR_TEST_SERVER that of the session's server (its last
    lines: the test's own calls come last). The calls are counted under OCIVENDIR_TEST_SERVER=on only.

    pytest-xdist's controller sums them from its workers' reports (their counters are not its own).
    """
    report: pytest.TestReport = yield
    place = getattr(item, "funcargs", {}).get("place")
    if not isinstance(place, ServerPlace) and THROUGH_SERVER:
        place = getattr(item, "funcargs", {}).get("server_place")  # the session's server: its log's last lines
    if report.failed and isinstance(place, ServerPlace) and (log := place.log_tail()):
        report.sections.append(("server log", log))  # a server that hung or refused says so here
    if THROUGH_SERVER and call.when == "teardown":
        report.user_properties.append(("cli_calls", (SERVED_CALLS["server"], SERVED_CALLS["in-process"])))
        SERVED_CALLS.update({"server": 0, "in-process": 0})
    return report


_CALLS_SEEN = {"server": 0, "in-process": 0}  # summed from the reports, in whichever process writes the summary


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    for name, value in report.user_properties if report.when == "teardown" else ():
        if name == "cli_calls":
            _CALLS_SEEN["server"] += value[0]
            _CALLS_SEEN["in-process"] += value[1]


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """Under OCIVENDIR_TEST_SERVER=on: how many CLI calls the server served, how many stayed in-process."""
    if THROUGH_SERVER:
        terminalreporter.write_line(f"CLI calls through the server: {_CALLS_SEEN['server']}, in-process (patched "
                                    f"internals): {_CALLS_SEEN['in-process']}")  # fmt: skip


def pytest_sessionfinish() -> None:
    """The session's program links go with it."""
    import shutil  # noqa: PLC0415

    shutil.rmtree(_SESSION_BIN, ignore_errors=True)
