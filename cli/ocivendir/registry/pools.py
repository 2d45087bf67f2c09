"""Owns: urllib3's connections with ocivendir's bounds, and the requests adapter that pools them.

requests' `HTTPAdapter` keeps a urllib3 pool per origin (and proxy, `CONNECT` tunnels included); its connections here
are urllib3's with four things added, read from `EXCHANGE` (what the request being sent on this thread allows):
- the whole connect (TCP, tunnel, TLS handshake) within the connect timeout, and a response head within the read
  timeout of its request being sent, however slowly it trickles: `registry/watchdog.py` shuts the socket down at the
  deadline, since urllib3's timeouts bound each read alone; the body is bounded by the run's deadline the same way;
- the TLS context asked for only once the TCP connection stands (a refused registry never reads the trust store),
  after a bare ClientHello (`registry/tlsprobe.py`) where https is only a first guess (plain HTTP allowed there), so a
  plain-HTTP registry never reads it either; trust is that context alone, never certifi's bundle;
- whether the request went out on a reused connection (the caller retries a stale one once);
- the body's framing, judged here alone (`framing`): a body framed some way other than one `Content-Length` or
  `chunked` is refused (`http.client` and urllib3 would read it some other way; the agent raises on `EXCHANGE.refused`),
  and a connection is not reused after an answer that leaves it in doubt: an HTTP/1.0 answer with `Transfer-Encoding`
  (RFC 9112 §6.1: close after it; `http.client` keeps a keep-alive one open), `chunked` beside a `Content-Length`
  (§6.3), a `101`, or one whose framing was refused.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from queue import Empty, Full, LifoQueue
from time import monotonic
from typing import TYPE_CHECKING, Any

import urllib3
from requests.adapters import HTTPAdapter
from urllib3.connection import HTTPConnection, HTTPSConnection
from urllib3.connectionpool import HTTPConnectionPool, HTTPSConnectionPool
from urllib3.exceptions import InsecureRequestWarning

from ocivendir.registry.tlsprobe import check_speaks_tls
from ocivendir.registry.watchdog import WATCHDOG, Alarm

if TYPE_CHECKING:
    import socket
    import ssl

    from urllib3.response import HTTPResponse

__all__ = ["EXCHANGE", "Adapter", "framing"]

_INF = float("inf")
_NO_BODY = frozenset({204, 304})


def _never(_host: str, _port: int) -> bool:
    return False


def _no_context() -> ssl.SSLContext:
    raise AssertionError("no TLS context was given for this exchange")  # pragma: no cover - the agent always sets one


class Exchange(threading.local):
    """What the request being sent on this thread allows, and what became of it (set by `Agent`, read here)."""

    connect: float = 10.0  # seconds for the whole connect
    head: float = 30.0  # seconds for the whole response head
    until: float = _INF  # `time.monotonic()` past which nothing is read (the run's deadline)
    tls: Callable[[], ssl.SSLContext] = staticmethod(_no_context)
    probe: Callable[[str, int], bool] = staticmethod(_never)
    reused: bool = False  # the request went out on a connection that had served one before
    fired: bool = False  # the head's deadline passed: its socket was shut down
    body: Alarm | None = None  # the alarm guarding the answer's body until the deadline
    refused: str | None = None  # why the answer's body framing is refused (`framing`), if it is

    def begin(
        self,
        bounds: tuple[float, float, float],
        tls: Callable[[], ssl.SSLContext],
        probe: Callable[[str, int], bool],
    ) -> None:
        """A new request: its connect and head timeouts and deadline, and its agent's TLS context and probe."""
        self.connect, self.head, self.until = bounds
        self.tls, self.probe = tls, probe
        self.reused = self.fired = False
        self.body = self.refused = None


EXCHANGE = Exchange()


def framing(headers: Mapping[str, str], *, method: str, status: int, version: int) -> tuple[str | None, bool]:
    """Why an answer's body framing is refused, if it is, and whether its connection may not be reused after it.

    A body is read when it is framed by one `Content-Length` or by `chunked`, or when the answer has none.
    """
    codings = headers.get("Transfer-Encoding")
    doubt = codings is not None and (version == 10 or "Content-Length" in headers)  # noqa: PLR2004
    if method == "HEAD" or status in _NO_BODY or status < 200:  # noqa: PLR2004
        return None, doubt or status == 101  # noqa: PLR2004
    if codings is not None and codings.strip().lower() != "chunked":
        return f"an unsupported Transfer-Encoding: {codings!r}", True
    length = headers.get("Content-Length")
    if codings is None and length is not None:
        values = {value.strip() for value in length.split(",")}
        value = values.pop()
        if values or not value.isascii() or not value.isdigit() or len(value) > 18:  # noqa: PLR2004 - past 10^18
            return f"an invalid or conflicting Content-Length: {length!r}", True
    return None, doubt


