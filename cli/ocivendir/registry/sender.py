"""Owns: sending one request to one registry endpoint for the run — authenticated, retried, counted, errors named.

Built on `registry/transport.py` (sessions, TLS, proxies, schemes, counting): the 401 challenge dance (Basic, Bearer
token exchange; `registry/challenge.py` reads the challenge, and credentials never follow a redirect to another host),
bounded retries with Retry-After under the run's deadline, and the error a non-2xx answer stands for, in the
registry's own words. `registry/client.py` speaks the distribution protocol through it.
"""

from __future__ import annotations

import contextlib
from threading import Lock

from ocivendir.errors import Denied, NotFound, RateLimited, RegistryError, Transient, Unauthorized
from ocivendir.registry import authmemo
from ocivendir.registry.challenge import parse_challenge
from ocivendir.registry.credentials import Credential
from ocivendir.registry.endpoints import EndpointWalker, Unreachable
from ocivendir.registry.ggcrtext import MAX_ERROR_JSON, transport_text
from ocivendir.registry.mirrors import Endpoint, MirrorPlan
from ocivendir.registry.transport import BodyBroken, ClientOptions, ConnectFailure, Route, Transport, basic_auth

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import NoReturn, Protocol

    from ocivendir.registry.transport import Response, SchemeMemory
    from ocivendir.results import RequestStats

    _Learned = tuple[authmemo.Known, tuple[str, object, float] | None]  # a challenge, and a token with its expiry

    class CredentialLookup(Protocol):
        """Credentials for a host and repository path; `mirror` when the host stands in for another registry."""

        def __call__(self, registry: str, repository: str, /, *, mirror: bool = False) -> Credential:
            """The credential to send."""


__all__ = ["Refused", "Sender", "header_token", "shown"]

_RATE_HEADERS = ("RateLimit-Limit", "RateLimit-Remaining", "RateLimit-Reset")
_DETAIL_CHARS = 300


def header_token(token: str) -> bool:
    """Whether a bearer token is text an `Authorization` header can carry: printable ASCII without spaces."""
    return bool(token) and token.isascii() and token.isprintable() and " " not in token


def shown(text: str) -> str:
    """Registry-supplied text as it may reach a terminal: control characters (escape sequences) shown as `?`."""
    return "".join(c if c.isprintable() else "?" for c in text[:_DETAIL_CHARS])


def _registry_error_text(response: Response) -> str:
    """The registry's own words: `CODE: message` from a distribution error body, else its text, else the reason.

    A body that breaks off or will not end (`BodyBroken`) only costs the detail: the status says what happened.
    """
    with contextlib.suppress(ValueError, AttributeError, KeyError, IndexError, TypeError, BodyBroken):
        if len(response.content) <= MAX_ERROR_JSON:  # a larger body is no error document: never decoded whole
            first = response.json()["errors"][0]
            return shown(f"{first.get('code', '')}: {first.get('message', '')}".strip(": "))
    with contextlib.suppress(ValueError, AttributeError, TypeError, RuntimeError, BodyBroken):
        text = " ".join(response.text[:MAX_ERROR_JSON].split())[:_DETAIL_CHARS]
        if text and text.isprintable():
            return text
    return response.reason or ""


