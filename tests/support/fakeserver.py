"""Test support: a fake resident server — the server side of ocivendir server protocol v1, scripted per test.

Owns: listening on `D/server-<BUILD>.sock`, reading each connection's request exactly as sent (the 8-byte header with
its SCM_RIGHTS descriptors, then the body) and handing it to the test's script, which answers with frames ('R', 'P',
'X', anything) and reads the client's ('S'). Everything is recorded for the test to assert on: raw bytes, the
descriptors received, the frames seen, whether the client's end closed. No ocivendir code runs here: the native
client is tested on its own (tests/client/).
"""

from __future__ import annotations

import os
import socket
import struct
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

HEADER = 8
MAX_BODY = 4 << 20
WORKER_PID = 4242  # what the fake announces in 'P'


@dataclass
class Request:
    """One call's request as received: the raw header and body, the parsed fields, the descriptors (ours to close)."""

    header: bytes
    body: bytes
    fds: list[int]
    ancillary_flags: int
    stats: list[os.stat_result] = field(default_factory=list)  # of the descriptors, taken on arrival
    op: str = ""
    build: str = ""
    umask: str = ""
    cwd: str = ""
    argv: list[str] = field(default_factory=list)
    env: list[str] = field(default_factory=list)

    def parse(self) -> None:
        fields = self.body.split(b"\0")
        assert fields[-1] == b"", "the body ends with a NUL"
        words = [f.decode("utf-8", "surrogateescape") for f in fields[:-1]]
        self.op, self.build, self.umask, self.cwd = words[:4]
        argc = int(words[4])
        self.argv = words[5 : 5 + argc]
        envc = int(words[5 + argc])
        self.env = words[6 + argc : 6 + argc + envc]
        assert len(words) == 6 + argc + envc, "nothing after the environment"


class Call:
    """One connection: the request, and what the script and the client said afterwards."""

    def __init__(self, conn: socket.socket) -> None:
        self.conn = conn
        self.request: Request | None = None
        self.frames: list[tuple[bytes, bytes]] = []  # frames received from the client
        self.eof = False  # the client's end closed
        self.done = threading.Event()
        self.error: BaseException | None = None

    def receive(self) -> Request:
        header, fds, flags, _ = socket.recv_fds(self.conn, HEADER, 8)
        while len(header) < HEADER:  # a short first read: the rest carries no descriptors
            more = self.conn.recv(HEADER - len(header))
            if not more:
                break
            header += more
        length = struct.unpack(">I", header[4:8])[0] if len(header) == HEADER else 0
        body = self.exactly(min(length, MAX_BODY))
        self.request = Request(header, body, list(fds), flags, [os.fstat(fd) for fd in fds])
        if header[:4] == b"OVD1" and len(body) == length:
            self.request.parse()
        return self.request

    def exactly(self, size: int) -> bytes:
        data = b""
        while len(data) < size:
            more = self.conn.recv(size - len(data))
            if not more:
                break
            data += more
        return data

    def send(self, kind: bytes, payload: bytes) -> None:
        self.conn.sendall(kind + struct.pack(">I", len(payload)) + payload)

    def refuse(self, reason: str) -> None:
        self.close_fds()  # as a real server: the caller's descriptors are not kept for a call that does not run
        self.send(b"R", reason.encode())

    def start(self, pid: int = WORKER_PID) -> None:
        self.send(b"P", struct.pack(">I", pid))

    def finish(self, status: int, stdout: bytes = b"", stderr: bytes = b"") -> None:
        """Writes through the caller's own stdout/stderr, closes the stdio copies, then sends 'X' (as a worker does)."""
        request = self.request
        assert request is not None
        if stdout:
            os.write(request.fds[1], stdout)
        if stderr:
            os.write(request.fds[2], stderr)
        self.close_fds()
        self.send(b"X", struct.pack(">I", status))

    def close_fds(self) -> None:
        if self.request is not None:
            for fd in self.request.fds:
                try:
                    os.close(fd)
                except OSError:
                    pass
            self.request.fds = []

    def read_frame(self) -> tuple[bytes, bytes] | None:
        """The client's next frame (recorded), or None once its end closed."""
        head = self.exactly(5)
        if len(head) < 5:
            self.eof = True
            return None
        payload = self.exactly(struct.unpack(">I", head[1:])[0])
        self.frames.append((head[:1], payload))
        return head[:1], payload

    def hang_up(self) -> None:
        self.close_fds()
        self.conn.close()


Script = Callable[[Call], None]


class FakeServer:
    """Accepts connections on the build's socket in D and runs `script` on each, in its own thread."""

    def __init__(self, directory: Path, build: str, script: Script) -> None:
        self.path = directory / f"server-{build}.sock"
        self.script = script
        self.calls: list[Call] = []
        self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.listener.bind(str(self.path))
        self.listener.listen(16)
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            conn.settimeout(30)  # a test that goes wrong fails instead of hanging
            call = Call(conn)
            self.calls.append(call)
            threading.Thread(target=self._run, args=(call,), daemon=True).start()

    def _run(self, call: Call) -> None:
        try:
            call.receive()
            self.script(call)
        except BaseException as error:  # noqa: BLE001 - reported to the test through the call
            call.error = error
        finally:
            call.close_fds()  # the caller's stdio: held no longer than the script ran
            call.done.set()

    def only_call(self, timeout: float = 30) -> Call:
        """The one connection the test expects, after its script finished."""
        assert len(self.calls) == 1, f"{len(self.calls)} connections"
        call = self.calls[0]
        assert call.done.wait(timeout), "the script did not finish"
        if call.error is not None:
            raise call.error
        return call

    def close(self) -> None:
        try:
            self.listener.shutdown(socket.SHUT_RDWR)  # wakes the blocked accept() (Linux)
        except OSError:
            pass
        self.listener.close()
        self.thread.join(10)
        for call in self.calls:
            call.done.wait(30)
            call.close_fds()
            call.conn.close()


@contextmanager
def fake_server(directory: Path, build: str, script: Script) -> Iterator[FakeServer]:
    server = FakeServer(directory, build, script)
    try:
        yield server
    finally:
        server.close()
