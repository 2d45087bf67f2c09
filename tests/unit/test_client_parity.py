"""The registry client behaves as imgpkg's (go-containerregistry) where imgpkg's own e2e tests look.

A 401 without a challenge pings /v2/; the registry's own words on refused credentials and failed manifest fetches
reach the error; a response-header timeout fails at once; --debug logs every exchange with credentials redacted.
"""

from __future__ import annotations

import hashlib
import logging

import pytest
import requests
from responses import RequestsMock, matchers

from ocivendir.errors import NotFound, Transient, Unauthorized
from ocivendir.oci.manifest import LAYER_GZIP, LAYER_PLAIN, LAYER_ZSTD, layer_compression, sniff_compression
from ocivendir.oci.reference import parse_reference
from ocivendir.registry.client import ClientOptions, RegistryClient
from ocivendir.registry.credentials import Credential
from ocivendir.registry.retry import RetryPolicy
from ocivendir.registry.transport import basic_auth

REG = "registry.example.com"
MANIFEST = b'{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json","config":{},"layers":[]}'
DIGEST = "sha256:" + hashlib.sha256(MANIFEST).hexdigest()
BASE = f"https://{REG}/v2/team/app"
ALICE = Credential(username="alice", password="hunter2")


def client(credential: Credential | None = None) -> RegistryClient:
    policy = RetryPolicy(attempts=5, sleep=lambda _s: None, jitter=lambda: 1.0)
    options = ClientOptions(retry=policy, ssl_cert_file="/nonexistent", ssl_cert_dir="/nonexistent")  # no trust store
    return RegistryClient(options, lambda _r, _p, **_: credential or Credential())


def test_a_401_without_a_challenge_pings_v2_once_and_uses_its_challenge(rsps: RequestsMock) -> None:
    rsps.get(f"{BASE}/manifests/{DIGEST}", status=401)
    rsps.get(f"https://{REG}/v2/", status=401, headers={"WWW-Authenticate": 'Basic realm="r"'})
    rsps.get(f"{BASE}/manifests/{DIGEST}", body=MANIFEST,
             match=[matchers.header_matcher({"Authorization": basic_auth("alice", "hunter2")})])  # fmt: skip
    c = client(ALICE)
    raw, _, _ = c.get_manifest(parse_reference(f"{REG}/team/app@{DIGEST}"))
    assert raw == MANIFEST
    assert (c.stats.total, c.stats.auth) == (3, 2)


def test_a_bearer_challenge_found_by_the_ping_fetches_a_token(rsps: RequestsMock) -> None:
    rsps.get(f"{BASE}/manifests/{DIGEST}", status=401)
    rsps.get(f"https://{REG}/v2/", status=401,
             headers={"WWW-Authenticate": 'Bearer realm="https://auth.example.com/token",service="svc"'})  # fmt: skip
    rsps.get("https://auth.example.com/token", json={"token": "tok"})
    rsps.get(f"{BASE}/manifests/{DIGEST}", body=MANIFEST,
             match=[matchers.header_matcher({"Authorization": "Bearer tok"})])  # fmt: skip
    assert client().get_manifest(parse_reference(f"{REG}/team/app@{DIGEST}"))[0] == MANIFEST


def test_no_challenge_anywhere_is_a_clear_auth_error(rsps: RequestsMock) -> None:
    rsps.get(f"{BASE}/manifests/{DIGEST}", status=401)
    rsps.get(f"https://{REG}/v2/", status=200)
    with pytest.raises(Unauthorized, match="no authentication challenge, on /v2/ too"):
        client(ALICE).get_manifest(parse_reference(f"{REG}/team/app@{DIGEST}"))


def test_refused_credentials_show_the_registrys_own_message(rsps: RequestsMock) -> None:
    rsps.head(f"{BASE}/manifests/v1", status=401)
    rsps.get(f"https://{REG}/v2/", status=401, headers={"WWW-Authenticate": "Basic"})
    rsps.head(f"{BASE}/manifests/v1", status=401)  # a HEAD has no body: the GET asks again for the words
    rsps.get(f"{BASE}/manifests/v1", status=401, body="incorrect username or password")
    with pytest.raises(Unauthorized) as caught:
        client(ALICE).resolve(parse_reference(f"{REG}/team/app:v1"))
    assert "refused the credentials for team/app (incorrect username or password)" in caught.value.message
    assert "hunter2" not in caught.value.message


