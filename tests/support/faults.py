"""Test support: a fault proxy in front of the real registry, and a silent server (a mirror that never answers).

Chosen answers (403, 5xx, 429 + Retry-After), truncated bodies, tampered bodies (other bytes behind the upstream's
own headers: a man in the middle, or a lying mirror) and delays for requests matching a rule; everything else is
forwarded as it is. The proxy also counts the most requests it had in flight at once.
"""

from __future__ import annotations

import http.client
import re
import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


@dataclass
class Rule:
    """Answer `status` (or truncate the body) for requests whose method and path match, `times` times (0 = always)."""

    method: str
    path: str
    status: int = 0
    headers: dict[str, str] = field(default_factory=dict)
    truncate: bool = False
    body: bytes | None = (
        None  # forward, but answer with these bytes instead of the upstream's (with status: no forward)
    )
    tamper: bool = False  # forward, but flip the first byte (same length)
    delay: float = 0.0
    times: int = 0
    hits: int = 0
    ranged: bool | None = None  # match only requests with (True) or without (False) a Range header
    strip_range: bool = False  # forward without the Range header: a registry that ignores Range (200, whole body)
    stall: float = 0.0  # with truncate: wait this long after the first half before cutting the connection

    def matches(self, method: str, path: str, ranged: bool = False) -> bool:
        if self.times and self.hits >= self.times:
            return False
        if self.ranged is not None and self.ranged != ranged:
            return False
        return self.method in {method, "*"} and re.search(self.path, path) is not None


class FaultProxy:
    """A proxy on 127.0.0.1 (random port) that applies rules, then forwards to the upstream registry."""

    def __init__(self, upstream: str) -> None:
        self.upstream = upstream
        self.rules: list[Rule] = []
        self.log: list[tuple[str, str, int]] = []
        self.ranges: list[tuple[str, str, str | None]] = []  # (method, path, Range header) of every request
        self.body_bytes = 0  # body bytes sent to the client, all requests together
        self.in_flight = 0
        self.max_in_flight = 0
        self._count_lock = threading.Lock()
        # set by stop(): a request still stalled by a delay rule then ends unanswered instead of reaching the
        # registry later, where the session's shared access log would count it in another test's requests
        self.stopped = threading.Event()
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def first(self, method: str, path: str, kind: Callable[[Rule], bool], ranged: bool = False) -> Rule | None:
        """The first rule of a kind that matches."""
        return next((r for r in self.rules if kind(r) and r.matches(method, path, ranged)), None)

    def wait(self, method: str, path: str, ranged: bool = False) -> None:
        """Stall as the delay rules say (each counts its hits)."""
        for rule in self.rules:
            if rule.delay and rule.matches(method, path, ranged):
                rule.hits += 1
                self.stopped.wait(rule.delay)

    def altered(self, method: str, path: str, data: bytes, ranged: bool = False) -> bytes:
        """The upstream's body, the bytes of the first matching `body` rule, or with a `tamper` rule's flipped byte."""
        replaced = self.first(method, path, lambda r: r.body is not None, ranged)
        if replaced is not None and replaced.body is not None:
            replaced.hits += 1
            return replaced.body
        tamper = self.first(method, path, lambda r: r.tamper, ranged)
        if tamper is None or not data:
            return data
        tamper.hits += 1
        return bytes([data[0] ^ 0xFF]) + data[1:]

    def enter(self) -> None:
        with self._count_lock:
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)

    def leave(self) -> None:
        with self._count_lock:
            self.in_flight -= 1

    @property
    def host(self) -> str:
        return f"127.0.0.1:{self.server.server_address[1]}"

    @property
    def url(self) -> str:
        return f"http://{self.host}"

    def start(self) -> FaultProxy:
        self.thread.start()
        return self

    def stop(self) -> None:
        self.stopped.set()
        self.server.shutdown()
        self.server.server_close()


