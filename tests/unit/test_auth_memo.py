"""A process serving calls remembers a registry's challenge and its tokens, for the very same credential only.

Each "call" is a new RegistryClient in this one process, as a reused worker makes one per call; `responses` answers
and records every request, so the counts and the headers sent are the registry's view.
"""

from __future__ import annotations

import pytest
from responses import RequestsMock

from ocivendir.errors import Unauthorized
from ocivendir.oci.reference import parse_reference
from ocivendir.registry import authmemo
from ocivendir.registry.client import ClientOptions, RegistryClient
from ocivendir.registry.credentials import Credential

DIGEST = "sha256:" + "0" * 64
HOST = "tokens.example.com"
MANIFEST = f"https://{HOST}/v2/team/app/manifests/v1"
REALM = "https://auth.example.com/token"
BEARER = {"WWW-Authenticate": f'Bearer realm="{REALM}",service="svc"'}
ALICE = Credential(username="alice", password="pw")


class _Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> _Clock:
    fake = _Clock()
    monkeypatch.setattr(authmemo, "_clock", fake)
    return fake


def _call(credential: Credential = ALICE, host: str = HOST) -> RegistryClient:
    """One call's resolve of the tag with its own client."""
    client = RegistryClient(ClientOptions(), lambda _r, _p, **_: credential)
    assert str(client.resolve(parse_reference(f"{host}/team/app:v1")).digest) == DIGEST
    return client


def _challenge(rsps: RequestsMock, token: str, expires_in: int | None = None, host: str = HOST) -> None:
    """A HEAD answered with the Bearer challenge, the token endpoint, then the HEAD with the token."""
    body: dict[str, object] = {"token": token}
    if expires_in is not None:
        body["expires_in"] = expires_in
    rsps.head(f"https://{host}/v2/team/app/manifests/v1", status=401, headers=BEARER)
    rsps.get(REALM, json=body)
    rsps.head(f"https://{host}/v2/team/app/manifests/v1", headers={"Docker-Content-Digest": DIGEST})


def _head(rsps: RequestsMock, host: str = HOST) -> None:
    rsps.head(f"https://{host}/v2/team/app/manifests/v1", headers={"Docker-Content-Digest": DIGEST})


def _authorizations(rsps: RequestsMock) -> list[str | None]:
    return [c.request.headers.get("Authorization") for c in rsps.calls if c.request.url.startswith("https://" + HOST)]


def test_a_valid_token_serves_the_next_call_with_one_request(rsps: RequestsMock, clock: _Clock) -> None:
    _challenge(rsps, "tok-1", expires_in=300)
    _call()
    _head(rsps)
    _head(rsps)
    second, third = _call(), _call()
    assert (second.stats.total, third.stats.total) == (1, 1)
    assert _authorizations(rsps) == [None, "Bearer tok-1", "Bearer tok-1", "Bearer tok-1"]


def test_a_token_is_not_used_once_expired_and_a_new_one_is_asked_for(rsps: RequestsMock, clock: _Clock) -> None:
    _challenge(rsps, "tok-1", expires_in=120)
    _call()
    clock.now += 119
    _head(rsps)
    assert _call().stats.total == 1
    clock.now += 1  # 120 s after the token was asked for
    _challenge(rsps, "tok-2", expires_in=120)
    assert _call().stats.total == 3
    assert _authorizations(rsps)[-2:] == [None, "Bearer tok-2"]


def test_a_token_without_expires_in_is_valid_for_sixty_seconds(rsps: RequestsMock, clock: _Clock) -> None:
    _challenge(rsps, "tok-1")
    _call()
    clock.now += 59
    _head(rsps)
    assert _call().stats.total == 1
    clock.now += 1
    _challenge(rsps, "tok-2")
    assert _call().stats.total == 3


@pytest.mark.parametrize(
    "other",
    [Credential(username="alice", password="other"), Credential(username="bob", password="pw"), Credential()],
)
def test_another_credential_never_gets_the_token(rsps: RequestsMock, clock: _Clock, other: Credential) -> None:
    _challenge(rsps, "tok-alice", expires_in=300)
    _call()
    _challenge(rsps, "tok-other", expires_in=300)
    assert _call(other).stats.total == 3
    assert _authorizations(rsps)[2:] == [None, "Bearer tok-other"]


def test_another_host_never_gets_the_token(rsps: RequestsMock, clock: _Clock) -> None:
    _challenge(rsps, "tok-1", expires_in=300)
    _call()
    _challenge(rsps, "tok-2", expires_in=300, host="other.example.com")
    assert _call(host="other.example.com").stats.total == 3
    calls = [c.request for c in rsps.calls if c.request.url.startswith("https://other.example.com")]
    assert [r.headers.get("Authorization") for r in calls] == [None, "Bearer tok-2"]


def test_a_remembered_token_the_registry_refuses_is_forgotten_and_the_challenge_answered(
    rsps: RequestsMock, clock: _Clock
) -> None:
    _challenge(rsps, "tok-1", expires_in=300)
    _call()
    rsps.head(MANIFEST, status=401, headers=BEARER)  # revoked: its challenge is answered at once
    rsps.get(REALM, json={"token": "tok-2", "expires_in": 300})
    _head(rsps)
    assert _call().stats.total == 3
    assert _authorizations(rsps)[2:] == ["Bearer tok-1", "Bearer tok-2"]
    _head(rsps)
    _call()
    assert _authorizations(rsps)[-1] == "Bearer tok-2"


def test_credentials_refused_after_a_challenge_are_still_refused(rsps: RequestsMock, clock: _Clock) -> None:
    rsps.head(MANIFEST, status=401, headers={"WWW-Authenticate": 'Basic realm="r"'})
    rsps.head(MANIFEST, status=401, headers={"WWW-Authenticate": 'Basic realm="r"'})
    rsps.get(MANIFEST, status=401, headers={"WWW-Authenticate": 'Basic realm="r"'})
    with pytest.raises(Unauthorized):
        _call()
    assert authmemo.known(HOST, ALICE) is None  # nothing is learned from a refusal


def test_a_fingerprint_holds_no_credential_and_tells_every_field_apart() -> None:
    prints = {
        authmemo.fingerprint(c)
        for c in (ALICE, Credential(username="alicep", password="w"), Credential(password="alicepw"),
                  Credential(identity_token="alice"), Credential(registry_token="alice"), Credential())
    }  # fmt: skip
    assert len(prints) == 6
    assert all("alice" not in p and "pw" not in p for p in prints)


def test_a_host_never_challenged_costs_no_credential_lookup(rsps: RequestsMock, clock: _Clock) -> None:
    """A credential helper is a subprocess: an anonymous registry's calls never run it, as before."""
    _challenge(rsps, "tok-1", expires_in=300)
    _call()  # another host learned a challenge
    lookups: list[str] = []

    def lookup(registry: str, _path: str, **_: object) -> Credential:
        lookups.append(registry)
        return ALICE

    _head(rsps, host="open.example.com")
    client = RegistryClient(ClientOptions(), lookup)
    assert str(client.resolve(parse_reference("open.example.com/team/app:v1")).digest) == DIGEST
    assert lookups == []
