"""Owns: the resident server's parent — one lock, one listening socket, a worker forked for each connection.

The parent imports everything once (`server/preload.py`) and then only accepts, checks the peer's uid
(SO_PEERCRED), forks and reaps. It never reads request data, closes each connection as soon as its worker has it,
opens no cache index and starts no thread, so every fork is safe. At most `workers` calls run at once; further
connections wait in the listen backlog. It retires on SIGTERM, SIGINT or SIGHUP, after `idle` seconds without a
call (0: never), and when its build is replaced on disk (checked each minute); retiring closes and removes the
socket at once, so new calls go elsewhere, and lets the running workers finish.
"""

from __future__ import annotations

import logging
import os
import select
import signal
import socket
import struct
import time

from ocivendir import __version__
from ocivendir.fs.locks import hold_lock
from ocivendir.server.build import build_id
from ocivendir.server.place import ensure_dir, lock_path, socket_path

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = ["Server"]

_log = logging.getLogger("ocivendir.server")
_BACKLOG = 128
_STALE_CHECK_SECONDS = 60.0
_PEERCRED = struct.Struct("3i")


class Server:
    """One server's state: its socket, its lock, its workers."""

    def __init__(self, directory: str, build: str, *, idle: float, workers: int) -> None:
        """A server for `build` in `directory` (not started)."""
        self.directory, self.build, self.idle, self.max_workers = directory, build, idle, workers
        self.path = socket_path(directory, build)
        self.started = time.time()
        self.calls = 0
        self.children: set[int] = set()
        self.retiring = False
        self.listener: socket.socket | None = None
        self.lock_fd = -1
        self.identity: tuple[int, int] | None = None
        self.last_call = self.last_check = 0.0

    def claim(self) -> None:
        """The directory checked (created if missing) and this build's lock taken; LockBusy if a server runs."""
        ensure_dir(self.directory)
        self.lock_fd = hold_lock(lock_path(self.directory, self.build))

    def listen(self) -> None:
        """Bind under a temporary name, listen, then rename into place: a client never finds a socket not yet ready."""
        temporary = os.path.join(self.directory, f".server-{self.build}.{os.getpid()}")
        if os.path.lexists(temporary):
            os.unlink(temporary)
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM | socket.SOCK_CLOEXEC)
        old = os.umask(0o177)
        try:
            listener.bind(temporary)
        finally:
            os.umask(old)
        listener.listen(_BACKLOG)
        os.rename(temporary, self.path)  # replaces a stale socket left by a killed server (we hold the lock)
        self.listener = listener
        self.identity = _identity(self.path)

    def facts(self) -> dict[str, object]:
        """What `server status` reports."""
        return {
            "build": self.build,
            "calls": self.calls,
            "idle_timeout": self.idle,
            "pid": os.getpid(),
            "socket": self.path,
            "started": self.started,
            "uptime": round(time.time() - self.started, 3),
            "version": __version__,
            "workers": len(self.children),
            "max_workers": self.max_workers,
        }

    def serve(self) -> None:
        """The accept loop, until retired and every worker has ended."""
        wake_r, wake_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        signal.set_wakeup_fd(wake_w)
        for signo in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            signal.signal(signo, self._on_retire)
        signal.signal(signal.SIGCHLD, _ignore)
        self.last_call = self.last_check = time.monotonic()
        poller = select.poll()
        poller.register(wake_r, select.POLLIN)
        watched: socket.socket | None = None
        try:
            while not (self.retiring and not self.children):
                self._reap()
                self._housekeeping(time.monotonic())
                want = self.listener if len(self.children) < self.max_workers else None
                if want is not watched:
                    if watched is not None and watched.fileno() >= 0:
                        poller.unregister(watched)
                    if want is not None:
                        poller.register(want, select.POLLIN)
                    watched = want
                for fd, _event in poller.poll(self._timeout(time.monotonic())):
                    if fd == wake_r:
                        _drain(wake_r)
                    elif watched is not None and fd == watched.fileno():
                        self._accept()
        finally:
            signal.set_wakeup_fd(-1)
            os.close(wake_r)
            os.close(wake_w)
            self.retire()

    def _housekeeping(self, now: float) -> None:
        """Retire when the build on disk changed (checked each minute) or when idle long enough."""
        if now - self.last_check >= _STALE_CHECK_SECONDS:
            self.last_check = now
            if build_id() != self.build:
                _log.info("the build changed on disk: retiring")
                self.retire()
        if self.idle and not self.children and now - self.last_call >= self.idle and not self.retiring:
            _log.info("idle for %.0f s: retiring", self.idle)
            self.retire()

    def _timeout(self, now: float) -> int:
        wait = _STALE_CHECK_SECONDS
        if self.idle and not self.children:
            wait = min(wait, max(0.0, self.last_call + self.idle - now))
        return int(wait * 1000) + 1

    def _accept(self) -> bool:
        assert self.listener is not None  # noqa: S101 - only called while listening
        try:
            conn, _address = self.listener.accept()
        except (BlockingIOError, InterruptedError, ConnectionAbortedError):
            return False
        try:
            _pid, uid, _gid = _PEERCRED.unpack(conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, _PEERCRED.size))
            if uid != os.geteuid():
                _log.warning("refused a connection from uid %d", uid)
                return False
            self.children.add(self._fork(conn))
            self.calls += 1
            self.last_call = time.monotonic()
            return True
        finally:
            conn.close()  # the worker has its own copy; the parent holds nothing of the caller's

    def _fork(self, conn: socket.socket) -> int:
        facts = self.facts()
        pid = os.fork()
        if pid == 0:  # the worker
            try:
                self._drop_parent_state()
                from ocivendir.server.worker import serve_connection  # noqa: PLC0415 - preloaded

                serve_connection(conn, self.build, facts)
            finally:
                os._exit(1)
        return pid

    def _drop_parent_state(self) -> None:
        if self.listener is not None:
            self.listener.close()
        os.close(self.lock_fd)

    def _reap(self) -> None:
        while self.children:
            try:
                pid, _status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                self.children.clear()
                return
            if pid == 0:
                return
            self.children.discard(pid)

    def _on_retire(self, _signo: int, _frame: object) -> None:
        self.retiring = True
        self.retire()

    def retire(self) -> None:
        """Stop taking calls: close and remove the socket (if still ours), let the lock go. Workers run on."""
        self.retiring = True
        if self.listener is not None:
            self.listener.close()
            self.listener = None
            if _identity(self.path) == self.identity:
                os.unlink(self.path)
        if self.lock_fd >= 0:
            os.close(self.lock_fd)
            self.lock_fd = -1

    def wait_workers(self) -> None:
        """Block until every worker has ended."""
        while self.children:
            try:
                pid, _status = os.waitpid(-1, 0)
            except ChildProcessError:
                return
            self.children.discard(pid)


def _identity(path: str) -> tuple[int, int] | None:
    try:
        info = os.lstat(path)
    except OSError:
        return None
    return info.st_dev, info.st_ino


def _drain(fd: int) -> None:
    try:
        while os.read(fd, 512):
            pass
    except BlockingIOError:
        pass


def _ignore(_signo: int, _frame: object) -> None:
    """SIGCHLD only wakes the loop (through the wakeup descriptor); reaping happens there."""


def run_server(directory: str, *, idle: float, workers: int, preload: Callable[[], object],
               ready: Callable[[str], object] = lambda _build: None) -> int:  # fmt: skip
    """Claim, preload, listen, call `ready(build)`, serve; 0 when it ends, LockBusy propagates when one runs."""
    server = Server(directory, build_id(), idle=idle, workers=workers)
    server.claim()
    preload()
    server.listen()
    ready(server.build)  # the start lock and the starter's pipe let go (server/spawn.py)
    _log.info("serving on %s (pid %d, build %s)", server.path, os.getpid(), server.build)
    try:
        server.serve()
    finally:
        server.wait_workers()
    return 0
