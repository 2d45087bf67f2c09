"""Owns: HTTP to registries — the only importer of requests/urllib3/oras.

Auth challenges (Basic, Bearer token exchange), https-then-http for the plain-HTTP hosts, TLS with the system CAs plus
added ones, proxies, bounded retries under a run deadline, verified manifest and blob fetches, presence probes, tag
listing, and the request counter every result reports (design §4.1).
"""

from __future__ import annotations

import contextlib
import errno
import http.cookiejar
import socket
import ssl
import threading
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol
from urllib.parse import urljoin, urlsplit

import requests
import urllib3
from requests.adapters import HTTPAdapter

from ocivendir import __version__
from ocivendir.errors import (
    Denied,
    DigestMismatch,
    NotFound,
    RateLimited,
    RegistryError,
    TLSVerifyError,
    Transient,
    Unauthorized,
)
from ocivendir.oci.manifest import ACCEPT_MANIFESTS, DigestingWriter, sha256_digest
from ocivendir.oci.reference import Digest, Reference, Repository, is_plain_http_host, parse_digest
from ocivendir.registry.credentials import Credential
from ocivendir.registry.proxy import ProxyConfig
from ocivendir.registry.retry import Deadline, RetryPolicy
from ocivendir.results import ImageStatus, RequestStats

if TYPE_CHECKING:
    from requests import Response

__all__ = ["ClientOptions", "RegistryClient", "Resolved", "SchemeMemory"]

MAX_MANIFEST_BYTES = 4 * 1024 * 1024
_CHUNK = 1 << 22
_HEAD_REFUSED = frozenset({405, 501})


class SchemeMemory(Protocol):
    """Where the scheme that worked for a host is remembered across runs (the cache index)."""

    def scheme_for(self, host: str) -> str | None:
        """The remembered scheme, if any."""

    def remember_scheme(self, host: str, scheme: str) -> None:
        """Record the scheme that worked."""


CredentialLookup = Callable[[str, str], Credential]
ProgressCallback = Callable[[int], None]
ChunkCallback = Callable[[int, bytes], None]


@dataclass(frozen=True, kw_only=True)
class ClientOptions:
    """Everything the client needs from settings; nothing here is read from the environment."""

    insecure_all: bool = False
    insecure_hosts: frozenset[str] = frozenset()
    verify_certs: bool = True
    skip_verify_hosts: frozenset[str] = frozenset()
    ca_files: tuple[Path, ...] = ()
    system_ca_file: Path | None = None
    system_ca_dirs: tuple[Path, ...] = ()
    proxy: ProxyConfig = field(default_factory=ProxyConfig)
    connect_timeout: float = 10.0
    read_timeout: float = 30.0
    timeout_seconds: float = 300.0
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    pool_size: int = 8


@dataclass(frozen=True, kw_only=True)
class Resolved:
    """A reference resolved to a manifest digest; `raw` holds the bytes when a GET was needed anyway."""

    digest: Digest
    media_type: str
    size: int
    raw: bytes | None = None


class _ConnectFailure(Exception):
    """No scheme could open a connection (or the connection broke before an answer)."""


class _Stats:
    """Thread-safe request counters."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.total = 0
        self.auth = 0
        self.connect_errors = 0
        self.by_method: Counter[str] = Counter()
        self.by_status: Counter[str] = Counter()
        self.bytes_received = 0

    def request(self, method: str, status: int, *, auth: bool = False, count: int = 1) -> None:
        with self._lock:
            self.total += count
            self.by_method[method] += count
            self.by_status[str(status)] += count
            if auth:
                self.auth += count

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
            )


class _ContextAdapter(HTTPAdapter):
    """An adapter whose TLS trust is our SSLContext (system CAs plus added ones), never certifi's bundle."""

    def __init__(self, context: ssl.SSLContext, pool_size: int) -> None:
        self._context = context
        super().__init__(pool_connections=pool_size, pool_maxsize=pool_size, max_retries=0)

    def init_poolmanager(self, *args: Any, **kwargs: Any) -> None:  # noqa: ANN401 - urllib3's signature
        kwargs["ssl_context"] = self._context
        super().init_poolmanager(*args, **kwargs)

    def proxy_manager_for(self, proxy: str, **kwargs: Any) -> Any:  # noqa: ANN401 - urllib3's signature
        kwargs["ssl_context"] = self._context
        return super().proxy_manager_for(proxy, **kwargs)

    def cert_verify(self, conn: Any, url: str, verify: Any, cert: Any) -> None:  # noqa: ANN401 - requests' signature
        """Trust comes from the SSLContext; requests must not add its own CA bundle."""


