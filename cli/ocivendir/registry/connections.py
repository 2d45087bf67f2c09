"""Owns: connections to registries — the only module that opens sockets — and the exchanges on them.

Connections are kept per origin and proxy and reused (a reused connection the server has meanwhile closed is retried
once on a new one); an http URL goes through a proxy in absolute form, an https URL through a `CONNECT` tunnel;
redirects are followed (the `Authorization` header is dropped when the host changes, as Go and requests do); the
connect timeout covers the TCP and TLS handshakes and the read timeout every wait after; a response head must have come
whole within the read timeout of its request being sent, and no read or redirect hop goes past the caller's `until`
(the run's deadline), however slowly the server trickles. The TLS context is made when
the first https connection's TCP handshake has succeeded, so neither a plain-HTTP registry nor a refused one ever
reads the trust store, and `ssl` (with `socket`) is imported only then: a plain connection is a bare `_socket`, and the
exchange on it is `registry/http11.py`'s. What failed is told apart for the transport: no connection
(`ConnectFailed`), no answer in time (`HeaderTimeout`), a body cut short (`BodyBroken`).
"""

from __future__ import annotations

import _socket
import binascii
from _thread import allocate_lock
from collections.abc import Callable, Iterator
from time import monotonic

from ocivendir import jsondoc
from ocivendir.registry.http11 import (
    MAX_INFORMATIONAL,
    Disconnected,
    Headers,
    ProtocolError,
    RawResponse,
    Wire,
    read_response,
    request_bytes,
)
from ocivendir.registry.tlsprobe import check_speaks_tls

TYPE_CHECKING = False
if TYPE_CHECKING:
    import ssl
    from typing import Any

__all__ = [
    "MAX_INFORMATIONAL",
    "Agent",
    "BodyBroken",
    "BodyTooLarge",
    "ConnectFailed",
    "HeaderTimeout",
    "Request",
    "Response",
    "basic_auth",
    "open_connection",
]

MAX_REDIRECTS = 30
MAX_BODY_BYTES = 32 << 20  # a body read at once (token, error, tag list page); manifests have their own, smaller cap
REDIRECT_DRAIN_BYTES = 2 << 10  # Go's maxBodySlurpSize: a redirect's body longer than this closes the connection
_REDIRECTS = frozenset({301, 302, 303, 307, 308})
_STALE = (Disconnected, BrokenPipeError, ConnectionResetError, ConnectionAbortedError)
ProxyChooser = Callable[[str, str, int], "str | None"]


class ConnectFailed(Exception):
    """No answer could be had: the connection (TCP, TLS, proxy tunnel) failed, or broke before the headers."""


class HeaderTimeout(Exception):
    """The request was sent but no response headers came within the read timeout."""


class BodyBroken(Exception):
    """The connection dropped while a response body was being read."""


class BodyTooLarge(BodyBroken):
    """A body read at once went past `MAX_BODY_BYTES`: a hostile or broken server, not an answer to keep in memory."""


class Request:
    """What was sent, for logs and error texts."""

    __slots__ = ("headers", "method", "url")

    def __init__(self, method: str, url: str, headers: dict[str, str]) -> None:
        """Hold the request line and headers."""
        self.method = method
        self.url = url
        self.headers = headers


