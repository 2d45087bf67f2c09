"""Owns: HTTP transport to registries — which connection agent, scheme and proxy a request takes, and its counting.

Agents (`registry/connections.py`: requests' pooled connections, `registry/pools.py`) per TLS profile, TLS contexts
(system CAs plus added ones, or none for skip-verify registries) made only for https, proxies from Settings,
https-then-http for the hosts where plain HTTP is allowed with the scheme that worked remembered, the run's network
deadline, and the request counter every result reports (design §4.1). It knows hosts and paths, not the distribution
protocol: `registry/sender.py` and `registry/client.py` build on it.
"""

from __future__ import annotations

import errno
import os
import socket
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from threading import Lock

from ocivendir import __version__, diag
from ocivendir.errors import CacheUnwritable, RegistryError, ResponseTimeout, TLSVerifyError, Transient, os_reason
from ocivendir.fs.paths import pure
from ocivendir.oci.reference import is_plain_http_host
from ocivendir.registry import keptpools
from ocivendir.registry.connections import (
    Agent,
    BodyBroken,
    BodyWouldLeave,
    ConnectFailed,
    HeaderTimeout,
    Response,
    basic_auth,
)
from ocivendir.registry.mirrors import TLSFiles
from ocivendir.registry.proxy import ProxyConfig
from ocivendir.registry.retry import Deadline, RetryPolicy
from ocivendir.results import RequestStats

TYPE_CHECKING = False
if TYPE_CHECKING:
    import ssl
    from typing import Any, Protocol

    from ocivendir.fs.fileid import Identity
    from ocivendir.registry.tlscontexts import Made

    class SchemeMemory(Protocol):
        """Where the scheme that worked for a host is remembered across runs (the cache index)."""

        def scheme_for(self, host: str) -> str | None:
            """The remembered scheme, if any."""

        def remember_scheme(self, host: str, scheme: str) -> None:
            """Record the scheme that worked."""


__all__ = [
    "BodyBroken",
    "ClientOptions",
    "ConnectFailure",
    "Response",
    "ResponseTimeout",
    "Route",
    "Transport",
    "basic_auth",
]

_log = diag.logger("ocivendir.registry")


_http_log = diag.logger("ocivendir.http")
_USER_AGENT = f"ocivendir/{__version__}"
_SECRET_HEADERS = frozenset({"authorization", "proxy-authorization", "cookie", "set-cookie"})


def _log_exchange(response: Response) -> None:
    """With --debug: each request and response line with its headers, as imgpkg's --debug shows them.

    Credentials are redacted and bodies never logged.
    """
    if not _http_log.enabled(diag.DEBUG):
        return
    for each in (*response.history, response):
        request = each.request
        _http_log.debug("--> %s %s\n%s", request.method, request.url, _headers(request.headers))
        _http_log.debug("<-- %s %s %s\n%s", each.status_code, each.reason, each.url, _headers(each.headers))


def _headers(headers: Any) -> str:  # noqa: ANN401 - a dict or requests' case-insensitive one
    lines = []
    for name, value in sorted(headers.items(), key=lambda item: str(item[0]).lower()):
        shown = "<redacted>" if str(name).lower() in _SECRET_HEADERS else value
        lines.append(f"{name}: {shown}")
    return "\n".join(lines)


@dataclass(frozen=True, kw_only=True)
class ClientOptions:
    """Everything the client needs from settings; nothing here is read from the environment."""

    insecure_all: bool = False
    insecure_hosts: frozenset[str] = frozenset()
    verify_certs: bool = True
    skip_verify_hosts: frozenset[str] = frozenset()
    ca_files: tuple[str | os.PathLike[str], ...] = ()
    ssl_cert_file: str | None = None
    ssl_cert_dir: str | None = None
    proxy: ProxyConfig = field(default_factory=ProxyConfig)
    connect_timeout: float = 10.0
    read_timeout: float = 30.0
    timeout_seconds: float = 300.0
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    pool_size: int = 8
    endpoint_concurrency: int = 4


@dataclass(frozen=True, kw_only=True)
class Route:
    """Where a request goes and how it is counted.

    A host, TLS as configured for `registry` (plus a registries.yaml `tls` entry), a fixed scheme (a mirror URL's)
    or None for the usual choice, and the endpoint name the counters use.
    """

    registry: str
    host: str
    scheme: str | None = None
    tls: TLSFiles | None = None
    label: str = ""


class ConnectFailure(Exception):
    """No scheme could open a connection (or the connection broke before an answer).

    `refused` when every scheme tried was refused outright: nothing listens there, and trying again within the same
    run will not change that (Go's vendir fails at once too), so the client does not retry it.
    """

    def __init__(self, message: str, *, refused: bool = False) -> None:
        """The failures joined, and whether all were refusals."""
        super().__init__(message)
        self.refused = refused