def _ssl_context(options: ClientOptions, *, verify: bool) -> ssl.SSLContext:
    context = ssl.create_default_context(purpose=ssl.Purpose.SERVER_AUTH, cafile=None, capath=None)
    if not verify:
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
        return context
    if options.system_ca_file is not None:
        with contextlib.suppress(OSError, ssl.SSLError):
            context.load_verify_locations(cafile=str(options.system_ca_file))
    for directory in options.system_ca_dirs:
        with contextlib.suppress(OSError, ssl.SSLError):
            context.load_verify_locations(capath=str(directory))
    for extra in options.ca_files:
        try:
            context.load_verify_locations(cafile=str(extra))
        except (OSError, ssl.SSLError) as exc:
            raise TLSVerifyError(f"Loading CA certificate '{extra}': {exc}") from None
    return context


def _new_session(options: ClientOptions, *, verify: bool) -> requests.Session:
    session = requests.Session()
    session.trust_env = False
    session.headers["User-Agent"] = f"ocivendir/{__version__}"
    session.cookies.set_policy(_NoCookies())
    adapter = _ContextAdapter(_ssl_context(options, verify=verify), options.pool_size)
    session.mount("https://", adapter)
    session.mount("http://", HTTPAdapter(pool_connections=options.pool_size, pool_maxsize=options.pool_size))
    session.verify = verify
    return session


