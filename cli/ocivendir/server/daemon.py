"""Owns: the resident server's parent — one lock, one listening socket, a pool of reused workers.

The parent imports everything once (`server/preload.py`), listens, and then forks, reaps and answers its workers
(`server/pool.py`). The workers accept on the listening socket themselves, one woken per connection
(EPOLLEXCLUSIVE), so a call costs the parent nothing: no wake-up, no hand-over. The parent never reads a call's
request, opens no cache index and starts no thread, so every fork is safe. It keeps up to `workers` workers, one of
them idle ahead of demand (a worker that takes a connection and sees no other idle says `S`); each serves calls one
after another (`server/worker.py`) until it retires. When every worker is busy at the limit, the parent watches the
socket too and answers what comes itself (`server/desk.py`): `status` and `stop` get its facts, a call gets "busy"
and runs in the client. A worker asked `status` or `stop` asks the parent (`Q`), which answers with its facts.
Once it listens it removes what servers of other builds left in its directory (`server/sweep.py`). It retires on
SIGTERM, SIGINT or SIGHUP, after `idle` seconds without a call run (0: never; a refused call or a status query is
none), and when its build is replaced on disk (checked each minute); retiring closes and removes the socket at once,
so new calls go elsewhere, closes every worker's channel, so the idle ones end (after answering what they had already
been woken for), and lets the busy ones finish.

A fork copies every descriptor the parent holds and its signal handlers, so a new worker closes what is the parent's
(its lock, its wake-up pipe, the other workers' channels, the connections the parent is answering) and drops the
parent's handlers before anything else (signals blocked across the fork): only the process that listens can retire
the server and remove its socket. The parent forks only while it holds no caller's connection but those, so a
caller's connection lives in exactly one process, and its caller sees the end as soon as that one closes it.
"""

from __future__ import annotations

import json
import logging
import os
import select
import signal
import socket
import time

from ocivendir import __version__
from ocivendir.fs.locks import hold_lock
from ocivendir.server.build import build_id
from ocivendir.server.desk import Desk
from ocivendir.server.place import ensure_dir, lock_path, socket_path
from ocivendir.server.pool import Pool, Worker
from ocivendir.server.sweep import sweep
from ocivendir.server.worker import REQUEST_SECONDS, Entry, take, work
from ocivendir.server.world import idle_signals

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = ["Server"]

_log = logging.getLogger("ocivendir.server")
_BACKLOG = 128
_STALE_CHECK_SECONDS = 60.0
_BUSY_RECHECK_SECONDS = 1.0  # past the idle deadline with a worker busy: how often to look whether it has finished
_IN = select.POLLIN | select.POLLHUP | select.POLLERR
_RETIRE_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
_TRAPPED = frozenset({*_RETIRE_SIGNALS, signal.SIGCHLD})


