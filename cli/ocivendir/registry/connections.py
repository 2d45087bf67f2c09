"""Owns: one request to a registry and its redirects, through requests — and the answer, read within bounds.

Each hop goes out through requests' adapter on `registry/pools.py`'s bounded connections (pooled per origin and proxy;
an http URL through a proxy in absolute form, an https one through a `CONNECT` tunnel; a reused connection the server
has meanwhile closed is retried once on a new one). Redirects are followed here, not by requests: each hop is bounded
by the caller's `until` (the run's deadline), the `Authorization` header is dropped when the host or port changes or
https goes down to http, a redirect's body is read only up to 2 KiB (Go's maxBodySlurpSize) and a longer one closes
its connection unread. An answer whose body framing `registry/pools.py` refuses (a `Content-Length` that is not one
number, a transfer coding other than `chunked`) is not handed on. A body read at once stops at `MAX_BODY_BYTES`.
What failed is told apart for the transport: no connection (`ConnectFailed`), no answer in time (`HeaderTimeout`), a
body cut short (`BodyBroken`).

requests and urllib3 are imported with the first request: a run that makes none (a warm digest-pinned sync) loads
neither.
"""

from __future__ import annotations

import binascii
import threading
from collections.abc import Callable, Iterator
from time import monotonic

from ocivendir import jsondoc

TYPE_CHECKING = False
if TYPE_CHECKING:
    import ssl
    from typing import Any

    import requests
    from requests.structures import CaseInsensitiveDict

    from ocivendir.registry.pools import Adapter
    from ocivendir.registry.watchdog import Alarm

__all__ = [
    "Agent",
    "BodyBroken",
    "BodyTooLarge",
    "BodyWouldLeave",
    "ConnectFailed",
    "HeaderTimeout",
    "Request",
    "Response",
    "basic_auth",
]

MAX_REDIRECTS = 30
MAX_BODY_BYTES = 32 << 20  # a body read at once (token, error, tag list page); manifests have their own, smaller cap
REDIRECT_DRAIN_BYTES = 2 << 10  # Go's maxBodySlurpSize: a redirect's body longer than this closes the connection
_REDIRECTS = frozenset({301, 302, 303, 307, 308})
ProxyChooser = Callable[[str, str, int], "str | None"]


class ConnectFailed(Exception):
    """No answer could be had: the connection (TCP, TLS, proxy tunnel) failed, or broke before the headers."""


class HeaderTimeout(Exception):
    """The request was sent but no response headers came within the read timeout."""


class BodyWouldLeave(Exception):
    """A redirect that keeps the request's body leads off its origin: the body, which may be a credential, stays."""


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


def _root(exc: BaseException) -> BaseException:
    """The innermost cause of a requests or urllib3 error (what a message should name)."""
    seen: set[int] = set()
    while id(exc) not in seen:
        seen.add(id(exc))
        nested = [a for a in exc.args if isinstance(a, BaseException)]
        inner = nested[0] if nested else (exc.__cause__ or getattr(exc, "reason", None) or exc.__context__)
        if not isinstance(inner, BaseException):
            break
        exc = inner
    return exc


def _why(exc: BaseException) -> str:
    root = _root(exc)
    expected = getattr(root, "expected", None)  # `http.client`'s and urllib3's IncompleteRead: the bytes not come
    if isinstance(expected, int):
        return f"the body was cut short: {expected} of its Content-Length bytes never came"
    return str(root) or type(root).__name__