class Sender:
    """One run's requests to registries' endpoints: authenticated, retried within the deadline, counted."""

    def __init__(
        self,
        options: ClientOptions,
        credentials: CredentialLookup,
        schemes: SchemeMemory | None = None,
        plan: MirrorPlan | None = None,
    ) -> None:
        """Prepare; nothing is sent until the first operation. `plan` lists mirrors (none: every origin alone)."""
        self._options = options
        self._credentials = credentials
        self._transport = Transport(options, schemes)
        self._stats = self._transport.counter
        self._deadline = self._transport.deadline
        self._walker = EndpointWalker(
            plan or MirrorPlan(), options.endpoint_concurrency, served=self._stats.served, pause=options.retry.pause
        )
        self._lock = Lock()
        self._auth_headers: dict[tuple[str, str], str] = {}
        self._credential_cache: dict[tuple[str, str, bool], Credential] = {}
        self._credentialed: set[str] = set()  # registries whose credential was looked up, or a mirror of was asked
        self._pings: dict[str, str] = {}

    def on_warning(self, warn: Callable[[str], None]) -> None:
        """Where mirror warnings go (a skipped lying mirror, an unreachable or refusing one)."""
        self._walker.warn = warn

    @property
    def stats(self) -> RequestStats:
        """The requests sent so far."""
        return self._stats.snapshot()

    def close(self) -> None:
        """Close the transport's sessions."""
        self._transport.close()

    def _raw(
        self, method: str, endpoint: Endpoint, path: str, headers: dict[str, str], *, stream: bool, what: str
    ) -> Response:
        return self._transport.send(method, _route(endpoint), path, headers, stream=stream, what=what)

    def anonymous_so_far(self, registry: str) -> bool:
        """True while nothing sent to `registry` (its origin or a mirror) could have carried a credential.

        A credential is looked up only for a challenge or a header remembered from one: until then every answer, the
        manifests included, was given to anyone who asks (a cache shared by several callers may serve them to all).
        A request to one of its mirrors counts as credentialed: a pull-through mirror may serve the origin's private
        content to whoever reaches it, which says nothing of who may read it at the origin.
        """
        with self._lock:
            return registry not in self._credentialed

    def _credential(self, endpoint: Endpoint) -> Credential:
        host = endpoint.host if endpoint.mirror else endpoint.registry
        key = (host, endpoint.path, endpoint.mirror)
        with self._lock:
            self._credentialed.add(endpoint.registry)
            cached = self._credential_cache.get(key)
        if cached is None:
            cached = self._credentials(host, endpoint.path, mirror=endpoint.mirror)
            with self._lock:
                self._credential_cache[key] = cached
        return cached

    def _remembered(self, endpoint: Endpoint) -> str | None:
        """The header an earlier call of this process learned to send `endpoint`'s host with this credential.

        Basic (and a static registry token) when the host answered Basic (Bearer); a bearer token while it is valid.
        A host never challenged in this process costs no credential lookup (a helper is a subprocess).
        """
        if not authmemo.challenged(endpoint.host):
            return None
        credential = self._credential(endpoint)
        found = authmemo.known(endpoint.host, credential)
        if found is None:
            return None
        if found.scheme == "basic":
            return basic_auth(credential.username, credential.password)
        if credential.registry_token:
            return f"Bearer {credential.registry_token}"
        token = authmemo.token(endpoint.host, found, _scope(endpoint), credential)
        return None if token is None else f"Bearer {token}"

    def _authorize(self, endpoint: Endpoint, challenge: str, what: str) -> tuple[str, _Learned]:
        """The header answering `challenge`, and what to remember of it once the registry accepts it."""
        parsed = parse_challenge(challenge)
        known = authmemo.Known(parsed.scheme, parsed.realm, parsed.service)
        scheme = parsed.scheme
        credential = self._credential(endpoint)
        if scheme == "basic":
            if not credential.username and not credential.password:
                raise Unauthorized(
                    f"{what}: {endpoint.name} requires authentication and no credentials were found",
                    hint="set IMGPKG_REGISTRY_*, log in to the docker config (a credential helper it names must be "
                    "on PATH; --debug names one that is not), or give registries.yaml an auth entry",
                )
            return basic_auth(credential.username, credential.password), (known, None)
        if not scheme:
            raise Unauthorized(f"{what}: {endpoint.name} answered 401 with no authentication challenge, on /v2/ too")
        if scheme != "bearer":
            raise Unauthorized(f"{what}: {endpoint.name} asks for unsupported auth scheme '{scheme}'")
        if credential.registry_token:
            if not header_token(credential.registry_token):
                raise Unauthorized(f"{what}: the registry token for {endpoint.name} has characters an Authorization "
                                   "header cannot carry (spaces, control characters or non-ASCII text)")  # fmt: skip
            return f"Bearer {credential.registry_token}", (known, None)
        realm = parsed.realm
        if not realm:
            raise Unauthorized(f"{what}: {endpoint.name} sent a Bearer challenge without a realm")
        if not _usable_realm(realm):
            raise Unauthorized(f"{what}: {endpoint.name} sent a Bearer challenge with an unusable realm {realm!r}")
        asked_at = authmemo.now()
        token, expires_in = self._fetch_token(endpoint, realm, parsed.service, credential, what)
        return f"Bearer {token}", (known, (token, expires_in, asked_at))

    def _fetch_token(
        self, endpoint: Endpoint, realm: str, service: str | None, credential: Credential, what: str
    ) -> tuple[str, object]:
        """A token from the realm, and its `expires_in` as the token endpoint sent it (None when absent)."""
        form = {"scope": _scope(endpoint), "service": service or ""}
        basic = None  # go-containerregistry's refreshOauth posts the refresh token alone: no Basic beside it
        if credential.username and not credential.identity_token:
            basic = (credential.username, credential.password)
        if credential.identity_token:
            form |= {"grant_type": "refresh_token", "refresh_token": credential.identity_token}
            form["client_id"] = "ocivendir"
        post = bool(credential.identity_token)
        route = _route(endpoint)
        response = self._transport.token_request(route, realm, form, basic=basic, post=post, what=what)
        if response.status_code in {401, 403}:
            raise Unauthorized(f"{what}: authentication to {endpoint.name} failed (token endpoint {realm})")
        if response.status_code != 200:  # noqa: PLR2004
            raise RegistryError(f"{what}: token endpoint {realm} answered {response.status_code}")
        try:
            body = response.json()
            token = body.get("token") or body["access_token"]
        except (ValueError, KeyError, AttributeError):
            token = None
        if not isinstance(token, str) or not header_token(token):
            raise RegistryError(f"{what}: token endpoint {realm} sent no usable token")  # no text a header can carry
        return token, body.get("expires_in")

    def _send_once(
        self, method: str, endpoint: Endpoint, path: str, headers: dict[str, str], *, stream: bool, what: str
    ) -> Response:
        key = (endpoint.host, endpoint.path)
        with self._lock:
            tls = endpoint.config.tls
            if endpoint.mirror or (tls is not None and tls.cert_file):  # a mirror's answer says nothing of who may
                self._credentialed.add(endpoint.registry)  # read the origin; a client certificate is a credential
            auth = self._auth_headers.get(key)
        remembered = auth is None and (auth := self._remembered(endpoint)) is not None
        sent = dict(headers)
        if auth:
            sent["Authorization"] = auth
        response = self._raw(method, endpoint, path, sent, stream=stream, what=what)
        if response.status_code != 401:  # noqa: PLR2004
            if remembered:
                with self._lock:
                    self._auth_headers[key] = auth  # type: ignore[assignment] # set: `remembered` says so
            return response
        self._stats.challenge()
        _challenged_elsewhere(response, endpoint, what)
        if remembered:  # what an earlier call learned no longer holds: the challenge, as if nothing were known
            authmemo.forget(endpoint.host, self._credential(endpoint))
        elif auth:
            self._refused(response, endpoint, what)
        challenge = response.headers.get("WWW-Authenticate", "")
        response.close()
        if not challenge:  # some registries and proxies challenge only on /v2/, as go-containerregistry expects
            challenge = self._ping(endpoint, what)
        header, learned = self._authorize(endpoint, challenge, what)
        with self._lock:
            self._auth_headers[key] = header
        sent["Authorization"] = header
        response = self._raw(method, endpoint, path, sent, stream=stream, what=what)
        if response.status_code == 401:  # noqa: PLR2004
            _challenged_elsewhere(response, endpoint, what)
            self._refused(response, endpoint, what)
        self._learn(endpoint, learned)
        return response

    def _learn(self, endpoint: Endpoint, learned: _Learned) -> None:
        """The registry accepted the header: the process remembers the challenge (and the token) for later calls."""
        known, token = learned
        credential = self._credential(endpoint)
        authmemo.learn(endpoint.host, credential, known)
        if token is not None:
            value, expires_in, asked_at = token
            authmemo.learn_token(endpoint.host, known, _scope(endpoint), credential, value, expires_in, asked_at)

    @staticmethod
    def _refused(response: Response, endpoint: Endpoint, what: str) -> NoReturn:
        """A 401 after authenticating: the registry's own message says why."""
        detail = _registry_error_text(response)
        response.close()
        raise Refused(f"{what}: {endpoint.name} refused the credentials for {endpoint.path} ({detail})")

    def _ping(self, endpoint: Endpoint, what: str) -> str:
        """The challenge of `GET /v2/` (once per host and run), for a 401 that carried none."""
        with self._lock:
            known = self._pings.get(endpoint.host)
        if known is not None:
            return known
        response = self._raw("GET", endpoint, "/v2/", {}, stream=False, what=what)
        challenge = response.headers.get("WWW-Authenticate", "") if response.status_code == 401 else ""  # noqa: PLR2004
        if response.status_code == 401:  # noqa: PLR2004
            self._stats.challenge()
        response.close()
        with self._lock:
            self._pings[endpoint.host] = challenge
        return challenge

    def _send(
        self,
        method: str,
        endpoint: Endpoint,
        path: str,
        headers: dict[str, str],
        *,
        stream: bool,
        what: str,
        retry_5xx: bool = True,
    ) -> Response:
        policy = self._options.retry
        attempt = 0
        while True:
            if attempt == 0:  # a retry has already waited out the Retry-After it was given
                self._walker.wait_turn(endpoint)
            try:
                response = self._send_once(method, endpoint, path, headers, stream=stream, what=what)
            except ConnectFailure as exc:
                if exc.refused or attempt + 1 >= policy.attempts:  # a refusal now is a refusal in 8 s too
                    raise Unreachable(str(exc), hint=f"is the registry {endpoint.name} reachable?") from None
                self._sleep(policy.delay(attempt, None, what), what)
                attempt += 1
                continue
            status = response.status_code
            if policy.retryable_status(status) and (retry_5xx or status < 500) and attempt + 1 < policy.attempts:  # noqa: PLR2004
                wait = policy.delay(attempt, response.headers.get("Retry-After"), what)
                if response.status_code == 429 and response.headers.get("Retry-After"):  # noqa: PLR2004
                    self._walker.hold_off(endpoint, wait)
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
        """Anything but a 2xx is an error (a `101 Switching Protocols` too: no answer to a registry request)."""
        status = response.status_code
        if 200 <= status < 300:  # noqa: PLR2004
            return
        detail = _registry_error_text(response)
        error = Sender._error_for(response, what, detail)
        error.transport = transport_text(response)
        response.close()
        raise error

    @staticmethod
    def _error_for(response: Response, what: str, detail: str) -> RegistryError:
        status = response.status_code
        if status == 401:  # noqa: PLR2004
            return Unauthorized(f"{what}: authentication required ({detail})")
        if status == 403:  # noqa: PLR2004
            return Denied(f"{what}: access denied ({detail})")
        if status == 404:  # noqa: PLR2004
            return NotFound(f"{what}: not found ({detail})")
        if status == 429:  # noqa: PLR2004
            limits = ", ".join(f"{h}: {response.headers[h]}" for h in _RATE_HEADERS if response.headers.get(h))
            return RateLimited(f"{what}: rate limited by the registry ({detail}{'; ' if limits else ''}{limits})")
        if status >= 500:  # noqa: PLR2004
            return Transient(f"{what}: the registry answered {status} ({detail})")
        return RegistryError(f"{what}: the registry answered {status} ({detail})")


