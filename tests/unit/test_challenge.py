"""`WWW-Authenticate` parsing: quoted values with commas and escapes, bare tokens, case-insensitive names."""

from __future__ import annotations

import pytest
from responses import RequestsMock, matchers

from ocivendir.oci.reference import parse_reference
from ocivendir.registry.challenge import parse_challenge
from tests.unit.test_client import BASE, DIGEST, MANIFEST, REG, client


@pytest.mark.parametrize(
    ("header", "scheme", "params"),
    [
        ('Bearer realm="https://a/token",service="reg",scope="repository:x/y:pull,push"', "bearer",
         {"realm": "https://a/token", "service": "reg", "scope": "repository:x/y:pull,push"}),
        ('Basic realm="Registry Realm"', "basic", {"realm": "Registry Realm"}),
        ("BEARER Realm=https://a/token , SERVICE = reg", "bearer", {"realm": "https://a/token", "service": "reg"}),
        ('Bearer realm="a\\"b\\\\c",error="invalid_token"', "bearer", {"realm": 'a"b\\c', "error": "invalid_token"}),
        ('Bearer realm="first",realm="second"', "bearer", {"realm": "first"}),
        ('Bearer realm="no end', "bearer", {"realm": "no end"}),
        ("Bearer", "bearer", {}),
        ("", "", {}),
    ],
)  # fmt: skip
def test_parse_challenge(header: str, scheme: str, params: dict[str, str]) -> None:
    parsed = parse_challenge(header)
    assert (parsed.scheme, parsed.params) == (scheme, params)


def test_a_bearer_challenge_with_unquoted_values_still_fetches_a_token(rsps: RequestsMock) -> None:
    rsps.get(f"{BASE}/manifests/{DIGEST}", status=401,
             headers={"WWW-Authenticate": f"Bearer realm=https://auth.example.com/token,service={REG}"})  # fmt: skip
    rsps.get("https://auth.example.com/token", json={"token": "t"},
             match=[matchers.query_param_matcher({"scope": "repository:team/app:pull", "service": REG})])  # fmt: skip
    rsps.get(f"{BASE}/manifests/{DIGEST}", body=MANIFEST,
             match=[matchers.header_matcher({"Authorization": "Bearer t"})])  # fmt: skip
    raw, _, _ = client().get_manifest(parse_reference(f"{REG}/team/app@{DIGEST}"))
    assert raw == MANIFEST
