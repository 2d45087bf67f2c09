"""The client walks mirrors, then the origin (against canned answers): what moves on, what is verified, what is counted."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
from responses import RequestsMock, matchers

from ocivendir.errors import NotFound, RateLimited
from ocivendir.oci.reference import Repository, parse_digest, parse_reference
from ocivendir.registry.auth import Keyring
from ocivendir.registry.client import ClientOptions, RegistryClient
from ocivendir.registry.credentials import Credential, CredentialRules
from ocivendir.registry.registriesyaml import parse_registries
from ocivendir.registry.retry import RetryPolicy
from ocivendir.registry.transport import basic_auth
from ocivendir.results import ImageStatus

ORIGIN = "registry.example.com"
MIRROR = "http://mirror.example:5000"
MANIFEST = b'{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json","config":{},"layers":[]}'
DIGEST = "sha256:" + hashlib.sha256(MANIFEST).hexdigest()
BLOB = b"layer bytes" * 100
BLOB_DIGEST = "sha256:" + hashlib.sha256(BLOB).hexdigest()
AT_ORIGIN = f"https://{ORIGIN}/v2/team/app"
AT_MIRROR = f"{MIRROR}/v2/cache/team/app"
REGISTRIES = f"""
mirrors:
  {ORIGIN}:
    endpoint: ["{MIRROR}"]
    rewrite: {{"^team/(.*)": "cache/team/$1"}}
configs:
  mirror.example:5000: {{auth: {{username: mirroruser, password: m1rror}}}}