class _Stats:
    """Thread-safe request counters."""

    def __init__(self) -> None:
        self._lock = Lock()
        self.total = 0
        self.auth = 0
        self.connect_errors = 0
        self.by_method: Counter[str] = Counter()
        self.by_status: Counter[str] = Counter()
        self.by_endpoint: Counter[str] = Counter()
        self.served_by: dict[str, str] = {}
        self.bytes_received = 0

    def request(self, method: str, status: int, *, auth: bool = False, count: int = 1, endpoint: str = "") -> None:
        with self._lock:
            self.total += count
            self.by_method[method] += count
            self.by_status[str(status)] += count
            if endpoint:
                self.by_endpoint[endpoint] += count
            if auth:
                self.auth += count

    def served(self, thing: str, endpoint: str) -> None:
        """Record which endpoint answered for an object (a manifest, blob, tag or tag list)."""
        with self._lock:
            self.served_by[thing] = endpoint

    def challenge(self) -> None:
        """A request answered with a 401 challenge was already counted; it is an auth request too."""
        with self._lock:
            self.auth += 1

    def connect_error(self) -> None:
        with self._lock:
            self.connect_errors += 1

    def received(self, size: int) -> None:
        with self._lock:
            self.bytes_received += size

    def snapshot(self) -> RequestStats:
        with self._lock:
            return RequestStats(
                total=self.total,
                auth=self.auth,
                connect_errors=self.connect_errors,
                by_method=dict(sorted(self.by_method.items())),
                by_status=dict(sorted(self.by_status.items())),
                bytes_received=self.bytes_received,
                by_endpoint=dict(sorted(self.by_endpoint.items())),
                served_by=dict(sorted(self.served_by.items())),
            )


def _trust(options: ClientOptions, *, verify: bool, tls: TLSFiles | None) -> tuple[object, ...]:
    """What a call asks of TLS: the key of its context (`registry/tlscontexts.py`) and of its kept connections."""
    named = tuple(os.fspath(extra) for extra in options.ca_files)
    return (verify, options.ssl_cert_file, options.ssl_cert_dir, named, tls)


def _ssl_context(options: ClientOptions, *, verify: bool, tls: TLSFiles | None = None) -> ssl.SSLContext:
    """The context for this trust: one this process made from the same files, unchanged since, else a new one."""
    from ocivendir.registry import tlscontexts  # noqa: PLC0415 - only for https: a plain-HTTP registry never loads TLS

    key = _trust(options, verify=verify, tls=tls)
    return tlscontexts.kept(key, lambda: _new_ssl_context(options, verify=verify, tls=tls))


def _new_ssl_context(options: ClientOptions, *, verify: bool, tls: TLSFiles | None) -> Made:
    import ssl  # noqa: PLC0415 - only for https

    from ocivendir.registry import truststore  # noqa: PLC0415 - likewise
    from ocivendir.registry.tlscontexts import Made  # noqa: PLC0415 - likewise

    consulted: list[tuple[str, Identity | None]] = []
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)  # no OpenSSL default paths: Go's list alone (truststore)
    if tls is not None and tls.cert_file:
        consulted += [(path, truststore.path_identity(path)) for path in (tls.cert_file, tls.key_file or tls.cert_file)]
        try:
            context.load_cert_chain(tls.cert_file, tls.key_file)
        except (OSError, ssl.SSLError) as exc:
            raise TLSVerifyError(f"Loading client certificate '{tls.cert_file}': {_file_reason(exc)}") from None
    if not verify:
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
        return Made(context, tuple(consulted))
    store = truststore.load_into(context, options.ssl_cert_file, options.ssl_cert_dir)
    consulted += store.consulted
    for extra in (*options.ca_files, *((pure(tls.ca_file),) if tls is not None and tls.ca_file else ())):
        consulted.append((os.fspath(extra), truststore.path_identity(extra)))
        try:
            context.load_verify_locations(cafile=str(extra))
        except (OSError, ssl.SSLError) as exc:
            raise TLSVerifyError(f"Loading CA certificate '{extra}': {_file_reason(exc)}") from None
    return Made(context, tuple(consulted), store)


def _file_reason(exc: OSError) -> str:
    """Why a certificate or key file could not be loaded: OpenSSL's words, or the file's error without `[Errno N]`."""
    import ssl  # noqa: PLC0415 - loaded already: the caller holds an SSLContext

    return str(exc) if isinstance(exc, ssl.SSLError) else os_reason(exc)


def _never(_host: str, _port: int) -> bool:
    """No probe: a client certificate must be offered in the one handshake there is."""
    return False


