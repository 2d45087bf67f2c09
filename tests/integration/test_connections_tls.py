"""TLS through `registry/connections.py` against a real TLS server: certificate and host name are verified.

Directly and through an `HTTPS_PROXY` CONNECT tunnel (whose credentials go to the proxy only).

Counts only: requests and tunnels seen, and the headers they carried.
"""

from __future__ import annotations

import ssl
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from time import monotonic

import pytest

from ocivendir.registry.connections import Agent, BodyBroken, ConnectFailed, HeaderTimeout
from ocivendir.registry.proxy import ProxyConfig
from ocivendir.registry.transport import ClientOptions, _ssl_context
from tests.support.registry import _make_tls
from tests.support.serve import serving
from tests.support.tunnel import ConnectProxy

TIMEOUTS = (5.0, 5.0)


class _Origin(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, context: ssl.SSLContext) -> None:
        super().__init__(("127.0.0.1", 0), _OriginHandler)
        self.socket = context.wrap_socket(self.socket, server_side=True)
        self.seen: list[dict[str, str]] = []
        self.paced = 0  # bytes trickled before the client hung up


class _OriginHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Origin

    def log_message(self, *_args: object) -> None:
        """Quiet."""

    def do_GET(self) -> None:
        self.server.seen.append(dict(self.headers.items()))
        if self.path.startswith("/trickle-"):
            self._trickle(self.path.removeprefix("/trickle-"))
            return
        self.send_response(200)
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"ok")

    def _trickle(self, part: str) -> None:
        """The head (or, after a whole head, the body) one TLS record of one byte every 0.2 s, for at most 60 s."""
        head = b"HTTP/1.1 200 OK\r\nContent-Length: 300\r\nX-Padding: " + b"p" * 200 + b"\r\n\r\n"
        if part == "body":
            self.wfile.write(head)
            self.wfile.flush()
        try:
            for byte in (head if part == "head" else b"b" * 300)[:300]:
                time.sleep(0.2)
                self.wfile.write(bytes([byte]))
                self.wfile.flush()
                self.server.paced += 1
        except OSError:
            self.close_connection = True


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path]:
    """A CA and a server certificate for 127.0.0.1, localhost and registry.test."""
    return _make_tls(tmp_path_factory.mktemp("tls"))


@pytest.fixture
def origin(certs: tuple[Path, Path, Path]) -> Iterator[_Origin]:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(certs[1], certs[2])
    with serving(_Origin(context)) as running:
        yield running


def _agent(ca: Path | None) -> Agent:
    options = ClientOptions(ca_files=(ca,) if ca else (), ssl_cert_file="/nonexistent", ssl_cert_dir="/nonexistent")
    return Agent(lambda: _ssl_context(options, verify=True), "ocivendir/test", 2)


def _direct(_scheme: str, _host: str, _port: int) -> None:
    return None


def test_a_trusted_certificate_for_the_host_is_accepted(origin: _Origin, certs: tuple[Path, Path, Path]) -> None:
    url = f"https://127.0.0.1:{origin.server_address[1]}/v2/"
    assert _agent(certs[0]).request("GET", url, {}, timeouts=TIMEOUTS, proxy_for=_direct).content == b"ok"
    assert len(origin.seen) == 1


def test_an_unknown_ca_is_refused(origin: _Origin) -> None:
    url = f"https://127.0.0.1:{origin.server_address[1]}/v2/"
    with pytest.raises(ConnectFailed, match="CERTIFICATE_VERIFY_FAILED"):
        _agent(None).request("GET", url, {}, timeouts=TIMEOUTS, proxy_for=_direct)
    assert origin.seen == []


def test_through_a_connect_tunnel_the_tunnelled_host_name_is_verified_and_proxy_credentials_stay_with_the_proxy(
    origin: _Origin, certs: tuple[Path, Path, Path]
) -> None:
    with serving(ConnectProxy(origin.server_address[1])) as tunnel:
        proxy = ProxyConfig(https_proxy=f"http://user:pw@127.0.0.1:{tunnel.server_address[1]}")
        agent = _agent(certs[0])
        answer = agent.request("GET", "https://registry.test:5000/v2/", {"Authorization": "Bearer t"},
                               timeouts=TIMEOUTS, proxy_for=proxy.for_url)  # fmt: skip
        assert answer.content == b"ok"
        with pytest.raises(ConnectFailed, match=r"Hostname mismatch|CERTIFICATE_VERIFY_FAILED"):
            agent.request("GET", "https://wrong.test:5000/v2/", {}, timeouts=TIMEOUTS, proxy_for=proxy.for_url)
        agent.close()
    (first, first_headers), (second, _) = tunnel.tunnels
    assert (first.split()[:2], second.split()[:2]) == (
        ["CONNECT", "registry.test:5000"],
        ["CONNECT", "wrong.test:5000"],
    )
    assert first_headers["Proxy-Authorization"] == "Basic dXNlcjpwdw=="  # user:pw, to the proxy
    ((sent,),) = [origin.seen]
    assert (sent["Host"], sent["Authorization"], "Proxy-Authorization" in sent) == (
        "registry.test:5000",
        "Bearer t",
        False,
    )


@pytest.mark.parametrize("part", ["head", "body"])
def test_a_tls_answer_trickled_a_byte_at_a_time_is_cut_at_its_deadline(
    origin: _Origin, certs: tuple[Path, Path, Path], part: str
) -> None:
    """Each byte comes well within the 1 s read timeout: the head's deadline, or the run's, shuts the TLS socket."""
    url = f"https://127.0.0.1:{origin.server_address[1]}/trickle-{part}"
    agent = _agent(certs[0])
    if part == "head":
        with pytest.raises(HeaderTimeout):
            agent.request("GET", url, {}, timeouts=(5.0, 1.0), proxy_for=_direct)
    else:
        answer = agent.request("GET", url, {}, timeouts=(5.0, 1.0), proxy_for=_direct, until=monotonic() + 2)
        with pytest.raises(BodyBroken):
            answer.content  # noqa: B018
    agent.close()
    assert origin.paced < 100  # about 5 (head) or 10 (body) of the 300 a patient client would have read


class _PlainHandler(_OriginHandler):
    default_request_version = "HTTP/1.1"  # a garbled request line is answered with a status line, as Go's server does


class _Plain(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _PlainHandler)
        self.seen: list[dict[str, str]] = []


def _probing_agent(ca: Path) -> Agent:
    options = ClientOptions(ca_files=(ca,), ssl_cert_file="/nonexistent", ssl_cert_dir="/nonexistent")
    return Agent(lambda: _ssl_context(options, verify=True), "ocivendir/test", 2, lambda _host, _port: True)


def test_the_tls_probe_lets_a_tls_server_through_to_the_verified_handshake(
    origin: _Origin, certs: tuple[Path, Path, Path]
) -> None:
    url = f"https://localhost:{origin.server_address[1]}/v2/"
    assert _probing_agent(certs[0]).request("GET", url, {}, timeouts=TIMEOUTS, proxy_for=_direct).content == b"ok"
    assert len(origin.seen) == 1  # the probe's ClientHello was no request


def test_the_tls_probe_finds_out_a_plain_http_server_without_ssl(certs: tuple[Path, Path, Path]) -> None:
    with serving(_Plain()) as plain:
        url = f"https://127.0.0.1:{plain.server_address[1]}/v2/"
        with pytest.raises(ConnectFailed, match="http: server gave HTTP response to HTTPS client"):
            _probing_agent(certs[0]).request("GET", url, {}, timeouts=TIMEOUTS, proxy_for=_direct)
        assert plain.seen == []
