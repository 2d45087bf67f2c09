"""Test support: a raw-socket HTTP/1.1 server on 127.0.0.1 whose every answer is scripted, byte for byte and in time.

For what no server library sends: a head or a body trickled one byte at a time, malformed header values, a `101`
status, endless `Link` pages, a redirect to a host that challenges on its own. `route(request)` gives each answer;
every request is recorded with its headers, and every byte of each answer the client took is counted, so a test
asserts how much a client read before it gave up, never how long it took.
"""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

from tests.support.builders import Image, sha

__all__ = ["HostileServer", "Reply", "Seen", "hostile", "image_routes", "write_tag_selection"]


@dataclass(frozen=True)
class Seen:
    """A request as the server read it; header names in lower case."""

    method: str
    path: str
    headers: dict[str, str]


@dataclass
class Reply:
    """One answer: status line and headers (`Content-Length` added unless given or `raw_head`), then the body.

    `head_pace` and `body_pace` are seconds between single bytes; `give_up` is how many paced bytes are sent at most
    before the server closes the connection (a bound for the test itself, should the client never give up).
    """

    status: int = 200
    headers: Sequence[tuple[str, str]] = ()
    body: bytes = b""
    reason: str = "OK"
    raw_head: bytes | None = None
    head_pace: float = 0.0
    body_pace: float = 0.0
    give_up: int = 100

    def head(self, method: str) -> bytes:
        """The status line and headers as sent."""
        if self.raw_head is not None:
            return self.raw_head
        lines = [f"HTTP/1.1 {self.status} {self.reason}", *(f"{name}: {value}" for name, value in self.headers)]
        if not any(name.lower() == "content-length" for name, _ in self.headers) and method != "HEAD":
            lines.append(f"Content-Length: {len(self.body)}")
        return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


Route = Callable[[Seen], Reply]


@dataclass
class HostileServer:
    """Serves `route`'s answers on a random 127.0.0.1 port, one thread per connection, connections kept alive."""

    route: Route
    seen: list[Seen] = field(default_factory=list)
    paced_bytes: int = 0  # bytes of paced answers the client took before it hung up (or the server gave up)
    _stopping: threading.Event = field(default_factory=threading.Event)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _sockets: list[socket.socket] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.host = f"127.0.0.1:{self.listener.getsockname()[1]}"
        threading.Thread(target=self._accept, daemon=True).start()

    def paths(self, method: str = "") -> list[str]:
        """The paths asked for (with `method` only, when given)."""
        return [s.path for s in self.seen if not method or s.method == method]

    def stop(self) -> None:
        self._stopping.set()
        self.listener.close()
        with self._lock:
            for sock in self._sockets:
                sock.close()

    def _accept(self) -> None:
        while not self._stopping.is_set():
            try:
                sock, _ = self.listener.accept()
            except OSError:
                return
            with self._lock:
                self._sockets.append(sock)
            threading.Thread(target=self._serve, args=(sock,), daemon=True).start()

    def _serve(self, sock: socket.socket) -> None:
        reader = sock.makefile("rb")
        try:
            while (request := _read_request(reader)) is not None:
                with self._lock:
                    self.seen.append(request)
                reply = self.route(request)
                if not self._send(sock, reply, request.method):
                    return
        except OSError:
            return
        finally:
            sock.close()

    def _send(self, sock: socket.socket, reply: Reply, method: str) -> bool:
        """Send one answer; False once the connection is done (the client hung up, or the server gave up)."""
        body = b"" if method == "HEAD" else reply.body
        parts = ((reply.head(method), reply.head_pace), (body, reply.body_pace))
        if not reply.head_pace and not reply.body_pace:
            sock.sendall(parts[0][0] + parts[1][0])
            return True
        sent = 0
        for data, pace in parts:
            if not pace:
                sock.sendall(data)
                continue
            for at in range(len(data)):
                if sent >= reply.give_up or self._stopping.wait(pace):
                    return False
                sock.sendall(data[at : at + 1])  # a client that hung up: OSError, the connection is done
                sent += 1
                with self._lock:
                    self.paced_bytes += 1
        return True


def _read_request(reader: BinaryIO) -> Seen | None:
    """The next request, or None at the end of the stream or for what is not an HTTP request (a TLS hello)."""
    words = reader.readline(65536).decode("latin-1").split(" ")
    if len(words) != 3 or not words[2].startswith("HTTP/1."):
        return None
    method, path = words[0], words[1]
    headers: dict[str, str] = {}
    while (raw := reader.readline(65536)) not in {b"\r\n", b"\n", b""}:
        name, _, value = raw.decode("latin-1").partition(":")
        headers[name.strip().lower()] = value.strip()
    length = int(headers.get("content-length") or 0)
    if length:
        reader.read(length)
    return Seen(method, path, headers)


@contextmanager
def hostile(route: Route) -> Iterator[HostileServer]:
    """A running `HostileServer` for the length of a block."""
    server = HostileServer(route)
    try:
        yield server
    finally:
        server.stop()


def image_routes(repo: str, image: Image, **special: Reply) -> Route:
    """A registry serving one image under `repo`: its manifest by digest and as tag `v1`, its blobs.

    A key of `special` is matched against the end of the path without its query (`manifests/…`, `blobs/…`,
    `tags/list`); the first that matches answers instead. Anything else is a 404.
    """
    blobs = {f"/v2/{repo}/blobs/{sha(blob)}": blob for blob in image.blobs}
    manifests = {f"/v2/{repo}/manifests/{image.digest}", f"/v2/{repo}/manifests/v1"}

    def route(request: Seen) -> Reply:
        for suffix, reply in special.items():
            if request.path.split("?", 1)[0].endswith(suffix):
                return reply
        if request.path in manifests:
            headers = [("Content-Type", _media_type(image)), ("Docker-Content-Digest", image.digest)]
            return Reply(headers=headers, body=image.manifest)
        if request.path in blobs:
            return Reply(headers=[("Content-Type", "application/octet-stream")], body=blobs[request.path])
        return Reply(status=404, reason="Not Found", body=b'{"errors":[{"code":"NOT_FOUND","message":"no"}]}')

    return route


def _media_type(image: Image) -> str:
    return str(json.loads(image.manifest).get("mediaType") or "application/vnd.oci.image.manifest.v1+json")


def write_tag_selection(path: Path, url: str) -> None:
    """A vendir.yml whose one image content picks the highest tag >= 1.0.0 of `url` (tag listing is what is tested)."""
    path.write_text(
        "apiVersion: vendir.k14s.io/v1alpha1\nkind: Config\ndirectories:\n- path: vendor\n  contents:\n  - path: app\n"
        f'    image:\n      url: {url}\n      tagSelection: {{semver: {{constraints: ">=1.0.0"}}}}\n'
    )
