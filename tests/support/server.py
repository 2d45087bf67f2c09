"""A real resident server for tests: its own short socket directory, started and stopped around the tests that use it.

`program(prog)` is this venv's console script under the name a test wants (`vendir`, `imgpkg`, `ocivendir`): the
mode comes from argv[0], as installed.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

__all__ = ["ServerPlace", "console_script", "left", "program", "server_pids", "stop_servers", "worker_in", "workers"]

_BIN = Path(sys.executable).parent


def console_script() -> Path:
    """The venv's `ocivendir` console script (the Python client is its first step)."""
    return _BIN / "ocivendir"


def program(directory: Path, prog: str) -> Path:
    """The console script linked as `prog`'s name in `directory` (argv[0]'s name picks the mode).

    Only the name: a test that names the program by a path (`/usr/local/bin/vendir`) must not link it there.
    """
    link = directory / Path(prog).name
    if not link.exists():
        directory.mkdir(parents=True, exist_ok=True)
        link.symlink_to(console_script())
    return link


class ServerPlace:
    """A socket directory short enough for sun_path, and the environment that points clients and servers at it."""

    def __init__(self) -> None:
        """Make a fresh 0700 directory under /tmp (pytest's tmp paths can exceed a socket address's 107 bytes)."""
        self.dir = Path(tempfile.mkdtemp(prefix="ovs-", dir="/tmp"))
        self.log = Path(f"{self.dir}.log")  # the servers' and clients' log, shown when a test fails (beside: a test
        # may make the directory unusable, and then find it empty)

    def env(self, **extra: str) -> dict[str, str]:
        """os.environ plus this place, its log, the switch on, and `extra`."""
        return {**os.environ, "OCIVENDIR_SERVER_DIR": str(self.dir), "OCIVENDIR_SERVER": "on",
                "OCIVENDIR_SERVER_LOG": str(self.log), **extra}  # fmt: skip

    def log_tail(self, lines: int = 300) -> str:
        """The last `lines` lines of the log ("" without one)."""
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""

    def server(self, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
        """`ocivendir server ARGS` against this place."""
        return subprocess.run([str(console_script()), "server", *args], env=self.env(**env), capture_output=True,
                              text=True, timeout=60, check=False)  # fmt: skip

    def start(self, **env: str) -> int:
        """Start a server (daemon) and return its pid."""
        done = self.server("start", "--json", **env)
        assert done.returncode == 0, done.stderr
        pid = self.status()["pid"]
        assert isinstance(pid, int)
        return pid

    def status(self) -> dict[str, object]:
        """`server status --json`'s result ({} when none runs)."""
        import json  # noqa: PLC0415

        done = self.server("status", "--json")
        return dict(json.loads(done.stdout)["result"]) if done.stdout else {}

    def wait_for(self, predicate: object, timeout: float = 15.0) -> None:
        """Poll until `predicate()` is true."""
        assert callable(predicate)
        deadline = time.monotonic() + timeout
        while not predicate():
            assert time.monotonic() < deadline, "timed out waiting"
            time.sleep(0.05)

    def cleanup(self) -> None:
        """Stop every server of this place, whatever its build (a dist test's frozen one too); remove the directory."""
        stop_servers(self.dir)
        shutil.rmtree(self.dir, ignore_errors=True)
        self.log.unlink(missing_ok=True)


def workers(server_pid: int) -> list[int]:
    """The server's workers (its children), busy or idle."""
    try:
        return [int(pid) for pid in Path(f"/proc/{server_pid}/task/{server_pid}/children").read_text().split()]
    except OSError:
        return []


def _cwd(pid: int) -> Path | None:
    try:
        return Path(f"/proc/{pid}/cwd").readlink()
    except OSError:
        return None


def worker_in(place: ServerPlace, server_pid: int, cwd: Path) -> int:
    """The worker serving a call made in `cwd` (a worker works in its caller's directory), once one does."""
    found: list[int] = []

    def look() -> bool:
        found.extend(pid for pid in workers(server_pid) if _cwd(pid) == cwd.resolve())
        return bool(found)

    place.wait_for(look)
    return found[0]


def left(worker: int, cwd: Path) -> bool:
    """Whether `worker` has ended, or is no longer in the call made in `cwd` (back in its pool)."""
    return ended(worker) or _cwd(worker) != cwd.resolve()


def ended(pid: int) -> bool:
    """Whether process `pid` has ended: gone, or a zombie (read once: it may go between two looks at /proc)."""
    return not _alive(pid)


def server_parents(directory: Path) -> list[int]:
    """The servers serving `directory` themselves, without their workers (whose parent is one of them)."""
    pids = server_pids(directory)
    parents = []
    for pid in pids:
        try:
            ppid = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        if ppid not in pids:
            parents.append(pid)
    return parents


def server_pids(directory: Path) -> list[int]:
    """The servers serving `directory` and their live workers (forked: the same command line and environment)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().split(b"\0")
            environ = (entry / "environ").read_bytes().split(b"\0")
        except OSError:
            continue
        if (
            b"--foreground" in cmdline
            and b"server" in cmdline
            and f"OCIVENDIR_SERVER_DIR={directory}".encode() in environ
        ):
            found.append(int(entry.name))
    return sorted(found)


def stop_servers(directory: Path) -> None:
    """End every server of `directory` (SIGTERM, then SIGKILL after 5 s)."""
    pids = server_pids(directory)
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):  # a worker (it shares the server's command line) just ended
            os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + 5
    while pids and time.monotonic() < deadline:
        pids = [pid for pid in pids if _alive(pid)]
        time.sleep(0.02)
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def _alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False
