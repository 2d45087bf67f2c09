"""`registry/connections.py` against a real local HTTP/1.1 server: reuse, stale connections, redirects, proxies.

Counts only: connections the server accepted (one client port each), requests it saw and the headers they carried.
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from ocivendir.registry import connections
from ocivendir.registry.connections import Agent, BodyTooLarge, ConnectFailed, HeaderTimeout
from ocivendir.registry.proxy import ProxyConfig
from tests.support.serve import serving

BODY = b"x" * 100_000
HUGE = 64 << 20
CONTINUES = 50_000_000
TIMEOUTS = (5.0, 5.0)
RAW = {  # answers written byte for byte, after which the server keeps the connection open
    "http10-chunked": b"HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n",
    "chunked-and-length": b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n",
    "switch": b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: h2c\r\nConnection: Upgrade\r\n\r\n",
    "many-headers": b"HTTP/1.1 200 OK\r\n" + b"X-A: a\r\n" * 101 + b"Content-Length: 0\r\n\r\n",
    "long-line": b"HTTP/1.1 200 OK\r\nX-A: " + b"a" * (65 << 10) + b"\r\nContent-Length: 0\r\n\r\n",
    "length-letters": b"HTTP/1.1 200 OK\r\nContent-Length: abc\r\n\r\nok",
    "length-conflict": b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\nok",
    "gzip-coding": b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\nok",
}


class Server(ThreadingHTTPServer):
    """Records (client port, method, path, headers) per request; `close_after` drops the connection after an answer."""

    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.seen: list[tuple[int, str, str, dict[str, str]]] = []
        self.close_after = False
        self.drop_reuse = False  # a connection's second request is met by a close, not an answer
        self.sent = 0  # body bytes of /huge answers the client took before it hung up

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"

    @property
    def connections(self) -> int:
        return len({port for port, *_ in self.seen})


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: Server

    def log_message(self, *_args: object) -> None:
        """Quiet."""

    def _huge(self, status: int) -> None:
        """`HUGE` bytes announced and sent (a 302 to /v2/a/blobs/one, or a 200), until the client hangs up."""
        self.send_response(status)
        self.send_header("Location", "/v2/a/blobs/one")
        self.send_header("Content-Length", str(HUGE))
        self.end_headers()
        piece = b"y" * (1 << 16)
        try:
            for _ in range(HUGE // len(piece)):
                self.wfile.write(piece)
                self.server.sent += len(piece)
        except OSError:
            self.close_connection = True

    def _continues(self) -> None:
        """`100 Continue` status lines, `CONTINUES` of them, then a 200 (or until the client hangs up)."""
        try:
            for _ in range(CONTINUES):
                self.wfile.write(b"HTTP/1.1 100 Continue\r\n\r\n")
                self.server.sent += 1
            self.send_response(200)
            self.send_header("Content-Length", "0")
            self.end_headers()
        except OSError:
            self.close_connection = True

    def _unanswered(self) -> bool:
        """A reused connection dropped (`drop_reuse`), or a `RAW` answer written: nothing more to send."""
        self.served = getattr(self, "served", 0) + 1
        if self.server.drop_reuse and self.served > 1:
            self.close_connection = True  # as a server does that closes an idle connection as the request arrives
            return True
        raw = RAW.get(self.path.rsplit("/", 1)[1])
        if raw is not None:  # the bytes as they are; the connection stays open unless the client closes it
            self.wfile.write(raw)
        return raw is not None

    def _answer(self) -> None:
        self.server.seen.append((self.client_address[1], self.command, self.path, dict(self.headers.items())))
        if self._unanswered():
            return
        if self.path.endswith("/continue"):
            self._continues()
            return
        if self.path.endswith("/huge-redirect"):
            self._huge(302)
            return
        if self.path.endswith("/huge"):
            self._huge(200)
            return
        if self.path.endswith("/chunked"):
            self.send_response(200)
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            for piece in (BODY[:40_000], BODY[40_000:]):
                self.wfile.write(b"%x\r\n%s\r\n" % (len(piece), piece))
            self.wfile.write(b"0\r\nX-Trailer: t\r\n\r\n")
            return
        if self.path.endswith("/moved"):
            self.send_response(307)
            self.send_header("Location", f"http://localhost:{self.server.server_address[1]}/storage/blob")
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        self.send_response(200)
        self.send_header("Content-Length", str(len(BODY)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(BODY)
        self.close_connection = self.server.close_after  # no `Connection: close`: the client finds out on reuse

    do_GET = do_HEAD = _answer  # noqa: N815 - http.server's names


@pytest.fixture
def server() -> Iterator[Server]:
    with serving(Server()) as running:
        yield running


def _agent() -> Agent:
    def no_tls() -> object:
        raise AssertionError("plain HTTP must not make a TLS context")

    return Agent(no_tls, "ocivendir/test", 4)  # type: ignore[arg-type]


def _direct(_scheme: str, _host: str, _port: int) -> None:
    return None


def test_requests_to_one_origin_share_one_connection(server: Server) -> None:
    agent = _agent()
    agent.request("HEAD", f"{server.base}/v2/a/manifests/v1", {}, timeouts=TIMEOUTS, proxy_for=_direct).close()
    read = agent.request("GET", f"{server.base}/v2/a/blobs/one", {}, timeouts=TIMEOUTS, proxy_for=_direct)
    assert read.content == BODY
    streamed = agent.request("GET", f"{server.base}/v2/a/blobs/two", {}, timeouts=TIMEOUTS, proxy_for=_direct)
    assert b"".join(streamed.iter_content(4096)) == BODY
    agent.close()
    assert (len(server.seen), server.connections) == (3, 1)


def test_a_chunked_answer_is_read_whole_and_its_connection_reused(server: Server) -> None:
    agent = _agent()
    for _ in range(2):
        answer = agent.request("GET", f"{server.base}/v2/a/chunked", {}, timeouts=TIMEOUTS, proxy_for=_direct)
        assert b"".join(answer.iter_content(1 << 14)) == BODY
    agent.close()
    assert (len(server.seen), server.connections) == (2, 1)


def test_a_connection_the_server_closed_while_idle_is_replaced_once(server: Server) -> None:
    server.close_after = True
    agent = _agent()
    for name in ("one", "two"):
        answer = agent.request("GET", f"{server.base}/v2/a/blobs/{name}", {}, timeouts=TIMEOUTS, proxy_for=_direct)
        assert answer.content == BODY
    agent.close()
    assert [path for _, _, path, _ in server.seen] == ["/v2/a/blobs/one", "/v2/a/blobs/two"]
    assert server.connections == 2


def test_a_reused_connection_closed_without_an_answer_is_retried_once_on_a_new_one(server: Server) -> None:
    server.drop_reuse = True
    agent = _agent()
    for name in ("one", "two"):
        answer = agent.request("GET", f"{server.base}/v2/a/blobs/{name}", {}, timeouts=TIMEOUTS, proxy_for=_direct)
        assert answer.content == BODY
    agent.close()
    assert [path for _, _, path, _ in server.seen] == ["/v2/a/blobs/one", "/v2/a/blobs/two", "/v2/a/blobs/two"]
    assert server.connections == 2


def test_a_redirect_to_another_host_is_followed_without_the_authorization_header(server: Server) -> None:
    agent = _agent()
    headers = {"Authorization": "Bearer secret"}
    answer = agent.request("GET", f"{server.base}/v2/a/blobs/moved", headers, timeouts=TIMEOUTS, proxy_for=_direct)
    assert (answer.status_code, answer.content, len(answer.history)) == (200, BODY, 1)
    assert answer.url == f"http://localhost:{server.server_address[1]}/storage/blob"
    (_, _, first, sent_first), (_, _, second, sent_second) = server.seen
    assert (first, sent_first["Authorization"]) == ("/v2/a/blobs/moved", "Bearer secret")
    assert second == "/storage/blob"
    assert "Authorization" not in sent_second


def test_plain_http_through_a_proxy_is_sent_in_absolute_form_with_the_proxy_credentials(server: Server) -> None:
    proxy = ProxyConfig(http_proxy=f"http://user:p%40ss@127.0.0.1:{server.server_address[1]}")
    answer = _agent().request("GET", "http://registry.test:5000/v2/a/blobs/one", {}, timeouts=TIMEOUTS,
                              proxy_for=proxy.for_url)  # fmt: skip
    assert answer.content == BODY
    ((_, _, path, sent),) = server.seen
    assert path == "http://registry.test:5000/v2/a/blobs/one"
    assert sent["Host"] == "registry.test:5000"
    assert sent["Proxy-Authorization"] == "Basic dXNlcjpwQHNz"  # user:p@ss


def test_a_redirect_with_a_huge_body_is_not_read_its_connection_is_closed(server: Server) -> None:
    agent = _agent()
    answer = agent.request("GET", f"{server.base}/v2/a/huge-redirect", {}, timeouts=TIMEOUTS, proxy_for=_direct)
    assert (answer.status_code, answer.content, len(answer.history)) == (200, BODY, 1)
    agent.close()
    assert server.connections == 2  # the redirect's connection was not drained for reuse: a second one was opened
    assert server.sent < HUGE // 2  # the 64 MiB body was never read (Go slurps at most 2 KiB of a redirect)


def test_a_body_read_at_once_is_capped(server: Server, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(connections, "MAX_BODY_BYTES", 1 << 20)
    agent = _agent()
    answer = agent.request("GET", f"{server.base}/v2/a/huge", {}, timeouts=TIMEOUTS, proxy_for=_direct)
    with pytest.raises(BodyTooLarge, match="larger than 1048576 bytes"):
        answer.content  # noqa: B018
    again = agent.request("GET", f"{server.base}/v2/a/blobs/one", {}, timeouts=TIMEOUTS, proxy_for=_direct)
    assert again.content == BODY
    agent.close()
    assert server.connections == 2  # the over-long answer's connection was dropped, not handed back to the pool
    assert server.sent < HUGE // 2


def test_endless_100_continue_lines_are_bounded_by_the_response_header_timeout(server: Server) -> None:
    """`http.client` skips `100 Continue` heads without a count (Go stops at five): the whole head's deadline ends it."""
    agent = _agent()
    with pytest.raises(HeaderTimeout):
        agent.request("GET", f"{server.base}/v2/a/continue", {}, timeouts=(5.0, 1.0), proxy_for=_direct)
    agent.close()
    assert server.sent < CONTINUES  # the client hung up long before the server ran out of them


