"""Owns: what a process that serves calls remembers of registries' authentication — challenges and bearer tokens.

A tag App behind Basic auth cost two requests per reconcile (a HEAD answered 401, then the HEAD with credentials), and
behind a token server three. A process serving call after call remembers, per registry host and per credential:
- which challenge the registry answered (its scheme, realm and service), so that the first request of the next call
  carries the credentials at once when that was Basic (or a static registry token);
- the bearer token the realm issued for a scope, until it expires (`expires_in`, 60 s when absent, as the
  distribution token spec says), counted from before the token was asked for.

A credential is never a key: it is known by a fingerprint, an HMAC-SHA256 of its fields under a key drawn once per
process, so only a call with the very same credential for the same host (and realm, service and scope) can use what
another call learned: another credential, or none, starts again with the registry's challenge. A remembered header
the registry refuses is forgotten and the call goes through the challenge as if nothing were known. Each memo holds
at most SIZE entries, least recently used dropped first.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import time
from collections import OrderedDict
from threading import Lock

TYPE_CHECKING = False
if TYPE_CHECKING:
    from ocivendir.registry.credentials import Credential

__all__ = ["DEFAULT_EXPIRY", "SIZE", "Known", "challenged", "fingerprint", "forget", "forget_all", "known", "learn",
           "learn_token", "now", "token"]  # fmt: skip

SIZE = 64
DEFAULT_EXPIRY = 60.0
_KEY = os.urandom(32)  # per-process: the fingerprints' HMAC key, never written anywhere
_LOCK = Lock()  # per-process: guards the two memos below
_clock = time.monotonic
# the challenge a registry host answered for a credential (known by its fingerprint)
_challenges: OrderedDict[tuple[str, str], Known] = OrderedDict()  # per-process: keyed by (host, credential fingerprint)
# a bearer token and its monotonic expiry, by (host, realm, service, scope, credential fingerprint)
_tokens: OrderedDict[tuple[str, ...], tuple[str, float]] = OrderedDict()  # per-process: keyed by host..fingerprint


class Known:
    """A challenge as a registry answered it: its scheme (`basic`, `bearer`), realm and service."""

    __slots__ = ("realm", "scheme", "service")

    def __init__(self, scheme: str, realm: str, service: str) -> None:
        """Hold the parts (text only: nothing of the credential)."""
        self.scheme, self.realm, self.service = scheme, realm, service


def now() -> float:
    """The memo's clock (monotonic seconds): a token's expiry is counted on it."""
    return _clock()


def fingerprint(credential: Credential) -> str:
    """The credential's fingerprint in this process: each field length-prefixed, HMAC-SHA256 under the process key."""
    mac = hmac.new(_KEY, digestmod=hashlib.sha256)
    for part in (credential.username, credential.password, credential.identity_token, credential.registry_token):
        data = part.encode("utf-8", "surrogateescape")
        mac.update(len(data).to_bytes(8, "big"))
        mac.update(data)
    return mac.hexdigest()


def _put(memo: OrderedDict[tuple[str, ...], object], key: tuple[str, ...], value: object) -> None:
    memo[key] = value
    memo.move_to_end(key)
    while len(memo) > SIZE:
        memo.popitem(last=False)


def challenged(host: str) -> bool:
    """Whether an earlier call learned a challenge of `host` for any credential (else none is looked up for it)."""
    with _LOCK:
        return any(key[0] == host for key in _challenges)


def known(host: str, credential: Credential) -> Known | None:
    """The challenge `host` answered for this credential in an earlier call, if any."""
    key = (host, fingerprint(credential))
    with _LOCK:
        found = _challenges.get(key)
        if found is not None:
            _challenges.move_to_end(key)
        return found


def learn(host: str, credential: Credential, challenge: Known) -> None:
    """Remember the challenge `host` answered for this credential (after credentials it led to were accepted)."""
    with _LOCK:
        _put(_challenges, (host, fingerprint(credential)), challenge)  # type: ignore[arg-type]


def token(host: str, challenge: Known, scope: str, credential: Credential) -> str | None:
    """A token the challenge's realm issued for this scope and credential, while it has not expired."""
    key = (host, challenge.realm, challenge.service, scope, fingerprint(credential))
    with _LOCK:
        found = _tokens.get(key)
        if found is None:
            return None
        if now() >= found[1]:
            del _tokens[key]
            return None
        _tokens.move_to_end(key)
        return found[0]


def learn_token(
    host: str, challenge: Known, scope: str, credential: Credential, value: str, expires_in: object, asked_at: float
) -> None:
    """Remember a token until `asked_at` (monotonic, before the request) plus `expires_in` seconds (60 when absent)."""
    valid = DEFAULT_EXPIRY
    if isinstance(expires_in, int | float) and not isinstance(expires_in, bool) and 0 < expires_in < float("inf"):
        valid = float(expires_in)
    key = (host, challenge.realm, challenge.service, scope, fingerprint(credential))
    with _LOCK:
        _put(_tokens, key, (value, asked_at + valid))  # type: ignore[arg-type]


def forget(host: str, credential: Credential) -> None:
    """Forget what `host` answered for this credential, and its tokens (the registry refused a remembered header)."""
    mark = fingerprint(credential)
    with _LOCK:
        _challenges.pop((host, mark), None)
        for key in [k for k in _tokens if k[0] == host and k[4] == mark]:
            del _tokens[key]


def forget_all() -> None:
    """Forget everything (a process starting afresh)."""
    with _LOCK:
        _challenges.clear()
        _tokens.clear()