@pytest.mark.parametrize("code", ["MANIFEST_UNKNOWN", "NAME_UNKNOWN"])
def test_a_failed_manifest_fetch_names_the_registrys_error_code(rsps: RequestsMock, code: str) -> None:
    rsps.head(f"{BASE}/manifests/v1", status=404)
    rsps.get(f"{BASE}/manifests/v1", status=404, json={"errors": [{"code": code, "message": "unknown"}]})
    with pytest.raises(NotFound, match=f"not found \\({code}: unknown\\)"):
        client().resolve(parse_reference(f"{REG}/team/app:v1"))


def test_a_response_header_timeout_fails_at_once_without_retries(rsps: RequestsMock) -> None:
    rsps.head(f"{BASE}/manifests/v1", body=requests.exceptions.ReadTimeout("read timed out"))
    c = client()
    with pytest.raises(Transient, match=r'Head "https://registry.example.com/v2/team/app/manifests/v1": net/http: '
                                        "timeout awaiting response headers"):  # fmt: skip
        c.resolve(parse_reference(f"{REG}/team/app:v1"))
    assert len(rsps.calls) == 1


def test_debug_logs_each_exchange_with_headers_and_credentials_redacted(
    rsps: RequestsMock, caplog: pytest.LogCaptureFixture
) -> None:
    rsps.get(f"{BASE}/manifests/{DIGEST}", status=401, headers={"WWW-Authenticate": 'Basic realm="r"'})
    rsps.get(f"{BASE}/manifests/{DIGEST}", body=MANIFEST, headers={"Docker-Content-Digest": DIGEST})
    with caplog.at_level(logging.DEBUG, logger="ocivendir.http"):
        client(ALICE).get_manifest(parse_reference(f"{REG}/team/app@{DIGEST}"))
    text = "\n".join(r.getMessage() for r in caplog.records if r.name == "ocivendir.http")
    assert text.count(f"--> GET {BASE}/manifests/{DIGEST}") == 2
    assert f"<-- 401 Unauthorized {BASE}/manifests/{DIGEST}" in text
    assert "Accept-Encoding: " in text
    assert f"Docker-Content-Digest: {DIGEST}" in text
    assert "Authorization: <redacted>" in text
    assert basic_auth("alice", "hunter2").split()[1] not in text


def test_debug_logging_is_silent_without_debug(rsps: RequestsMock, caplog: pytest.LogCaptureFixture) -> None:
    rsps.get(f"{BASE}/manifests/{DIGEST}", body=MANIFEST)
    with caplog.at_level(logging.INFO):
        client().get_manifest(parse_reference(f"{REG}/team/app@{DIGEST}"))
    assert [r for r in caplog.records if r.name == "ocivendir.http"] == []


@pytest.mark.parametrize(
    ("media_type", "compression"),
    [
        ("application/vnd.oci.image.layer.nondistributable.v1.tar", LAYER_PLAIN),
        ("application/vnd.oci.image.layer.nondistributable.v1.tar+zstd", LAYER_ZSTD),
    ],
)
def test_nondistributable_layers_are_layers(media_type: str, compression: str) -> None:
    assert layer_compression(media_type) == compression


@pytest.mark.parametrize(
    ("head", "compression"),
    [(b"\x1f\x8b\x08\x00", LAYER_GZIP), (b"\x28\xb5\x2f\xfd", LAYER_ZSTD), (b"conf", LAYER_PLAIN), (b"", LAYER_PLAIN)],
)
def test_compression_is_told_by_the_magic_bytes(head: bytes, compression: str) -> None:
    assert sniff_compression(head) == compression


def test_missing_credentials_cost_no_second_request(rsps: RequestsMock) -> None:
    rsps.head(f"{BASE}/manifests/v1", status=401, headers={"WWW-Authenticate": 'Basic realm="r"'})
    c = client()
    with pytest.raises(Unauthorized, match="requires authentication and no credentials were found"):
        c.resolve(parse_reference(f"{REG}/team/app:v1"))
    assert c.stats.total == 1  # nothing to learn from a GET: no credentials were refused