def test_a_path_with_a_scheme_separator_in_it_keeps_its_host_header(server: Server) -> None:
    """A tag-list page's `last=` may hold `://`: the request is still origin-form with this origin's Host."""
    agent = _agent()
    url = f"{server.base}/v2/a/tags/list?n=1&last=https://evil.test/x"
    assert agent.request("GET", url, {}, timeouts=TIMEOUTS, proxy_for=_direct).content == BODY
    ((_, _, path, sent),) = server.seen
    assert (path, sent["Host"]) == (
        "/v2/a/tags/list?n=1&last=https://evil.test/x",
        f"127.0.0.1:{server.server_address[1]}",
    )


@pytest.mark.parametrize("answer", ["http10-chunked", "chunked-and-length", "switch"])
def test_an_answer_that_leaves_its_connection_in_doubt_is_not_pooled(server: Server, answer: str) -> None:
    """HTTP/1.0 with Transfer-Encoding, chunked beside a Content-Length (RFC 9112 §6.1, §6.3), or a 101: a new one."""
    agent = _agent()
    first = agent.request("GET", f"{server.base}/v2/a/{answer}", {}, timeouts=TIMEOUTS, proxy_for=_direct)
    assert (first.status_code, first.content) == ((101, b"") if answer == "switch" else (200, b"ok"))
    again = agent.request("GET", f"{server.base}/v2/a/blobs/one", {}, timeouts=TIMEOUTS, proxy_for=_direct)
    assert again.content == BODY
    agent.close()
    assert (len(server.seen), server.connections) == (2, 2)