def _write_body(handler: BaseHTTPRequestHandler, data: bytes, truncate: Rule | None) -> int:
    """Send the body (half of it, then cut, for a truncate rule); the bytes sent."""
    if truncate is not None:
        truncate.hits += 1
        handler.wfile.write(data[: len(data) // 2])
        handler.wfile.flush()
        if truncate.stall:
            time.sleep(truncate.stall)
        handler.close_connection = True
        return len(data) // 2
    if handler.command != "HEAD":
        handler.wfile.write(data)
        return len(data)
    return 0


def _answer_status(handler: BaseHTTPRequestHandler, proxy: FaultProxy, rule: Rule) -> None:
    """Answer a status rule's status itself; with the rule's body if it has one (a registry that lies)."""
    rule.hits += 1
    proxy.log.append((handler.command, handler.path, rule.status))
    handler.send_response(rule.status)
    data = rule.body or b""
    for key, value in rule.headers.items():
        handler.send_header(key, value)
    handler.send_header("Content-Length", str(len(data)))
    handler.end_headers()
    if handler.command != "HEAD":
        handler.wfile.write(data)


def _handler(proxy: FaultProxy) -> type[BaseHTTPRequestHandler]:
    """The request handler class bound to one proxy."""

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *_args: object) -> None:
            return

        def _handle(self) -> None:
            proxy.enter()
            try:
                self._answer()
            finally:
                proxy.leave()

        def _answer(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else None
            ranged = "Range" in self.headers
            proxy.ranges.append((self.command, self.path, self.headers.get("Range")))
            proxy.wait(self.command, self.path, ranged)
            if proxy.stopped.is_set():  # the test is over: nothing more reaches the registry
                self.close_connection = True
                return
            rule = proxy.first(self.command, self.path, lambda r: bool(r.status), ranged)
            if rule is not None:
                _answer_status(self, proxy, rule)
                return
            self._forward(body, ranged)

        def _forward(self, body: bytes | None, ranged: bool) -> None:
            connection = http.client.HTTPConnection(proxy.upstream, timeout=30)
            strip = proxy.first(self.command, self.path, lambda r: r.strip_range, ranged)
            dropped = {"host", "range"} if strip is not None else {"host"}
            headers = {k: v for k, v in self.headers.items() if k.lower() not in dropped}
            connection.request(self.command, self.path, body=body, headers=headers)
            response = connection.getresponse()
            data = proxy.altered(self.command, self.path, response.read(), ranged)
            proxy.log.append((self.command, self.path, response.status))
            truncate = proxy.first(self.command, self.path, lambda r: r.truncate, ranged)
            self.send_response(response.status)
            for key, value in response.getheaders():
                if key.lower() not in {"transfer-encoding", "connection", "content-length"}:
                    self.send_header(key, value)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            sent = _write_body(self, data, truncate)
            with proxy._count_lock:
                proxy.body_bytes += sent

        do_GET = do_HEAD = do_POST = do_PUT = do_DELETE = do_PATCH = _handle  # noqa: N815

    return Handler


@contextmanager
def fault_proxy(upstream: str) -> Iterator[FaultProxy]:
    proxy = FaultProxy(upstream).start()
    try:
        yield proxy
    finally:
        proxy.stop()


class SilentServer:
    """A server on 127.0.0.1 (random port) that accepts every connection and never answers.

    A hung mirror: the client's connect succeeds and only its response-header timeout ends the wait. `accepted` counts
    the connections (one per request the client sent, as none is ever answered for reuse).
    """

    def __init__(self) -> None:
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.listener.getsockname()[1]}"
        self.accepted = 0
        self._held: list[socket.socket] = []
        self._stopping = threading.Event()
        self.thread = threading.Thread(target=self._serve, daemon=True)

    def _serve(self) -> None:
        self.listener.settimeout(0.1)
        while not self._stopping.is_set():
            try:
                connection, _ = self.listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            self.accepted += 1
            self._held.append(connection)  # kept open, never written to

    def start(self) -> SilentServer:
        self.thread.start()
        return self

    def stop(self) -> None:
        self._stopping.set()
        self.thread.join()
        self.listener.close()
        for connection in self._held:
            connection.close()


@contextmanager
def silent_server() -> Iterator[SilentServer]:
    server = SilentServer().start()
    try:
        yield server
    finally:
        server.stop()