class Response:
    """An answer: status, headers, the body read at once or streamed, and the redirects that led to it."""

    def __init__(self, raw: RawResponse, request: Request, release: Callable[[bool], None]) -> None:
        """Wrap `raw`; `release(reusable)` hands the connection back once the body is done with."""
        self.raw = raw
        self.request = request
        self.url = request.url
        self.status_code = raw.status
        self.reason = raw.reason
        self.headers: Headers = raw.headers
        self.history: list[Response] = []
        self._release: Callable[[bool], None] | None = release
        self._content: bytes | None = None

    def iter_content(self, chunk_size: int) -> Iterator[bytes]:
        """The body in chunks; a dropped connection or a body cut short is `BodyBroken`."""
        if self._content is not None:
            yield self._content
            return
        try:
            while chunk := self.raw.read(chunk_size):
                yield chunk
        except (OSError, ProtocolError) as exc:
            self._done(reusable=False)
            raise BodyBroken(str(exc) or type(exc).__name__) from None
        self._done(reusable=True)

    @property
    def content(self) -> bytes:
        """The whole body (read now if it was not yet), at most `MAX_BODY_BYTES` of it (`BodyTooLarge` past that)."""
        if self._content is None:
            chunks, total = [], 0
            for chunk in self.iter_content(1 << 20):
                total += len(chunk)
                if total > MAX_BODY_BYTES:
                    self._done(reusable=False)
                    raise BodyTooLarge(f"response body larger than {MAX_BODY_BYTES} bytes from {self.url}")
                chunks.append(chunk)
            self._content = b"".join(chunks)
        return self._content

    def discard(self) -> None:
        """Done with a redirect: a short body is read so the connection can be reused, a longer one closes it."""
        length, drained = self.raw.length, 0
        if self._release is not None and (length is None or length <= REDIRECT_DRAIN_BYTES):
            try:
                while drained <= REDIRECT_DRAIN_BYTES and (chunk := self.raw.read(REDIRECT_DRAIN_BYTES)):
                    drained += len(chunk)
            except (OSError, ProtocolError):
                self._done(reusable=False)
        self.close()

    @property
    def text(self) -> str:
        """The body as text (UTF-8, undecodable bytes replaced)."""
        return self.content.decode("utf-8", "replace")

    def json(self) -> Any:  # noqa: ANN401 - any JSON value
        """The body decoded as JSON (`ValueError` when it is not)."""
        return jsondoc.loads(self.content)

    @property
    def links(self) -> dict[str, dict[str, str]]:
        """The `Link` header by relation: `{"next": {"url": …, "rel": "next"}}` (RFC 8288, as requests gives it)."""
        found: dict[str, dict[str, str]] = {}
        for part in (self.headers.get("Link") or "").split(","):
            target, _, params = part.strip().partition(";")
            if not target.startswith("<") or not target.endswith(">"):
                continue
            link = {"url": target[1:-1]}
            for param in params.split(";"):
                key, _, value = param.partition("=")
                if key.strip():
                    link[key.strip().lower()] = value.strip().strip("\"'")
            found[link.get("rel", link["url"])] = link
        return found

    def close(self) -> None:
        """Done with the answer: an unread body closes the connection, a read one returns it to the pool."""
        self._done(reusable=self.raw.isclosed())

    def _done(self, *, reusable: bool) -> None:
        release, self._release = self._release, None
        if release is not None:
            release(reusable and not self.raw.will_close)


def _dial(host: str, port: int, timeout: float) -> _socket.socket:
    """A TCP connection to the first address of `host` that answers (`socket.create_connection`, on `_socket`).

    An ASCII host name is looked up as bytes, so the `idna` codec is loaded only for a name that needs it.
    """
    name = host.encode("ascii") if host.isascii() else host.encode("idna")
    failure: OSError = OSError(f"no address found for {host}")
    for family, kind, proto, _, address in _socket.getaddrinfo(name, port, 0, _socket.SOCK_STREAM):
        sock = _socket.socket(family, kind, proto)
        try:
            sock.settimeout(timeout)
            sock.setsockopt(_socket.IPPROTO_TCP, _socket.TCP_NODELAY, 1)
            sock.connect(address)
        except OSError as exc:
            sock.close()
            failure = exc
            continue
        return sock
    raise failure


def _host_header(host: str, port: int, default: int) -> str:
    name = f"[{host}]" if ":" in host else host
    return name if port == default else f"{name}:{port}"


def _open_tunnel(sock: _socket.socket, host: str, port: int, headers: dict[str, str], timeout: float) -> None:
    """Ask the proxy on `sock` for a tunnel to `host:port`; anything but 200 is `OSError` (as `http.client` says it).

    The proxy's whole answer must come within `timeout` (the connect timeout), however it is paced.
    """
    target = _host_header(host, port, -1)
    sock.sendall(request_bytes("CONNECT", target, target, headers, None))
    wire = Wire(sock)
    wire.limit(timeout, monotonic() + timeout)
    answer = read_response(wire, "CONNECT")
    if answer.status != 200:  # noqa: PLR2004
        raise OSError(f"Tunnel connection failed: {answer.status} {answer.reason.strip()}")