"""


class Made:
    """A client with the mirror plan; its sleeps and warnings."""

    def __init__(self, rules: CredentialRules | None = None, text: str = REGISTRIES) -> None:
        self.sleeps: list[float] = []
        self.warnings: list[str] = []
        plan, _ = parse_registries(text, "registries.yaml")
        policy = RetryPolicy(attempts=2, sleep=self.sleeps.append, jitter=lambda: 1.0)
        keyring = Keyring(rules or CredentialRules(), (), plan)
        self.client = RegistryClient(ClientOptions(retry=policy), keyring, None, plan)
        self.client.on_warning(self.warnings.append)


def test_a_manifest_comes_from_the_mirror_under_its_rewritten_name_and_is_reported_as_served_there(
    rsps: RequestsMock,
) -> None:
    rsps.get(f"{AT_MIRROR}/manifests/{DIGEST}", body=MANIFEST)
    made = Made()
    raw, _, _ = made.client.get_manifest(parse_reference(f"{ORIGIN}/team/app@{DIGEST}"))
    assert raw == MANIFEST
    stats = made.client.stats
    assert stats.served_by == {f"{ORIGIN}/team/app@{DIGEST}": MIRROR}
    assert stats.by_endpoint == {MIRROR: 1}


def test_a_404_at_the_mirror_asks_the_origin_quietly(rsps: RequestsMock) -> None:
    rsps.get(f"{AT_MIRROR}/manifests/{DIGEST}", status=404)
    rsps.get(f"{AT_ORIGIN}/manifests/{DIGEST}", body=MANIFEST)
    made = Made()
    made.client.get_manifest(parse_reference(f"{ORIGIN}/team/app@{DIGEST}"))
    assert made.client.stats.served_by == {f"{ORIGIN}/team/app@{DIGEST}": ORIGIN}
    assert made.client.stats.by_endpoint == {MIRROR: 1, ORIGIN: 1}
    assert made.warnings == []


def test_a_mirror_that_lies_is_skipped_for_that_object_with_a_warning(rsps: RequestsMock) -> None:
    rsps.get(f"{AT_MIRROR}/manifests/{DIGEST}", body=MANIFEST + b" ")
    rsps.get(f"{AT_ORIGIN}/manifests/{DIGEST}", body=MANIFEST)
    made = Made()
    raw, _, _ = made.client.get_manifest(parse_reference(f"{ORIGIN}/team/app@{DIGEST}"))
    assert raw == MANIFEST
    assert len(made.warnings) == 1
    assert made.warnings[0].startswith(f"mirror {MIRROR} served content that does not match {ORIGIN}/team/app@")


def test_a_lying_blob_leaves_no_file_and_the_origin_serves_it(rsps: RequestsMock, tmp_path: Path) -> None:
    rsps.get(f"{AT_MIRROR}/blobs/{BLOB_DIGEST}", body=b"X" + BLOB[1:])
    rsps.get(f"{AT_ORIGIN}/blobs/{BLOB_DIGEST}", body=BLOB)
    made = Made()
    target = tmp_path / "blob"
    seen: list[int] = []
    made.client.fetch_blob_to(
        Repository(ORIGIN, "team/app"), parse_digest(BLOB_DIGEST), len(BLOB), target, None, lambda o, _c: seen.append(o)
    )
    assert target.read_bytes() == BLOB
    assert seen == [0, 0]  # the origin's copy started over from the first byte
    assert made.client.stats.served_by == {f"{ORIGIN}/team/app@{BLOB_DIGEST}": ORIGIN}


def test_an_unreachable_mirror_is_not_asked_again_in_the_run(rsps: RequestsMock) -> None:
    rsps.get(f"{AT_MIRROR}/manifests/{DIGEST}", body=ConnectionError("refused"))
    rsps.get(f"{AT_MIRROR}/manifests/{DIGEST}", body=ConnectionError("refused"))
    rsps.get(f"{AT_ORIGIN}/manifests/{DIGEST}", body=MANIFEST)
    rsps.head(f"{AT_ORIGIN}/manifests/v1", headers={"Docker-Content-Digest": DIGEST})
    made = Made()
    made.client.get_manifest(parse_reference(f"{ORIGIN}/team/app@{DIGEST}"))
    assert made.client.resolve(parse_reference(f"{ORIGIN}/team/app:v1")).digest == parse_digest(DIGEST)
    assert made.client.stats.connect_errors == 2  # two attempts for the first object, none for the second
    assert made.warnings == [f"mirror {MIRROR} is unreachable; not asked again this run"]


def test_mirror_credentials_come_from_registries_yaml_and_registry_wide_ones_never_reach_a_mirror(
    rsps: RequestsMock,
) -> None:
    challenge = {"WWW-Authenticate": 'Basic realm="x"'}
    mirror_basic = {"Authorization": basic_auth("mirroruser", "m1rror")}
    origin_basic = {"Authorization": basic_auth("everyone", "pw")}
    rsps.get(f"{AT_MIRROR}/manifests/{DIGEST}", status=401, headers=challenge)
    rsps.get(f"{AT_MIRROR}/manifests/{DIGEST}", status=404, match=[matchers.header_matcher(mirror_basic)])
    rsps.get(f"{AT_ORIGIN}/manifests/{DIGEST}", status=401, headers=challenge)
    rsps.get(f"{AT_ORIGIN}/manifests/{DIGEST}", body=MANIFEST, match=[matchers.header_matcher(origin_basic)])
    made = Made(CredentialRules(default=Credential(username="everyone", password="pw")))
    made.client.get_manifest(parse_reference(f"{ORIGIN}/team/app@{DIGEST}"))
    # without a registries.yaml entry the mirror gets no credentials at all, and its 401 moves on with a warning
    rsps.get(f"{AT_MIRROR}/manifests/{DIGEST}", status=401, headers=challenge)
    rsps.get(f"{AT_ORIGIN}/manifests/{DIGEST}", body=MANIFEST)
    bare = Made(
        CredentialRules(default=Credential(username="everyone", password="pw")),
        REGISTRIES.split("configs", maxsplit=1)[0],
    )
    bare.client.get_manifest(parse_reference(f"{ORIGIN}/team/app@{DIGEST}"))
    assert len(bare.warnings) == 1
    assert bare.warnings[0].startswith(f"mirror {MIRROR} refused:")
    assert "requires authentication and no credentials were found" in bare.warnings[0]


def test_presence_takes_a_mirror_present_and_asks_the_origin_otherwise(rsps: RequestsMock) -> None:
    rsps.head(f"{AT_MIRROR}/manifests/{DIGEST}", status=200)
    rsps.head(f"{AT_MIRROR}/manifests/v2", status=404)
    rsps.head(f"{AT_ORIGIN}/manifests/v2", status=404)
    made = Made()
    assert made.client.exists(Repository(ORIGIN, "team/app"), parse_digest(DIGEST)) is ImageStatus.PRESENT
    assert made.client.presence(parse_reference(f"{ORIGIN}/team/app:v2")) is ImageStatus.MISSING


def test_tags_are_listed_at_the_mirror_and_the_origin_error_is_final(rsps: RequestsMock) -> None:
    rsps.get(f"{AT_MIRROR}/tags/list?n=1000", json={"tags": ["1.0.0", "1.2.0"]})
    made = Made()
    assert made.client.list_tags(Repository(ORIGIN, "team/app")) == ["1.0.0", "1.2.0"]
    rsps.get(f"{AT_MIRROR}/manifests/v9", status=503)
    rsps.get(f"{AT_MIRROR}/manifests/v9", status=503)
    rsps.get(f"{AT_ORIGIN}/manifests/v9", status=404)
    with pytest.raises(NotFound, match=r"Fetching manifest 'registry.example.com/team/app:v9': not found"):
        made.client.get_manifest(parse_reference(f"{ORIGIN}/team/app:v9"))


def test_a_retry_after_holds_back_later_requests_to_that_endpoint_and_rate_limit_headers_are_named(
    rsps: RequestsMock,
) -> None:
    limits = {"Retry-After": "3", "RateLimit-Limit": "100;w=21600", "RateLimit-Remaining": "0;w=21600"}
    rsps.get(f"{AT_ORIGIN}/manifests/{DIGEST}", status=429, headers=limits)
    rsps.get(f"{AT_ORIGIN}/manifests/{DIGEST}", body=MANIFEST)
    rsps.head(f"{AT_ORIGIN}/manifests/v1", status=429, headers=limits)
    rsps.head(f"{AT_ORIGIN}/manifests/v1", status=429, headers=limits)
    made = Made(text="")
    made.client.get_manifest(parse_reference(f"{ORIGIN}/team/app@{DIGEST}"))
    with pytest.raises(RateLimited) as caught:
        made.client.resolve(parse_reference(f"{ORIGIN}/team/app:v1"))
    # the second operation first sat out what was left of the first one's Retry-After, then its own
    assert made.sleeps[0] == 3.0
    assert made.sleeps[1] > 2.5
    assert made.sleeps[2] == 3.0
    assert "RateLimit-Limit: 100;w=21600, RateLimit-Remaining: 0;w=21600" in caught.value.message