def _tls_message(exc: Exception, url: str) -> str | None:
    text = str(exc)
    if "CERTIFICATE_VERIFY_FAILED" not in text:
        return None
    if "unable to get local issuer" in text or "self-signed" in text or "self signed" in text:
        reason = "x509: certificate signed by unknown authority"
    elif "Hostname mismatch" in text or "doesn't match" in text:
        reason = "x509: certificate is valid for another host name"
    elif "expired" in text:
        reason = "x509: certificate has expired or is not yet valid"
    else:
        reason = f"x509: {text}"
    return f'Get "{url}": tls: failed to verify certificate: {reason}'


_ERRNO_TEXT = {
    errno.ECONNREFUSED: "connect: connection refused",
    errno.ECONNRESET: "read: connection reset by peer",
    errno.EHOSTUNREACH: "connect: no route to host",
    errno.ENETUNREACH: "connect: network is unreachable",
    errno.ETIMEDOUT: "i/o timeout",
}


def _reason(exc: BaseException) -> str:
    """The root cause of a connection failure in a short, Go-like form."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, TimeoutError):
            return "i/o timeout"
        if isinstance(current, socket.gaierror):
            return "dial tcp: lookup failed: no such host"
        if type(current).__module__ == "ssl" and hasattr(current, "reason"):
            return f"tls: {current.reason or current}".lower()
        if isinstance(current, OSError) and current.errno in _ERRNO_TEXT:
            return _ERRNO_TEXT[current.errno]
        nested = [a for a in getattr(current, "args", ()) if isinstance(a, BaseException)]
        current = (
            nested[0] if nested else (current.__cause__ or current.__context__ or getattr(current, "reason", None))
        )
    return str(exc)


def iter_body(response: Response, chunk_size: int) -> Iterator[bytes]:
    """A streamed body's chunks; a dropped connection is `BodyBroken`."""
    return response.iter_content(chunk_size)