@pytest.mark.parametrize(
    ("answer", "words"),
    [
        ("many-headers", "got more than 100 headers"),
        ("long-line", "header line"),
        ("length-letters", "an invalid or conflicting Content-Length: 'abc'"),
        ("length-conflict", r"Content-Length.*\(?'?2, 3"),
        ("gzip-coding", "an unsupported Transfer-Encoding: 'gzip'"),
    ],
)
def test_a_head_past_the_bounds_or_a_body_of_unknown_framing_is_refused(
    server: Server, answer: str, words: str
) -> None:
    """A head is bounded as `http.client` bounds it (100 fields, 64 KiB a line); a body's framing must be certain."""
    agent = _agent()
    with pytest.raises(ConnectFailed, match=words):
        agent.request("GET", f"{server.base}/v2/a/{answer}", {}, timeouts=TIMEOUTS, proxy_for=_direct)
    again = agent.request("GET", f"{server.base}/v2/a/blobs/one", {}, timeouts=TIMEOUTS, proxy_for=_direct)
    assert again.content == BODY
    agent.close()
    assert server.connections == 2  # the refused answer's connection was not reused


def test_closing_the_agent_closes_its_idle_connections_without_the_collector(server: Server) -> None:
    """The sockets are closed by `close` itself, not left for the collector (a reused worker checks right after)."""
    agent = _agent()
    gc.disable()
    try:
        answer = agent.request("GET", f"{server.base}/v2/a/blobs/one", {}, timeouts=TIMEOUTS, proxy_for=_direct)
        assert answer.content == BODY
        assert _client_sockets(server) == 1
        agent.close()
        assert _client_sockets(server) == 0
    finally:
        gc.enable()


def _client_sockets(server: Server) -> int:
    """How many of this process's descriptors are the client ends of connections `server` accepted."""
    ports = {f"{port:04X}" for port, *_ in server.seen}
    inodes = set()
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        fields = line.split()
        if fields[1].rsplit(":", 1)[1] in ports:  # local address: the client's end
            inodes.add(f"socket:[{fields[9]}]")
    found = 0
    for entry in Path("/proc/self/fd").iterdir():
        with contextlib.suppress(OSError):
            found += str(entry.readlink()) in inodes
    return found