class _Connection:
    """One connection: TCP (to the origin or its proxy), a `CONNECT` tunnel when set, then TLS for https.

    The TLS context is asked for only once the TCP connection (and tunnel) stands: a refused or unreachable registry
    fails without the trust store ever being read.
    """

    def __init__(self, scheme: str, host: str, port: int, timeout: float, tls: Callable[[], ssl.SSLContext]) -> None:
        """Prepare; nothing is connected yet."""
        self._scheme, self._host, self._port, self._timeout, self._tls = scheme, host, port, timeout, tls
        self._tunnel: tuple[str, int, dict[str, str]] | None = None
        self._method = ""
        self.sock: Any = None
        self._wire: Wire | None = None

    def set_tunnel(self, host: str, port: int, headers: dict[str, str]) -> None:
        """Ask the proxy for a `CONNECT` tunnel to `host:port` (with `headers`) before TLS."""
        self._tunnel = (host, port, headers)

    def connect(self) -> None:
        """TCP, the tunnel, TLS; a failure closes the socket and raises (`OSError`, `ProtocolError`)."""
        sock: Any = _dial(self._host, self._port, self._timeout)
        try:
            if self._tunnel is not None:
                _open_tunnel(sock, *self._tunnel, self._timeout)
            if self._scheme == "https" and self._tls is speaks_tls:
                check_speaks_tls(
                    sock, None if ":" in self._host or self._host.replace(".", "").isdigit() else self._host
                )
            elif self._scheme == "https":
                sock = self._handshake(sock)
        except BaseException:
            sock.close()
            raise
        self.sock, self._wire = sock, Wire(sock)

    def _handshake(self, raw: _socket.socket) -> Any:  # noqa: ANN401 - an ssl.SSLSocket
        import socket  # noqa: PLC0415 - only for TLS: ssl wraps a socket.socket (ssl imports socket anyway)

        context = self._tls()
        sock = socket.socket(raw.family, raw.type, raw.proto, fileno=raw.detach())
        sock.settimeout(self._timeout)
        server_hostname = self._tunnel[0] if self._tunnel is not None else self._host
        try:
            return context.wrap_socket(sock, server_hostname=server_hostname)
        except BaseException:
            sock.close()
            raise

    def request(
        self, method: str, target: str, body: bytes | None = None, headers: dict[str, str] | None = None
    ) -> None:
        """Send one request (`target` absolute for a plain-HTTP proxy, else origin-form)."""
        assert self.sock is not None  # noqa: S101 - connected by the agent before any request
        if "://" in target:
            host = target.split("/", 3)[2]
        elif self._tunnel is not None:
            host = _host_header(self._tunnel[0], self._tunnel[1], 443)
        else:
            host = _host_header(self._host, self._port, 443 if self._scheme == "https" else 80)
        self._method = method
        self.sock.sendall(request_bytes(method, target, host, headers or {}, body))

    def limit(self, idle: float, until: float) -> None:
        """Bound the reads from now on: each wait at most `idle` seconds, none past `until` (`time.monotonic()`)."""
        assert self._wire is not None  # noqa: S101
        self._wire.limit(idle, until)

    def getresponse(self) -> RawResponse:
        """The response's head; its body stays on the connection for the caller to read."""
        assert self._wire is not None  # noqa: S101
        return read_response(self._wire, self._method)

    def close(self) -> None:
        """Close the socket (again: nothing)."""
        sock, self.sock, self._wire = self.sock, None, None
        if sock is not None:
            sock.close()


def open_connection(scheme: str, host: str, port: int, timeout: float, tls: Callable[[], ssl.SSLContext]) -> Any:  # noqa: ANN401
    """A new, unconnected connection (a test seam: the unit tier answers here without sockets)."""
    return _Connection(scheme, host, port, timeout, tls)


def _split(url: str) -> tuple[str, str, int, str]:
    """Scheme, host (lower case, IPv6 without brackets), port and request target of an absolute URL.

    `urlsplit`'s answer, without importing `urllib.parse` for the URLs the transport builds (`scheme://host[:port]/…`);
    any other form (user info, brackets, escapes, blanks, non-ASCII) is left to `urlsplit`.
    """
    scheme, sep, rest = url.partition("://")
    cut = min((at for at in map(rest.find, "/?#") if at >= 0), default=len(rest))
    netloc = rest[:cut]
    host, colon, port_text = netloc.partition(":")
    unusual = scheme.lower() not in {"http", "https"} or not sep or not host or not url.isascii()
    unusual = unusual or any(c in netloc for c in "@[]%\t\r\n ")
    if unusual or (colon and not (port_text.isdigit() and int(port_text) <= 65535)):  # noqa: PLR2004
        return _split_parsed(url)
    scheme = scheme.lower()
    path, _, query = rest[cut:].partition("#")[0].partition("?")
    target = (path or "/") + (f"?{query}" if query else "")
    return scheme, host.lower(), (int(port_text) if port_text else 0) or (443 if scheme == "https" else 80), target