def _arm(sock: socket.socket, when: float) -> Alarm | None:
    return WATCHDOG.arm(sock, when) if when < _INF else None


class _Bounded(HTTPConnection):
    """urllib3's connection, bounded by the exchange's deadlines and told apart when reused."""

    _fresh = False  # connected and not yet used
    _spent = False  # its last answer left it unusable: replaced before reuse
    _last_method = "GET"  # the method of the request it sent last
    _connecting: Alarm | None = None  # bounds the connect in progress
    idle_since = -_INF  # `time.monotonic()` when it went back to its pool (`Adapter.keep_idle` closes it if too long)

    def _new_conn(self) -> socket.socket:
        sock = super()._new_conn()
        self._connecting = _arm(sock, min(monotonic() + EXCHANGE.connect, EXCHANGE.until))
        return sock

    def connect(self) -> None:
        """TCP, tunnel, TLS, all within the connect timeout."""
        self._connecting = None
        try:
            super().connect()
        except BaseException:
            if self._connecting is not None and self._connecting.cancel():
                raise TimeoutError("timed out") from None
            raise
        if self._connecting is not None and self._connecting.cancel():
            raise TimeoutError("timed out")
        self._fresh, self._spent = True, False

    @property
    def is_connected(self) -> bool:
        """Open and usable: a spent connection counts as dropped, so the pool replaces it."""
        return not self._spent and super().is_connected

    def request(self, method: str, url: str, body: Any = None, headers: Any = None, **options: Any) -> None:  # noqa: ANN401 - urllib3's signature
        """Send; note whether this connection had served a request before."""
        self._last_method = method
        EXCHANGE.reused = self.sock is not None and not self._fresh
        try:
            super().request(method, url, body=body, headers=headers, **options)  # a plain one connects in here
        finally:
            self._fresh = False

    def getresponse(self) -> HTTPResponse:  # type: ignore[override] # urllib3's own override
        """The head within the head timeout; the body's reads then within the deadline."""
        sock = self.sock  # `http.client` lets go of it on a closing answer, whose body still comes through it
        alarm = _arm(sock, min(monotonic() + EXCHANGE.head, EXCHANGE.until))
        try:
            response = super().getresponse()
        finally:
            EXCHANGE.fired = alarm is not None and alarm.cancel()
        EXCHANGE.refused, self._spent = framing(
            response.headers, method=self._last_method, status=response.status, version=response.version
        )
        EXCHANGE.body = _arm(sock, EXCHANGE.until)
        return response


class _TLSConnection(_Bounded, HTTPSConnection):
    def _new_conn(self) -> socket.socket:
        """TCP (after a ClientHello probe where https is only a guess), then the agent's TLS context."""
        if self._tunnel_host is None and EXCHANGE.probe(self.host, self.port or 443):
            probe = HTTPConnection._new_conn(self)  # noqa: SLF001 - urllib3's own dial, unbounded by the alarm
            try:
                plain_name = ":" in self.host or self.host.replace(".", "").isdigit()
                check_speaks_tls(probe, None if plain_name else self.host)
            finally:
                probe.close()
        sock = super()._new_conn()
        try:
            self.ssl_context = EXCHANGE.tls()
        except BaseException:
            sock.close()
            raise
        self.cert_reqs = self.ssl_context.verify_mode  # urllib3 sets the context's mode from this
        return sock


class _PlainPool(HTTPConnectionPool):
    ConnectionCls = _Bounded

    def _put_conn(self, conn: Any) -> None:  # noqa: ANN401 - urllib3's protocol lives in a private module
        """Back in the pool, idle from now (None: the slot of one that was closed)."""
        if conn is not None:
            conn.idle_since = monotonic()
        super()._put_conn(conn)


class _TLSPool(_PlainPool, HTTPSConnectionPool):
    """urllib3's https pool, its connections timed as `_PlainPool`'s."""

    ConnectionCls = _TLSConnection

    def _get_conn(self, timeout: float | None = None) -> Any:  # noqa: ANN401 - urllib3's protocol lives in a private module
        """A pooled connection, used again only if it was made with the TLS context this exchange's agent has.

        A server worker keeps connections between calls (`registry/keptpools.py`); a later call with other trust (its
        own CAs, `SSL_CERT_FILE`, client certificate) gets another context, and a connection of its own.
        """
        conn = super()._get_conn(timeout)
        if getattr(conn, "sock", None) is not None and getattr(conn, "ssl_context", None) is not EXCHANGE.tls():
            conn.close()  # urllib3 connects it anew, with the context `_TLSConnection` asks the exchange for
        return conn


_POOLS = {"http": _PlainPool, "https": _TLSPool}


def _manager_pools(manager: Any) -> list[HTTPConnectionPool]:  # noqa: ANN401 - a urllib3 PoolManager or ProxyManager
    """A pool manager's pools (its `RecentlyUsedContainer` is not iterable)."""
    container = manager.pools
    return [pool for key in container.keys() if (pool := container.get(key)) is not None]  # noqa: SIM118