class Transport:
    """One run's HTTP to registries: agents per TLS mode, scheme choice and memory, proxies, counting."""

    def __init__(self, options: ClientOptions, schemes: SchemeMemory | None = None) -> None:
        """Prepare; no agent or connection is made until the first request."""
        self._options = options
        self._schemes = schemes
        self.deadline = Deadline(options.timeout_seconds)
        self.counter = _Stats()
        self._lock = Lock()
        self._agents: dict[tuple[bool, TLSFiles | None], Agent] = {}
        self._run_schemes: dict[str, str] = {}

    @property
    def stats(self) -> RequestStats:
        """The requests sent so far."""
        return self.counter.snapshot()

    def close(self) -> None:
        """Close the agents' connections, or, in a server worker, keep their idle ones for a later call."""
        with self._lock:
            agents, self._agents = self._agents, {}
        for (verify, files), agent in agents.items():
            adapter = agent.detach()
            if adapter is not None and not keptpools.keep(self._kept_key(verify, files), adapter):
                adapter.close()

    def _kept_key(self, verify: bool, files: TLSFiles | None) -> tuple[object, ...]:
        """What an agent's connections are kept under between calls: its whole trust, and the pool size."""
        return (*_trust(self._options, verify=verify, tls=files), self._options.pool_size)

    def _agent(self, registry: str, tls: TLSFiles | None) -> Agent:
        """An agent per TLS profile: the flags' trust, plus a registries.yaml `tls` entry when there is one."""
        skip = tls is not None and tls.insecure_skip_verify
        verify = self._options.verify_certs and registry not in self._options.skip_verify_hosts and not skip
        key = (verify, tls if tls is not None and (tls.ca_file or tls.cert_file) else None)
        with self._lock:
            if key not in self._agents:
                options, files = self._options, key[1]
                probe = self._probe_first if files is None or not files.cert_file else _never
                self._agents[key] = Agent(
                    lambda: _ssl_context(options, verify=verify, tls=files),
                    _USER_AGENT,
                    options.pool_size,
                    probe,
                    keptpools.take(self._kept_key(verify, files)),
                )
            return self._agents[key]

    def _probe_first(self, host: str, port: int) -> bool:
        """Is an https connection here a guess (plain HTTP allowed, the scheme not known yet)? Then it is probed."""
        return len(self._schemes_for(host if port == 443 else f"{host}:{port}")) > 1  # noqa: PLR2004

    def _schemes_for(self, host: str) -> list[str]:
        plain_ok = self._options.insecure_all or host in self._options.insecure_hosts or is_plain_http_host(host)
        allowed = ("https", "http") if plain_ok else ("https",)
        with self._lock:
            known = self._run_schemes.get(host)
        if known is None and self._schemes is not None:
            known = self._schemes.scheme_for(host)
            if known is not None and known not in allowed:
                # the cache is data, never routing: a remembered plain-HTTP scheme must still be allowed today
                _log.debug("ignoring remembered scheme %r for %s: plain HTTP is not allowed for it", known, host)
                known = None
        return [known] if known is not None else list(allowed)

    def _note_scheme(self, host: str, scheme: str) -> None:
        with self._lock:
            if self._run_schemes.get(host) == scheme:
                return
            self._run_schemes[host] = scheme
        if self._schemes is not None:
            try:
                self._schemes.remember_scheme(host, scheme)
            except CacheUnwritable as exc:  # a read-only or full cache: learned again by a later run
                _log.debug("not recording the scheme of %s: %s", host, exc)

    def _timeout(self, what: str) -> tuple[float, float]:
        return (self._options.connect_timeout, min(self._options.read_timeout, self.deadline.remaining(what)))

    def _past_deadline(self, what: str) -> None:
        """A wait that ended because the run's deadline passed is that, whatever the wait was for: Transient."""
        self.deadline.remaining(what)

    def send(
        self, method: str, route: Route, path: str, headers: dict[str, str], *, stream: bool, what: str
    ) -> Response:
        """One request along `route` (its fixed scheme, else https then http where allowed); counted.

        A connection that could not be opened on any allowed scheme is `ConnectFailure`; an unknown CA is
        `TLSVerifyError`.
        """
        agent = self._agent(route.registry, route.tls)
        failures: list[str] = []
        reasons: list[str] = []
        host = route.host
        for scheme in [route.scheme] if route.scheme else self._schemes_for(host):
            url = f"{scheme}://{host}{path}"
            timeout, until = self._timeout(what), self.deadline.until(what)
            try:
                response = agent.request(
                    method, url, headers, timeouts=timeout, proxy_for=self._options.proxy.for_url, until=until
                )
                if not stream:
                    response.content  # noqa: B018 - read now, so the connection goes back to the pool
            except HeaderTimeout:
                # connected and asked, but no answer in time: the registry's answer, not a reason to retry
                self._past_deadline(what)
                line = f'{method.capitalize()} "{url}": net/http: timeout awaiting response headers'
                raise ResponseTimeout(f"{what}: {line}", waited=timeout[1]) from None
            except BodyBroken as exc:  # a body read at once that broke off or would not end
                self._past_deadline(what)
                raise Transient(f'{what}: {method.capitalize()} "{url}": {exc}') from None
            except ConnectFailed as exc:
                self._past_deadline(what)
                message = _tls_message(exc, url)
                if message is not None:
                    raise TLSVerifyError(f"{what}: {message}") from None
                self.counter.connect_error()
                reasons.append(_reason(exc))
                failures.append(f'{method.capitalize()} "{url}": {reasons[-1]}')
                continue
            self.counter.request(method, response.status_code, count=1 + len(response.history), endpoint=route.label)
            if route.scheme is None:
                self._note_scheme(host, scheme)
            _log_exchange(response)
            return response
        refused = bool(reasons) and all(reason == _ERRNO_TEXT[errno.ECONNREFUSED] for reason in reasons)
        raise ConnectFailure(f"{what}: {'; '.join(failures)}", refused=refused)

    def token_request(
        self, route: Route, realm: str, form: dict[str, str], *, basic: tuple[str, str] | None, post: bool, what: str
    ) -> Response:
        """A token endpoint request (a form POST or a GET with the form as query), counted as an auth request."""
        agent = self._agent(route.registry, route.tls)
        timeouts, chooser, until = self._timeout(what), self._options.proxy.for_url, self.deadline.until(what)
        from urllib.parse import urlencode  # noqa: PLC0415 - loaded with requests, which the token request loads

        try:
            if post:
                body = urlencode(form)
                headers = {"Content-Type": "application/x-www-form-urlencoded"}
                response = agent.request(
                    "POST", realm, headers, body=body, timeouts=timeouts, proxy_for=chooser, until=until
                )
            else:
                url = f"{realm}{'&' if '?' in realm else '?'}{urlencode(form)}"
                headers = {"Authorization": basic_auth(*basic)} if basic else {}
                response = agent.request("GET", url, headers, timeouts=timeouts, proxy_for=chooser, until=until)
            response.content  # noqa: B018 - a token answer is small: read it now
        except (ConnectFailed, HeaderTimeout, BodyBroken) as exc:
            self._past_deadline(what)
            self.counter.connect_error()
            raise Transient(f"{what}: fetching a token from {realm}: {exc}") from None
        except BodyWouldLeave as exc:
            where = f"{exc} (another host, or plain HTTP)"
            msg = f"{what}: the token endpoint {realm} redirected its form, which carries the credential, to {where}"
            raise RegistryError(f"{msg}: not sent there") from None
        self.counter.request(response.request.method, response.status_code, auth=True, endpoint=route.label)
        _log_exchange(response)
        return response