class _NoCookies(http.cookiejar.DefaultCookiePolicy):
    """Registries get no cookies back."""

    def set_ok(self, cookie: http.cookiejar.Cookie, request: Any) -> bool:  # noqa: ARG002, ANN401 - policy signature
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
    """The root cause of a connection failure in a short, Go-like form (no urllib3 pool internals)."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, requests.exceptions.Timeout | TimeoutError | socket.timeout):
            return "i/o timeout"
        if isinstance(current, socket.gaierror):
            return "dial tcp: lookup failed: no such host"
        if isinstance(current, ssl.SSLError):
            return f"tls: {current.reason or current}".lower()
        if isinstance(current, OSError) and current.errno in _ERRNO_TEXT:
            return _ERRNO_TEXT[current.errno]
        nested = [a for a in getattr(current, "args", ()) if isinstance(a, BaseException)]
        current = (
            nested[0] if nested else (current.__cause__ or current.__context__ or getattr(current, "reason", None))
        )
    return str(exc)


def _registry_error_text(response: Response) -> str:
    with contextlib.suppress(ValueError, AttributeError, KeyError, IndexError, TypeError):
        first = response.json()["errors"][0]
        return f"{first.get('code', '')}: {first.get('message', '')}".strip(": ")
    return response.reason or ""


class RegistryClient:
    """One run's connection to registries: auth, retries, verification and counting."""

    def __init__(
        self,
        options: ClientOptions,
        credentials: CredentialLookup,
        schemes: SchemeMemory | None = None,
    ) -> None:
        """Prepare sessions; nothing is sent until the first operation."""
        urllib3.disable_warnings(urllib3.exceptions.InsecureRequestWarning)
        self._options = options
        self._credentials = credentials
        self._schemes = schemes
        self._deadline = Deadline(options.timeout_seconds)
        self._stats = _Stats()
        self._lock = threading.Lock()
        self._sessions: dict[bool, requests.Session] = {}
        self._auth_headers: dict[tuple[str, str], str] = {}
        self._credential_cache: dict[tuple[str, str], Credential] = {}
        self._run_schemes: dict[str, str] = {}

    @property
    def stats(self) -> RequestStats:
        """The requests sent so far."""
        return self._stats.snapshot()

    def close(self) -> None:
        """Close the sessions."""
        for session in self._sessions.values():
            session.close()

    # --- transport -------------------------------------------------------------------------------------------

    def _session(self, registry: str) -> requests.Session:
        verify = self._options.verify_certs and registry not in self._options.skip_verify_hosts
        with self._lock:
            if verify not in self._sessions:
                self._sessions[verify] = _new_session(self._options, verify=verify)
            return self._sessions[verify]

    def _schemes_for(self, host: str) -> list[str]:
        with self._lock:
            known = self._run_schemes.get(host)
        if known is None and self._schemes is not None:
            known = self._schemes.scheme_for(host)
        if known is not None:
            return [known]
        plain_ok = self._options.insecure_all or host in self._options.insecure_hosts or is_plain_http_host(host)
        return ["https", "http"] if plain_ok else ["https"]

    def _note_scheme(self, host: str, scheme: str) -> None:
        with self._lock:
            if self._run_schemes.get(host) == scheme:
                return
            self._run_schemes[host] = scheme
        if self._schemes is not None:
            self._schemes.remember_scheme(host, scheme)

    def _raw(
        self, method: str, repo: Repository, path: str, headers: dict[str, str], *, stream: bool, what: str
    ) -> Response:
        host = repo.api_host
        session = self._session(repo.registry)
        failures: list[str] = []
        for scheme in self._schemes_for(host):
            url = f"{scheme}://{host}{path}"
            timeout = (self._options.connect_timeout, min(self._options.read_timeout, self._deadline.remaining(what)))
            proxy = self._proxy(scheme, host)
            try:
                response = session.request(
                    method, url, headers=headers, stream=stream, timeout=timeout, proxies=proxy, allow_redirects=True
                )
            except requests.exceptions.SSLError as exc:
                message = _tls_message(exc, url)
                if message is not None:
                    raise TLSVerifyError(f"{what}: {message}") from None
                self._stats.connect_error()
                failures.append(f'{method.capitalize()} "{url}": {_reason(exc)}')
                continue
            except (requests.exceptions.ConnectionError, requests.exceptions.Timeout) as exc:
                self._stats.connect_error()
                failures.append(f'{method.capitalize()} "{url}": {_reason(exc)}')
                continue
            self._stats.request(method, response.status_code, count=1 + len(response.history))
            self._note_scheme(host, scheme)
            return response
        raise _ConnectFailure(f"{what}: {'; '.join(failures)}")

    def _proxy(self, scheme: str, host: str) -> dict[str, str]:
        name, _, port = host.rpartition(":") if host.count(":") == 1 else (host, "", "")
        chosen = self._options.proxy.for_url(scheme, name, int(port) if port.isdigit() else 443)
        return {scheme: chosen} if chosen else {}

    # --- auth ------------------------------------------------------------------------------------------------

    def _credential(self, repo: Repository) -> Credential:
        key = (repo.registry, repo.path)
        with self._lock:
            cached = self._credential_cache.get(key)
        if cached is None:
            cached = self._credentials(repo.registry, repo.path)
            with self._lock:
                self._credential_cache[key] = cached
        return cached

    def _authorize(self, repo: Repository, challenge: str, what: str) -> str:
        from oras.auth.utils import parse_auth_header  # noqa: PLC0415 - only on a 401: keeps start-up light

        scheme = challenge.split(" ", 1)[0].lower()
        credential = self._credential(repo)
        if scheme == "basic":
            if not credential.username and not credential.password:
                raise Unauthorized(
                    f"{what}: {repo.registry} requires authentication and no credentials were found",
                    hint="set IMGPKG_REGISTRY_* or log in to the docker config",
                )
            token = requests.auth._basic_auth_str(credential.username, credential.password)  # noqa: SLF001
            return str(token)
        if scheme != "bearer":
            raise Unauthorized(f"{what}: {repo.registry} asks for unsupported auth scheme '{scheme}'")
        if credential.registry_token:
            return f"Bearer {credential.registry_token}"
        params = parse_auth_header(challenge)
        if not params.realm:
            raise Unauthorized(f"{what}: {repo.registry} sent a Bearer challenge without a realm")
        return f"Bearer {self._fetch_token(repo, params.realm, params.service, credential, what)}"

    def _fetch_token(self, repo: Repository, realm: str, service: str | None, credential: Credential, what: str) -> str:
        scope = f"repository:{repo.path}:pull"
        session = self._session(repo.registry)
        timeout = (self._options.connect_timeout, min(self._options.read_timeout, self._deadline.remaining(what)))
        form = {"scope": scope, "service": service or ""}
        try:
            if credential.identity_token:
                form |= {"grant_type": "refresh_token", "refresh_token": credential.identity_token}
                form["client_id"] = "ocivendir"
                response = session.post(realm, data=form, timeout=timeout)
            else:
                basic = (credential.username, credential.password) if credential.username else None
                response = session.get(realm, params=form, auth=basic, timeout=timeout)
        except (requests.exceptions.ConnectionError, requests.exceptions.Timeout) as exc:
            self._stats.connect_error()
            raise Transient(f"{what}: fetching a token from {realm}: {exc}") from None
        self._stats.request(response.request.method or "GET", response.status_code, auth=True)
        if response.status_code in {401, 403}:
            raise Unauthorized(f"{what}: authentication to {repo.registry} failed (token endpoint {realm})")
        if response.status_code != 200:  # noqa: PLR2004
            raise RegistryError(f"{what}: token endpoint {realm} answered {response.status_code}")
        try:
            body = response.json()
            return str(body.get("token") or body["access_token"])
        except (ValueError, KeyError):
            raise RegistryError(f"{what}: token endpoint {realm} sent no token") from None

    def _send_once(
        self, method: str, repo: Repository, path: str, headers: dict[str, str], *, stream: bool, what: str
    ) -> Response:
        key = (repo.api_host, repo.path)
        with self._lock:
            auth = self._auth_headers.get(key)
        sent = dict(headers)
        if auth:
            sent["Authorization"] = auth
        response = self._raw(method, repo, path, sent, stream=stream, what=what)
        if response.status_code != 401:  # noqa: PLR2004
            return response
        self._stats.challenge()
        challenge = response.headers.get("WWW-Authenticate", "")
        response.close()
        if auth:
            raise Unauthorized(f"{what}: {repo.registry} refused the credentials for {repo.path}")
        header = self._authorize(repo, challenge, what)
        with self._lock:
            self._auth_headers[key] = header
        sent["Authorization"] = header
        response = self._raw(method, repo, path, sent, stream=stream, what=what)
        if response.status_code == 401:  # noqa: PLR2004
            response.close()
            raise Unauthorized(f"{what}: {repo.registry} refused the credentials for {repo.path}")
        return response

    def _send(
        self, method: str, repo: Repository, path: str, headers: dict[str, str], *, stream: bool, what: str
    ) -> Response:
        policy = self._options.retry
        attempt = 0
        while True:
            try:
                response = self._send_once(method, repo, path, headers, stream=stream, what=what)
            except _ConnectFailure as exc:
                if attempt + 1 >= policy.attempts:
                    raise Transient(str(exc), hint=f"is the registry {repo.registry} reachable?") from None
                self._sleep(policy.delay(attempt, None, what), what)
                attempt += 1
                continue
            if policy.retryable_status(response.status_code) and attempt + 1 < policy.attempts:
                wait = policy.delay(attempt, response.headers.get("Retry-After"), what)
                response.close()
                self._sleep(wait, what)
                attempt += 1
                continue
            return response

    def _sleep(self, seconds: float, what: str) -> None:
        if seconds >= self._deadline.remaining(what):
            raise Transient(f"{what}: network deadline of {self._deadline.seconds:g}s exceeded while retrying")
        self._options.retry.pause(seconds)

    @staticmethod
    def _raise_for(response: Response, what: str) -> None:
        status = response.status_code
        if status < 300:  # noqa: PLR2004
            return
        detail = _registry_error_text(response)
        response.close()
        if status == 401:  # noqa: PLR2004
            raise Unauthorized(f"{what}: authentication required ({detail})")
        if status == 403:  # noqa: PLR2004
            raise Denied(f"{what}: access denied ({detail})")
        if status == 404:  # noqa: PLR2004
            raise NotFound(f"{what}: not found ({detail})")
        if status == 429:  # noqa: PLR2004
            raise RateLimited(f"{what}: rate limited by the registry ({detail})")
        if status >= 500:  # noqa: PLR2004
            raise Transient(f"{what}: the registry answered {status} ({detail})")
        raise RegistryError(f"{what}: the registry answered {status} ({detail})")

    # --- operations ------------------------------------------------------------------------------------------

    def resolve(self, ref: Reference) -> Resolved:
        """Resolve a reference to its manifest digest with one HEAD (a GET only if HEAD is refused or lacks one)."""
        what = f"Resolving '{ref}'"
        path = f"/v2/{ref.repository.path}/manifests/{ref.identifier}"
        headers = {"Accept": ACCEPT_MANIFESTS}
        response = self._send("HEAD", ref.repository, path, headers, stream=False, what=what)
        if response.status_code not in _HEAD_REFUSED:
            self._raise_for(response, what)
            digest_header = response.headers.get("Docker-Content-Digest")
            if digest_header:
                digest = parse_digest(digest_header)
                if ref.digest is not None and digest != ref.digest:
                    raise DigestMismatch(f"{what}: registry reports {digest}")
                size = int(response.headers.get("Content-Length") or 0)
                return Resolved(digest=digest, media_type=_content_type(response), size=size)
        raw, media_type, digest = self.get_manifest(ref)
        return Resolved(digest=digest, media_type=media_type, size=len(raw), raw=raw)

    def get_manifest(self, ref: Reference) -> tuple[bytes, str, Digest]:
        """Fetch a manifest's raw bytes, verified against the digest asked for (or the registry's header)."""
        what = f"Fetching manifest '{ref}'"
        path = f"/v2/{ref.repository.path}/manifests/{ref.identifier}"
        response = self._send("GET", ref.repository, path, {"Accept": ACCEPT_MANIFESTS}, stream=True, what=what)
        self._raise_for(response, what)
        with contextlib.closing(response):
            raw = _read_capped(response, MAX_MANIFEST_BYTES, what)
        self._stats.received(len(raw))
        actual = sha256_digest(raw)
        expected = ref.digest
        if expected is None and response.headers.get("Docker-Content-Digest"):
            expected = parse_digest(response.headers["Docker-Content-Digest"])
        if expected is not None and actual != expected:
            raise DigestMismatch(f"{what}: expected digest {expected}, got {actual}")
        return raw, _content_type(response), actual

    def fetch_blob_to(
        self,
        repo: Repository,
        digest: Digest,
        size: int,
        target: Path,
        progress: ProgressCallback | None = None,
        on_chunk: ChunkCallback | None = None,
    ) -> None:
        """Stream a blob into `target`, verifying size and sha256; on a mismatch the file is deleted.

        `on_chunk(offset, chunk)` sees every chunk as it is written (offset 0 again means a retry started over); the
        bytes it saw are verified only when this call returns.
        """
        what = f"Fetching blob '{repo}@{digest}'"
        policy = self._options.retry
        for attempt in range(policy.attempts):
            try:
                self._fetch_blob_once(repo, digest, size, target, (progress, on_chunk), what)
            except _ShortRead as exc:
                target.unlink(missing_ok=True)
                if attempt + 1 >= policy.attempts:
                    raise Transient(f"{what}: {exc}") from None
                self._sleep(policy.delay(attempt, None, what), what)
            except BaseException:
                target.unlink(missing_ok=True)
                raise
            else:
                return

    def _fetch_blob_once(
        self,
        repo: Repository,
        digest: Digest,
        size: int,
        target: Path,
        callbacks: tuple[ProgressCallback | None, ChunkCallback | None],
        what: str,
    ) -> None:
        progress, on_chunk = callbacks
        response = self._send("GET", repo, f"/v2/{repo.path}/blobs/{digest}", {}, stream=True, what=what)
        self._raise_for(response, what)
        with contextlib.closing(response), target.open("wb") as handle:
            writer = DigestingWriter(handle)
            try:
                for chunk in response.iter_content(_CHUNK):
                    offset = writer.size
                    writer.write(chunk)
                    if on_chunk is not None:
                        on_chunk(offset, chunk)
                    self._stats.received(len(chunk))
                    if writer.size > size:
                        break
                    if progress is not None:
                        progress(writer.size)
            except (requests.exceptions.ConnectionError, requests.exceptions.ChunkedEncodingError) as exc:
                raise _ShortRead(f"connection dropped after {writer.size} of {size} bytes: {exc}") from None
            handle.flush()
            if writer.size < size and writer.digest != digest:
                raise _ShortRead(f"connection closed after {writer.size} of {size} bytes")
            writer.verify(digest, size, what)

    def exists(self, repo: Repository, digest: Digest) -> ImageStatus:
        """Is this manifest digest in this repository?"""
        return self.presence(repo.at(digest))

    def presence(self, ref: Reference) -> ImageStatus:
        """Is this digest or tag in its repository? One HEAD (a GET only if HEAD is refused).

        401/403 after authenticating is `denied`, 404 `missing`, anything left after the retries `error`.
        """
        what = f"Checking '{ref}'"
        path = f"/v2/{ref.repository.path}/manifests/{ref.identifier}"
        headers = {"Accept": ACCEPT_MANIFESTS}
        try:
            response = self._send("HEAD", ref.repository, path, headers, stream=False, what=what)
            if response.status_code in _HEAD_REFUSED:
                response = self._send("GET", ref.repository, path, headers, stream=True, what=what)
                response.close()
        except (Unauthorized, Denied):
            return ImageStatus.DENIED
        except (Transient, RateLimited, RegistryError):
            return ImageStatus.ERROR
        return _presence(response.status_code)

    def list_tags(self, repo: Repository) -> list[str]:
        """Every tag of a repository, following `Link` pagination."""
        what = f"Listing tags of '{repo}'"
        tags: list[str] = []
        path: str | None = f"/v2/{repo.path}/tags/list?n=1000"
        while path:
            response = self._send("GET", repo, path, {"Accept": "application/json"}, stream=False, what=what)
            self._raise_for(response, what)
            self._stats.received(len(response.content))
            try:
                tags.extend(str(t) for t in (response.json().get("tags") or []))
            except ValueError:
                raise RegistryError(f"{what}: invalid JSON in the answer") from None
            path = _next_link(response)
        return tags