def _split_parsed(url: str) -> tuple[str, str, int, str]:
    from urllib.parse import urlsplit  # noqa: PLC0415 - only for a URL `_split` does not take apart itself

    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    port = parts.port or (443 if scheme == "https" else 80)
    target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    return scheme, parts.hostname or "", port, target


def _redirect_target(url: str, location: str) -> str:
    """Where a `Location` leads, with unsafe characters escaped as requests does; an unusable one is `ConnectFailed`."""
    from urllib.parse import quote, urljoin, urlsplit  # noqa: PLC0415 - only for a redirect

    try:
        target = quote(urljoin(url, location), safe="!#$%&'()*+,/:;=?@[]~")
        parts = urlsplit(target)
        port = parts.port
    except ValueError:  # an unclosed IPv6 bracket, a port out of range
        target, port, parts = "", -1, urlsplit("")
    if parts.scheme.lower() not in {"http", "https"} or not parts.hostname or port == -1:
        raise ConnectFailed(f"redirected to an unusable location {location!r}")
    return target


def _leaves_origin(url: str, target: str) -> bool:
    """Does a redirect go to another host or port, or from https down to http? Then credentials stay behind."""
    from urllib.parse import urlsplit  # noqa: PLC0415 - only for a redirect

    before, after = urlsplit(url), urlsplit(target)
    downgrade = before.scheme.lower() == "https" and after.scheme.lower() != "https"
    return downgrade or after.netloc.lower() != before.netloc.lower()


def _proxy_parts(proxy: str) -> tuple[str, str, int, dict[str, str]]:
    """A proxy URL's scheme, host, port and the `Proxy-Authorization` header its user info asks for."""
    from urllib.parse import unquote, urlsplit  # noqa: PLC0415 - only through a proxy

    parts = urlsplit(proxy)
    scheme = parts.scheme.lower() or "http"
    headers = {}
    if parts.username is not None:
        headers["Proxy-Authorization"] = basic_auth(unquote(parts.username), unquote(parts.password or ""))
    return scheme, parts.hostname or "", parts.port or (443 if scheme == "https" else 80), headers


def basic_auth(username: str, password: str) -> str:
    """The value of an HTTP Basic header: base64 of `user:password` in UTF-8, as Go's net/http encodes it."""
    pair = f"{username}:{password}".encode("utf-8", "surrogateescape")
    return "Basic " + binascii.b2a_base64(pair, newline=False).decode("ascii")


def _connected(connection: Any) -> Any:  # noqa: ANN401 - a _Connection (or the unit tier's fake)
    """`connection`, connected (TCP, tunnel, TLS); a failure closes it and is `ConnectFailed`."""
    try:
        connection.connect()
    except (OSError, ProtocolError) as exc:
        connection.close()
        raise ConnectFailed(str(exc)) from exc
    return connection


def speaks_tls() -> ssl.SSLContext:
    """No context: as a connection's `tls`, it asks only whether the server speaks TLS (`registry/tlsprobe.py`)."""
    raise AssertionError("a TLS probe makes no context")  # pragma: no cover - never called, compared by identity