class Response:
    """An answer: status, headers, the body read at once or streamed, and the redirects that led to it."""

    def __init__(self, answer: requests.Response, request: Request, alarm: Alarm | None = None) -> None:
        """Wrap requests' streamed `answer`; `alarm` bounds its body's reads by the deadline until it is done."""
        self.raw = answer.raw
        self.request = request
        self.url = request.url
        self.status_code = answer.status_code
        self.reason: str = answer.reason or ""
        self.headers: CaseInsensitiveDict[str] = answer.headers
        self.history: list[Response] = []
        self._alarm = alarm
        self._open = True
        self._content: bytes | None = None

    def iter_content(self, chunk_size: int) -> Iterator[bytes]:
        """The body in chunks, as the registry sent it; a dropped connection or a body cut short is `BodyBroken`."""
        if self._content is not None:
            yield self._content
            return
        from http.client import HTTPException  # noqa: PLC0415 - loaded with urllib3 already

        from urllib3.exceptions import HTTPError  # noqa: PLC0415 - likewise

        try:
            yield from self.raw.stream(chunk_size, decode_content=False)
        except (OSError, HTTPError, HTTPException) as exc:
            self._done(reusable=False)
            raise BodyBroken(_why(exc)) from None
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
        length = self.raw.length_remaining
        if length is None or length > REDIRECT_DRAIN_BYTES:
            self._done(reusable=False)
            return
        try:
            self.content  # noqa: B018 - at most 2 KiB
        except BodyBroken:
            return
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
        """The `Link` header by relation: `{"next": {"url": …, "rel": "next"}}` (RFC 8288, requests' reading)."""
        from requests.utils import parse_header_links  # noqa: PLC0415 - loaded with requests already

        header = self.headers.get("Link") or ""
        return {link.get("rel") or link["url"]: link for link in parse_header_links(header)}

    def close(self) -> None:
        """Done with the answer: an unread body closes the connection, a read (or empty) one returns it to the pool."""
        done = self._content is not None or self.raw.length_remaining == 0
        if done and self._content is None:
            try:
                self.raw.read(decode_content=False)  # nothing is left: `http.client` marks the answer finished
            except Exception:  # noqa: BLE001 - a connection that fails here is dropped, not reused
                done = False
        self._done(reusable=done)

    def _done(self, *, reusable: bool) -> None:
        alarm, self._alarm = self._alarm, None
        if alarm is not None:
            alarm.cancel()
        if self._open:
            self._open = False
            if not reusable:
                self.raw.close()  # with its connection: the pool opens a new one next time
            self.raw.release_conn()


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


def _leaves_origin(url: str, target: str) -> tuple[bool, str]:
    """Does a redirect leave the origin (another host or port, user info, https down to http)? And the bare target.

    Leaving it, credentials stay behind. User info is never sent on (requests would make it a Basic header).
    """
    from urllib.parse import urlsplit  # noqa: PLC0415 - only for a redirect

    before, after = urlsplit(url), urlsplit(target)
    downgrade = before.scheme.lower() == "https" and after.scheme.lower() != "https"
    bare = after._replace(netloc=after.netloc.rpartition("@")[2]).geturl()
    return downgrade or after.netloc.lower() != before.netloc.lower(), bare


def basic_auth(username: str, password: str) -> str:
    """The value of an HTTP Basic header: base64 of `user:password` in UTF-8, as Go's net/http encodes it."""
    pair = f"{username}:{password}".encode("utf-8", "surrogateescape")
    return "Basic " + binascii.b2a_base64(pair, newline=False).decode("ascii")


def _stale(exc: BaseException) -> bool:
    """Did a reused connection turn out closed before any answer (the server dropped it while idle)?"""
    from http.client import RemoteDisconnected  # noqa: PLC0415 - loaded with urllib3 already

    return isinstance(_root(exc), RemoteDisconnected | BrokenPipeError | ConnectionResetError | ConnectionAbortedError)


