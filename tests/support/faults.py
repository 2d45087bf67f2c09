"""Test support: a fault proxy in front of the real registry.

Chosen answers (403, 5xx, 429 + Retry-After), truncated bodies and tampered bodies (other bytes behind the upstream's
own headers: a man in the middle) for requests matching a rule; everything else is forwarded as it is.
"""

from __future__ import annotations

import http.client
import re
import threading
from collections.abc import Iterator
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
    body: bytes | None = None  # forward, but answer with these bytes instead of the upstream's
    times: int = 0
    hits: int = 0

    def matches(self, method: str, path: str) -> bool:
        if self.times and self.hits >= self.times:
            return False
        return self.method in {method, "*"} and re.search(self.path, path) is not None


class FaultProxy:
    """A proxy on 127.0.0.1 (random port) that applies rules, then forwards to the upstream registry."""

    def __init__(self, upstream: str) -> None:
        self.upstream = upstream
        self.rules: list[Rule] = []
        self.log: list[tuple[str, str, int]] = []
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *_args: object) -> None:
                return

            def _handle(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else None
                for rule in proxy.rules:
                    if rule.matches(self.command, self.path) and not rule.truncate and rule.body is None:
                        rule.hits += 1
                        proxy.log.append((self.command, self.path, rule.status))
                        self.send_response(rule.status)
                        for key, value in rule.headers.items():
                            self.send_header(key, value)
                        self.send_header("Content-Length", "0")
                        self.end_headers()
                        return
                connection = http.client.HTTPConnection(proxy.upstream, timeout=30)
                headers = {k: v for k, v in self.headers.items() if k.lower() != "host"}
                connection.request(self.command, self.path, body=body, headers=headers)
                response = connection.getresponse()
                data = response.read()
                proxy.log.append((self.command, self.path, response.status))
                truncate = next((r for r in proxy.rules if r.truncate and r.matches(self.command, self.path)), None)
                data = proxy.tampered(self.command, self.path, data)
                self.send_response(response.status)
                for key, value in response.getheaders():
                    if key.lower() not in {"transfer-encoding", "connection", "content-length"}:
                        self.send_header(key, value)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                if truncate is not None:
                    truncate.hits += 1
                    self.wfile.write(data[: len(data) // 2])
                    self.wfile.flush()
                    self.close_connection = True
                    return
                if self.command != "HEAD":
                    self.wfile.write(data)

            do_GET = do_HEAD = do_POST = do_PUT = do_DELETE = do_PATCH = _handle  # noqa: N815

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def tampered(self, method: str, path: str, data: bytes) -> bytes:
        """The upstream's body, or the bytes of the first matching tampering rule."""
        for rule in self.rules:
            if rule.body is not None and rule.matches(method, path):
                rule.hits += 1
                return rule.body
        return data

    @property
    def host(self) -> str:
        return f"127.0.0.1:{self.server.server_address[1]}"

    def start(self) -> FaultProxy:
        self.thread.start()
        return self

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@contextmanager
def fault_proxy(upstream: str) -> Iterator[FaultProxy]:
    proxy = FaultProxy(upstream).start()
    try:
        yield proxy
    finally:
        proxy.stop()