class Server:
    """One server's state: its socket, its lock, its workers."""

    def __init__(self, directory: str, build: str, *, idle: float, workers: int, max_calls: int, entry: Entry) -> None:
        """A server for `build` in `directory` (not started)."""
        self.directory, self.build, self.idle, self.max_calls, self.entry = directory, build, idle, max_calls, entry
        self.path = socket_path(directory, build)
        self.started = time.time()
        self.calls = 0
        self.pool = Pool(workers)
        self.desk = Desk(REQUEST_SECONDS)
        self.children: dict[int, int] = {}  # pid: slot
        self.retiring = False
        self.listener: socket.socket | None = None
        self.lock_fd = -1
        self.identity: tuple[int, int] | None = None
        self.last_call = self.last_check = 0.0
        self.wake: tuple[int, int] = (-1, -1)
        self.owner = -1  # the process that listens: the only one that may close and remove the socket
        self.child_ended = True  # a SIGCHLD came since the last reaping (at first: reap once)

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
        listener.setblocking(False)  # noqa: FBT003 - the socket API; every worker and the parent may race to accept
        os.rename(temporary, self.path)  # replaces a stale socket left by a killed server (we hold the lock)
        self.listener, self.owner = listener, os.getpid()
        self.identity = _identity(self.path)

    def facts(self, asking: int = -1) -> dict[str, object]:
        """What `server status` reports (asked by the worker on channel `asking`, which does not count as busy)."""
        return {**self._constant_facts(), **self._varying_facts(asking)}

    def _constant_facts(self) -> dict[str, object]:
        return {"build": self.build, "idle_timeout": self.idle, "pid": os.getpid(), "socket": self.path,
                "started": self.started, "version": __version__, "max_workers": self.pool.limit,
                "max_calls": self.max_calls}  # fmt: skip

    def _varying_facts(self, asking: int = -1) -> dict[str, object]:
        busy, idle = self.pool.counts(asking)
        own = 1 if asking >= 0 else 0  # the asker counted its question as it took it: a query does not count itself
        return {"calls": self.calls + self.pool.calls() - own, "uptime": round(time.time() - self.started, 3),
                "workers": busy + idle, "busy": busy, "idle": idle, "retired": self.pool.retired,
                "last_retired": self.pool.last_retired}  # fmt: skip

    def serve(self) -> None:
        """The accept loop, until retired and every worker has ended."""
        wake_r, wake_w = self._trap_signals()
        self.last_call = self.last_check = time.monotonic()
        try:
            while True:
                if self.child_ended:  # only after a SIGCHLD: no wait4 on every wake-up
                    self.child_ended = False
                    self._reap()
                if self.retiring:
                    self.retire()  # again after a signal, and so for a worker forked while it came: each one ends
                if self.retiring and not self.children:
                    break  # retired, and the last worker has ended: now, not at the next wake-up (up to a minute)
                now = time.monotonic()
                self._housekeeping(now)
                if not self.retiring and self.pool.wants_spare():
                    self._spawn()
                wait = min(self._timeout(now), self.pool.expire(now), self.desk.expire(now))
                self._poll(wake_r, wait)
        finally:
            signal.set_wakeup_fd(-1)
            os.close(wake_r)
            os.close(wake_w)
            self.retire()

    def _trap_signals(self) -> tuple[int, int]:
        """SIGTERM, SIGINT and SIGHUP retire the server, SIGCHLD wakes the loop; the wake-up pipe (read end first)."""
        wake_r, wake_w = self.wake = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        signal.set_wakeup_fd(wake_w)
        for signo in _RETIRE_SIGNALS:
            signal.signal(signo, self._on_retire)
        signal.signal(signal.SIGCHLD, self._on_child)
        return wake_r, wake_w

    def _poll(self, wake_r: int, wait: float) -> None:
        poller = select.poll()
        poller.register(wake_r, select.POLLIN)
        if self.listener is not None and self.pool.full():
            poller.register(self.listener, select.POLLIN)  # not exclusive: an idle worker is woken as well
        for fd in (*self.pool.workers, *self.desk.waiting):
            poller.register(fd, _IN)
        events = poller.poll(int(wait * 1000) + 1)
        # workers first: what one said (a retirement) is in the facts a connection answered here reports
        events.sort(key=lambda event: event[0] not in self.pool.workers)
        for fd, _event in events:
            now = time.monotonic()
            if fd == wake_r:
                _drain(wake_r)
            elif self.listener is not None and fd == self.listener.fileno():
                self._accept(now)
            elif fd in self.pool.workers:
                self._heard(fd)
            elif fd in self.desk.waiting and self.desk.readable(fd, self.facts, self._busy()) == "stop":
                self.retire()

    def _heard(self, fd: int) -> None:
        """What a worker said; a question (`Q`) is answered on its channel once every other worker was heard.

        A spare the asker wanted (`S`, said just before) is forked before the answer, while the asker waits for it
        busy: the facts then count it, however the parent read the two (one wake-up or two).
        """
        worker = self.pool.workers.get(fd)
        op = self.pool.heard(fd)
        self._yield()
        if worker is None or op is None:
            return
        _log.debug("worker %d asks %s", worker.pid, op.decode(errors="replace"))
        for other in list(self.pool.workers):  # a retirement said before this question is in its answer
            if other != fd:
                self._heard(other)
        if op != b"stop" and not self.retiring and self.listener is not None and self.pool.wants_spare():
            self._spawn()
        try:
            worker.channel.send(json.dumps(self.facts(asking=fd)).encode())
        except OSError:
            self.pool.drop(worker)
        if op == b"stop":
            self.retire()

    def _busy(self) -> str:
        return f"busy: all {self.pool.limit} workers are serving calls"

    def _housekeeping(self, now: float) -> None:
        """Retire when the build on disk changed (checked each minute) or when idle long enough."""
        if now - self.last_check >= _STALE_CHECK_SECONDS:
            self.last_check = now
            if build_id() != self.build:
                _log.info("the build changed on disk: retiring")
                self.retire()
        quiet = self.pool.counts()[0] == 0 and not self.desk.waiting
        last_call = max(self.last_call, self.pool.last_activity())
        if self.idle and quiet and now - last_call >= self.idle and not self.retiring:
            _log.info("idle for %.0f s: retiring", self.idle)
            self.retire()

    def _timeout(self, now: float) -> float:
        """Seconds until the loop must look again: the idle deadline, or the stale-build check.

        A worker that finishes a call says nothing to the parent: while one is busy, the parent looks again at the idle
        deadline, and past it every `_BUSY_RECHECK_SECONDS` at most, until the call has ended and the deadline counts
        from its end.
        """
        wait = _STALE_CHECK_SECONDS
        if self.idle:
            left = max(self.last_call, self.pool.last_activity()) + self.idle - now
            if self.pool.counts()[0] == 0:
                wait = min(wait, max(0.0, left))
            else:
                wait = min(wait, max(left, min(self.idle, _BUSY_RECHECK_SECONDS)))
        return wait

    def _accept(self, now: float) -> None:
        """Every worker busy at the limit: take one connection and answer it here (`status`, `stop`, or "busy").

        A worker idle again by now takes it instead (it was woken too).
        """
        assert self.listener is not None  # noqa: S101 - only called while listening
        if not self.pool.full() or (conn := take(self.listener)) is None:
            return
        self.calls += 1
        self.last_call = now
        _log.debug("every worker busy: the parent answers a connection")
        self.desk.take(conn, now)

    def _spawn(self) -> Worker | None:
        """Fork a worker from the preloaded image; it serves what its channel hands it.

        The parent's signals stay blocked across the fork until the worker has dropped the parent's handlers: a
        signal meant for the new worker is then handled as a worker's (SIGTERM ends it), never as the parent's.
        """
        listener = self.listener
        slot = self.pool.slots.claim(time.monotonic()) if listener is not None else None
        if listener is None or slot is None:
            return None  # retired, or every slot is still a worker's that is not reaped yet: after the next SIGCHLD
        mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET | socket.SOCK_CLOEXEC)
        blocked = signal.pthread_sigmask(signal.SIG_BLOCK, _TRAPPED)
        try:
            pid = os.fork()
            if pid == 0:  # the worker
                try:
                    idle_signals()  # the parent's wake-up descriptor and handlers gone, first
                    signal.pthread_sigmask(signal.SIG_SETMASK, blocked)
                    mine.close()
                    self._drop_parent_state()
                    work(theirs, listener, (self.pool.slots, slot), self.build, self.entry, self.max_calls)
                finally:
                    os._exit(1)
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, blocked)
        theirs.close()
        _log.debug("forked worker %d (slot %d)", pid, slot)
        self.children[pid] = slot
        worker = Worker(pid, mine, slot)
        self.pool.add(worker)
        return worker

    def _drop_parent_state(self) -> None:
        """In a new worker: nothing of the parent's stays open but the socket (lock, wake-up pipe, channels, desk)."""
        self.listener = None  # the worker's to accept on, never to close or remove as the parent would
        if self.lock_fd >= 0:
            os.close(self.lock_fd)
            self.lock_fd = -1
        for fd in self.wake:
            if fd >= 0:
                os.close(fd)
        self.wake = (-1, -1)
        for other in self.pool.workers.values():
            other.channel.close()
        self.pool.workers.clear()
        for waiting in self.desk.waiting.values():
            waiting.conn.close()
        self.desk.waiting.clear()

    def _reap(self) -> None:
        while self.children:
            try:
                pid, wait_status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                self.children.clear()
                return
            if pid == 0:
                return
            _log.debug("worker %d ended (wait status %d)", pid, wait_status)
            slot = self.children.pop(pid, None)
            for worker in list(self.pool.workers.values()):
                if worker.pid == pid:
                    self.pool.ended(worker)
            if slot is not None:
                self.pool.release(slot)
        self._yield()

    def _yield(self) -> None:
        """Retire when a worker refused a caller favoured over the server (`server/schedule.py`): its next call starts
        a server with its scheduling, which serves it and takes on the others'.
        """  # noqa: D205
        if self.pool.yielded and not self.retiring:
            _log.info("a caller favoured over this server was refused: retiring, for a server started by such a caller")
            self.retire()

    def _on_child(self, _signo: int, _frame: object) -> None:
        """SIGCHLD: only the mark (the wake-up descriptor wakes the loop, which reaps at its top)."""
        self.child_ended = True

    def _on_retire(self, _signo: int, _frame: object) -> None:
        """Only the mark: the loop, woken by the signal, retires at its top.

        A handler runs between any two bytecodes: one that retired here could close the pool while `_spawn` is about
        to add a worker, which would then never be told to end.
        """
        self.retiring = True

    def retire(self) -> None:
        """Stop taking calls: close and remove the socket (if still ours), let the lock go, end idle workers.

        Only in the process that listens: anywhere else (a forked worker) it does nothing.
        """
        if os.getpid() != self.owner:
            return
        self.retiring = True
        if self.listener is not None:
            self.listener.close()
            self.listener = None
            if _identity(self.path) == self.identity:
                os.unlink(self.path)
        if self.lock_fd >= 0:
            os.close(self.lock_fd)
            self.lock_fd = -1
        self.pool.drop_all()
        self.desk.close_all()

    def wait_workers(self) -> None:
        """Block until every worker has ended."""
        while self.children:
            try:
                pid, _status = os.waitpid(-1, 0)
            except ChildProcessError:
                return
            slot = self.children.pop(pid, None)
            if slot is not None:
                self.pool.release(slot)


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


def run_server(directory: str, *, idle: float, workers: int, max_calls: int, preload: Callable[[], object],
               entry: Entry, ready: Callable[[str], object] = lambda _build: None) -> int:  # fmt: skip
    """Claim, preload, listen, call `ready(build)`, serve; 0 when it ends, LockBusy propagates when one runs.

    `entry` is what a worker runs for each call (the CLI's `main`, reading `sys.argv`): handed in, so the server
    never imports the command layer that starts it.
    """
    server = Server(directory, build_id(), idle=idle, workers=workers, max_calls=max_calls, entry=entry)
    server.claim()
    preload()
    server.listen()
    ready(server.build)  # the start lock and the starter's pipe let go (server/spawn.py)
    _log.info("serving on %s (pid %d, build %s)", server.path, os.getpid(), server.build)
    if swept := sweep(directory, server.build):
        _log.info("removed what servers of other builds left: %s", ", ".join(swept))
    try:
        server.serve()
    finally:
        server.wait_workers()
    return 0