class Agent:
    """Pooled connections for one TLS profile; its context is made on the first https connection."""

    def __init__(
        self,
        make_context: Callable[[], ssl.SSLContext],
        user_agent: str,
        pool_size: int,
        probe: Callable[[str, int], bool] = lambda _host, _port: False,
        adapter: Adapter | None = None,
    ) -> None:
        """Prepare; nothing is connected, no TLS context made and requests not imported until needed.

        `probe(host, port)` says whether an https connection there may be a first guess (plain HTTP is allowed there
        and not yet known): then a handshake that verifies nothing asks first whether the server speaks TLS at all,
        so a plain-HTTP server is found out without the trust store being read. `adapter` is one an earlier call in
        this process kept (`registry/keptpools.py`), with its idle connections.
        """
        self._make_context = make_context
        self._probe = probe
        self._context: ssl.SSLContext | None = None
        self._user_agent = user_agent
        self._pool_size = pool_size
        self._lock = threading.Lock()
        self._adapter: Adapter | None = adapter

    def close(self) -> None:
        """Close every pooled connection."""
        adapter = self.detach()
        if adapter is not None:
            adapter.close()

    def detach(self) -> Adapter | None:
        """The adapter with the pooled connections, if one was made, no longer this agent's (nothing is closed)."""
        with self._lock:
            adapter, self._adapter = self._adapter, None
        return adapter

    def request(
        self,
        method: str,
        url: str,
        headers: dict[str, str],
        *,
        body: str | None = None,
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
            leaves, target = _leaves_origin(url, _redirect_target(url, location))
            if leaves:
                sent = {k: v for k, v in sent.items() if k.lower() != "authorization"}
            if response.status_code == 303 or (response.status_code in {301, 302} and method == "POST"):  # noqa: PLR2004
                method, body = ("HEAD" if method == "HEAD" else "GET"), None
            if leaves and body is not None:  # a 307/308 would carry the form (a token request's credential) along
                raise BodyWouldLeave(target)
            url = target

    def _exchange(
        self,
        method: str,
        url: str,
        headers: dict[str, str],
        body: str | None,
        bounds: tuple[float, float, float],
        proxy_for: ProxyChooser,
    ) -> Response:
        import requests  # noqa: PLC0415 - the first request loads the HTTP stack

        from ocivendir.registry.pools import EXCHANGE  # noqa: PLC0415 - likewise

        adapter = self._pool()
        connect, read, until = bounds
        for _ in range(2):
            left = until - monotonic()
            if left <= 0:
                raise HeaderTimeout("the deadline passed before the request was sent")
            try:
                prepared = requests.Request(method, url, headers=headers, data=body).prepare()
                proxies = self._proxies(prepared.url or url, proxy_for)
                EXCHANGE.begin((min(connect, left), read, until), self._tls, self._probe)
                answer = adapter.send(prepared, stream=True, timeout=(min(connect, left), min(read, left)),
                                      proxies=proxies)  # fmt: skip
            except requests.exceptions.ReadTimeout as exc:
                raise HeaderTimeout(_why(exc)) from None
            except (requests.RequestException, OSError, ValueError) as exc:
                if EXCHANGE.fired:
                    raise HeaderTimeout("timed out") from None
                if EXCHANGE.reused and _stale(exc):
                    continue  # the server closed an idle connection: once more on a new one
                raise ConnectFailed(_why(exc)) from exc
            response = Response(answer, Request(method, url, headers), EXCHANGE.body)
            if EXCHANGE.refused is not None:  # its connection is spent already (`registry/pools.framing`)
                response.close()
                raise ConnectFailed(EXCHANGE.refused)
            return response
        raise ConnectFailed("the connection closed twice")  # pragma: no cover - the loop returns or raises

    @staticmethod
    def _proxies(url: str, proxy_for: ProxyChooser) -> dict[str, str]:
        from urllib.parse import urlsplit  # noqa: PLC0415 - loaded with requests already

        parts = urlsplit(url)
        scheme = parts.scheme.lower()
        proxy = proxy_for(scheme, parts.hostname or "", parts.port or (443 if scheme == "https" else 80))
        return {scheme: proxy} if proxy else {}

    def _pool(self) -> Adapter:
        with self._lock:
            if self._adapter is None:
                from ocivendir.registry.pools import Adapter  # noqa: PLC0415 - the first request loads the HTTP stack

                self._adapter = Adapter(self._pool_size)
            return self._adapter

    def _tls(self) -> ssl.SSLContext:
        with self._lock:
            if self._context is None:
                self._context = self._make_context()
            return self._context