def _scope(endpoint: Endpoint) -> str:
    """The token scope a request to `endpoint` needs: pull access to its repository."""
    return f"repository:{endpoint.path}:pull"


def _route(endpoint: Endpoint) -> Route:
    """The transport's view of an endpoint: a mirror gets its own host's TLS; the origin its registry's."""
    return Route(
        registry=endpoint.host if endpoint.mirror else endpoint.registry,
        host=endpoint.host,
        scheme=endpoint.scheme,
        tls=endpoint.config.tls,
        label=endpoint.name,
    )


class Refused(Unauthorized):
    """Credentials were sent and the registry refused them."""


def _challenged_elsewhere(response: Response, endpoint: Endpoint, what: str) -> None:
    """A 401 from where a redirect led, not from the registry asked: `Unauthorized`, and no credentials go there.

    The registry's credentials (and tokens from its realm) are for the registry alone; a storage host it redirects to
    that challenges on its own would get them, or a token for them from a realm of its choosing. imgpkg sends nothing
    there either. Another host or port, or plain HTTP after https, is elsewhere.
    """
    if not response.history:
        return
    from urllib.parse import urlsplit  # noqa: PLC0415 - only for a redirect that ended in a challenge

    asked, answered = urlsplit(response.history[0].url), urlsplit(response.url)
    downgrade = asked.scheme.lower() == "https" and answered.scheme.lower() != "https"
    if answered.netloc.lower() == asked.netloc.lower() and not downgrade:
        return
    response.close()
    raise Unauthorized(
        f"{what}: {endpoint.name} redirected the request to {answered.netloc}, which asks for credentials; "
        f"the credentials for {endpoint.name} are never sent to another host"
    )


def _usable_realm(realm: str) -> bool:
    """Is a Bearer realm an absolute http(s) URL with a host and a valid port (the registry chose it)?"""
    from urllib.parse import urlsplit  # noqa: PLC0415 - only for a token: off the warm path

    try:
        parts = urlsplit(realm)
        port = parts.port
    except ValueError:  # an unclosed IPv6 bracket, a port out of range or not a number
        return False
    return parts.scheme.lower() in {"http", "https"} and bool(parts.hostname) and port != 0