def _drain(idle: LifoQueue[Any]) -> list[Any]:
    """Everything a pool holds (its connections, and None for each free slot), most recently returned first."""
    taken = []
    while True:
        try:
            taken.append(idle.get_nowait())
        except Empty:
            return taken


def _refill(idle: LifoQueue[Any], taken: list[Any]) -> None:
    """Put back what `_drain` took, in the order it was in (each connection idle since it was)."""
    for conn in reversed(taken):
        try:
            idle.put_nowait(conn)
        except Full:  # a request of an interrupted call returned its connection meanwhile: no room left
            if conn is not None:
                conn.close()


class Adapter(HTTPAdapter):
    """requests' adapter on the bounded connections; no retries of its own (the client's policy decides)."""

    def __init__(self, pool_size: int) -> None:
        """Keep up to `pool_size` idle connections per origin."""
        super().__init__(pool_connections=pool_size, pool_maxsize=pool_size, max_retries=0)
        self._proxies_used: dict[str, None] = {}  # the proxies asked for, least recently first (`keep_idle`)
        urllib3.disable_warnings(InsecureRequestWarning)  # skip-verify is a registry's setting: no warning per request

    def init_poolmanager(self, *args: Any, **kwargs: Any) -> None:  # noqa: ANN401 - requests' signature
        """The pool manager, making the bounded connections."""
        super().init_poolmanager(*args, **kwargs)
        self.poolmanager.pool_classes_by_scheme = _POOLS

    def proxy_manager_for(self, proxy: str, **kwargs: Any) -> Any:  # noqa: ANN401 - requests' signature
        """The proxy manager (absolute form for http, `CONNECT` for https), making the bounded connections."""
        manager = super().proxy_manager_for(proxy, **kwargs)
        manager.pool_classes_by_scheme = _POOLS
        self._proxies_used.pop(proxy, None)
        self._proxies_used[proxy] = None
        return manager

    def close(self) -> None:
        """Close every pool's idle connections now; one still in use is closed when its answer is done with.

        requests' `close` only empties the pool managers: urllib3 2 no longer closes the pools they drop, so their
        sockets stayed open until the collector freed them (a reused server worker saw a descriptor left behind).
        """
        pools = [pool for _, pool in self._pools()]
        super().close()
        for pool in pools:
            pool.close()

    def keep_idle(self, per_origin: int, proxies: int, idle_since: float, most: int) -> list[tuple[int, float]]:
        """Close the idle connections beyond the `per_origin` most recently used of each pool; (descriptor, idle since).

        A connection idle since before `idle_since` (a `time.monotonic()` value) is closed too, and every one past the
        `most` kept in all.

        Connections through an https proxy are all closed (their TLS to the proxy trusts what urllib3's default
        context read from the environment of the call that made them), and so is any the server has dropped. Only
        the `proxies` most recently used proxies keep their managers: requests keeps one per proxy URL, credentials
        included, so callers each with a proxy of their own would otherwise add a connection (and their proxy
        credentials) per call. Called between calls (`registry/keptpools.py`), when no request is in flight.
        """
        self._forget_proxies(proxies)
        kept: list[tuple[int, float]] = []
        for through_tls, pool in self._pools():
            if pool.pool is None:
                continue
            taken = _drain(pool.pool)  # most recently returned first (a LIFO queue)
            left = 0 if through_tls else per_origin
            for conn in taken:
                if conn is None or conn.sock is None:
                    continue
                if left and len(kept) < most and conn.idle_since >= idle_since and conn.is_connected:
                    left -= 1
                    kept.append((conn.sock.fileno(), conn.idle_since))
                else:
                    conn.close()
            _refill(pool.pool, taken)
        return kept

    def _forget_proxies(self, kept: int) -> None:
        """Drop the managers of all but the `kept` most recently used proxies, closing their connections."""
        used = list(self._proxies_used)
        for proxy in used[: max(0, len(used) - kept)]:
            del self._proxies_used[proxy]
            manager = self.proxy_manager.pop(proxy, None)
            if manager is not None:
                pools = _manager_pools(manager)
                manager.clear()
                for pool in pools:
                    pool.close()

    def _pools(self) -> list[tuple[bool, HTTPConnectionPool]]:
        """Every pool of the adapter, direct and per proxy, each with whether it goes through an https proxy."""
        managers = [(False, self.poolmanager)]
        managers += [(proxy.lower().startswith("https:"), manager) for proxy, manager in self.proxy_manager.items()]
        return [(through_tls, pool) for through_tls, manager in managers for pool in _manager_pools(manager)]

    def cert_verify(self, conn: Any, url: str, verify: Any, cert: Any) -> None:  # noqa: ANN401 - requests' signature
        """Trust is the agent's TLS context (Go's roots plus the added CAs): certifi's bundle is never added."""