class _ShortRead(Exception):
    """The connection ended before the blob's size."""


def _presence(status: int) -> ImageStatus:
    if 200 <= status < 300:  # noqa: PLR2004
        return ImageStatus.PRESENT
    if status == 404:  # noqa: PLR2004
        return ImageStatus.MISSING
    if status in {401, 403}:
        return ImageStatus.DENIED
    return ImageStatus.ERROR


def _content_type(response: Response) -> str:
    return response.headers.get("Content-Type", "").split(";", 1)[0].strip()


def _read_capped(response: Response, limit: int, what: str) -> bytes:
    chunks: list[bytes] = []
    total = 0
    try:
        for chunk in response.iter_content(_CHUNK):
            total += len(chunk)
            if total > limit:
                raise RegistryError(f"{what}: manifest larger than {limit} bytes")
            chunks.append(chunk)
    except (requests.exceptions.ConnectionError, requests.exceptions.ChunkedEncodingError) as exc:
        raise Transient(f"{what}: connection dropped: {exc}") from None
    return b"".join(chunks)


def _next_link(response: Response) -> str | None:
    link = response.links.get("next", {}).get("url")
    if not link:
        return None
    parts = urlsplit(urljoin(response.url, link))
    return parts.path + (f"?{parts.query}" if parts.query else "")