class Agent:
    """Pooled connections for one TLS profile; its context is made on the first https connection."""

    def __init__(
        self,
        make_context: Callable[[], ssl.SSLContext],
        user_agent: str,
        pool_size: int,
        probe: Callable[[str, int], bool] = lambda _host, _port: False,
    ) -> None:
        """Prepare; nothing is connected and no TLS context made until needed.

        `probe(host, port)` says whether an https connection there may be a first guess (plain HTTP is allowed there
        and not yet known): then a handshake that verifies nothing asks first whether the server speaks TLS at all,
        so a plain-HTTP server is found out without the trust store being read.
        """
        self._make_context = make_context
        self._probe = probe
        self._context: ssl.SSLContext | None = None
        self._user_agent = user_agent
        self._pool_size = pool_size
        self._lock = allocate_lock()  # threading's Lock, without importing threading
        self._idle: dict[tuple[str, str, int, str], list[Any]] = {}

    def close(self) -> None:
        """Close every idle connection."""
        with self._lock:
            idle, self._idle = self._idle, {}
        for connections in idle.values():
            for connection in connections:
                connection.close()

    def request(
        self,
        method: str,
        url: str,
        headers: dict[str, str],
        *,
        body: bytes | None = None,
        timeouts: tuple[float, float],
        proxy_for: ProxyChooser,
        until: float = float("inf"),
    ) -> Response:
        """Send one request and follow its redirects; the final answer carries the earlier ones in `history`.

        `timeouts` are the connect and read timeouts; `until` (a `time.monotonic()` value: the run's deadline) bounds
        every hop and every read of the answers, its body's included: past it, a head not yet read is `HeaderTimeout`
        and a body not yet read is `BodyBroken`.
        """
        history: list[Response] = []
        sent = {"User-Agent": self._user_agent, "Accept-Encoding": "identity", **headers}  # bytes as stored: no gzip
        while True:
            response = self._exchange(method, url, sent, body, (*timeouts, until), proxy_for)
            location = response.headers.get("Location")
            if response.status_code not in _REDIRECTS or not location or len(history) >= MAX_REDIRECTS:
                response.history = history
                return response
            response.discard()
            history.append(response)
            target = _redirect_target(url, location)
            if _leaves_origin(url, target):
                sent = {k: v for k, v in sent.items() if k.lower() != "authorization"}
            if response.status_code == 303 or (response.status_code in {301, 302} and method == "POST"):  # noqa: PLR2004
                method, body = ("HEAD" if method == "HEAD" else "GET"), None
            url = target

    def _exchange(
        self,
        method: str,
        url: str,
        headers: dict[str, str],
        body: bytes | None,
        bounds: tuple[float, float, float],
        proxy_for: ProxyChooser,
    ) -> Response:
        scheme, host, port, target = _split(url)
        proxy = proxy_for(scheme, host, port) or ""
        key = (scheme, host, port, proxy)
        connect, read, until = bounds
        for _ in range(2):
            left = until - monotonic()
            if left <= 0:
                raise HeaderTimeout("the deadline passed before the request was sent")
            connection, reused = self._checkout(key, (min(connect, left), min(read, left)))
            try:
                if proxy and scheme == "http":
                    connection.request(method, url, body=body, headers={**headers, **_proxy_parts(proxy)[3]})
                else:
                    connection.request(method, target, body=body, headers=headers)
                connection.limit(read, min(monotonic() + read, until))  # the whole head, however it is paced
                raw = connection.getresponse()
                connection.limit(read, until)  # the body: each wait, and all of it within the deadline
            except TimeoutError as exc:
                connection.close()
                raise HeaderTimeout(str(exc)) from None
            except _STALE as exc:
                connection.close()
                if reused:
                    continue  # the server closed an idle connection: once more on a new one
                raise ConnectFailed(str(exc)) from exc
            except (OSError, ProtocolError) as exc:
                connection.close()
                raise ConnectFailed(str(exc)) from exc
            return Response(raw, Request(method, url, headers), self._releaser(key, connection))
        raise ConnectFailed("the connection closed twice")  # pragma: no cover - the loop returns or raises

    def _checkout(self, key: tuple[str, str, int, str], timeouts: tuple[float, float]) -> tuple[Any, bool]:
        with self._lock:
            idle = self._idle.get(key)
            if idle:
                connection = idle.pop()
                connection.sock.settimeout(timeouts[1])
                return connection, True
        return self._connect(key, timeouts), False

    def _connect(self, key: tuple[str, str, int, str], timeouts: tuple[float, float]) -> Any:  # noqa: ANN401
        scheme, host, port, proxy = key
        if proxy:
            proxy_scheme, proxy_host, proxy_port, proxy_headers = _proxy_parts(proxy)
            if proxy_scheme != "http":
                raise ConnectFailed(f"proxy {proxy}: only http:// proxies are supported")
            connection = open_connection(scheme, proxy_host, proxy_port, timeouts[0], self._tls)
            if scheme == "https":
                connection.set_tunnel(host, port, headers=proxy_headers)
        else:
            if scheme == "https" and self._probe(f"[{host}]" if ":" in host else host, port):
                _connected(open_connection(scheme, host, port, timeouts[0], speaks_tls)).close()
            connection = open_connection(scheme, host, port, timeouts[0], self._tls)
        _connected(connection).sock.settimeout(timeouts[1])
        return connection

    def _tls(self) -> ssl.SSLContext:
        with self._lock:
            if self._context is None:
                self._context = self._make_context()
            return self._context

    def _releaser(self, key: tuple[str, str, int, str], connection: Any) -> Callable[[bool], None]:  # noqa: ANN401
        return lambda reusable: self._checkin(key, connection, reusable)

    def _checkin(self, key: tuple[str, str, int, str], connection: Any, reusable: bool) -> None:  # noqa: ANN401
        if reusable:
            with self._lock:
                idle = self._idle.setdefault(key, [])
                if len(idle) < self._pool_size:
                    idle.append(connection)
                    return
        connection.close()
