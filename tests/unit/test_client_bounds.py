"""Bodies read at once are bounded: a token endpoint or a tag list that does not end is a clear error, not memory."""

from __future__ import annotations

import hashlib

import pytest

from ocivendir.errors import RegistryError, Transient
from ocivendir.oci.reference import parse_reference
from ocivendir.registry import connections
from tests.support.fakehttp import FakeHTTP
from tests.unit.test_client import client

REG = "registry.example.com"
MANIFEST = b'{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json","config":{},"layers":[]}'
DIGEST = "sha256:" + hashlib.sha256(MANIFEST).hexdigest()
BASE = f"https://{REG}/v2/team/app"


@pytest.fixture
def rsps(fake_http: FakeHTTP) -> FakeHTTP:
    return fake_http


def test_a_token_answer_that_does_not_end_is_a_clear_error_not_memory(
    rsps: FakeHTTP, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(connections, "MAX_BODY_BYTES", 1 << 16)
    rsps.get(f"{BASE}/manifests/{DIGEST}", status=401, headers={"WWW-Authenticate": 'Bearer realm="https://auth.example.com/token"'})  # fmt: skip
    rsps.get("https://auth.example.com/token", body=b'{"token": "' + b"t" * (1 << 17) + b'"}')
    with pytest.raises(Transient, match="larger than 65536 bytes"):
        client(attempts=1).get_manifest(parse_reference(f"{REG}/team/app@{DIGEST}"))


def test_a_tag_list_that_does_not_end_is_a_clear_error_not_memory(
    rsps: FakeHTTP, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(connections, "MAX_BODY_BYTES", 1 << 16)
    rsps.get(f"{BASE}/tags/list", json={"tags": [f"v{i}" for i in range(20000)]})
    with pytest.raises(Transient, match="larger than 65536 bytes"):
        client(attempts=1).list_tags(parse_reference(f"{REG}/team/app:v1").repository)


def test_tag_pages_that_link_back_are_a_clear_error_not_an_endless_walk(rsps: FakeHTTP) -> None:
    rsps.get(f"{BASE}/tags/list?n=1000", json={"tags": ["a"]},
             headers={"Link": '</v2/team/app/tags/list?n=1000&last=a>; rel="next"'})  # fmt: skip
    rsps.get(f"{BASE}/tags/list?n=1000&last=a", json={"tags": ["b"]},
             headers={"Link": '</v2/team/app/tags/list?n=1000&last=a>; rel="next"'})  # fmt: skip
    c = client(attempts=1, timeout=5.0)
    with pytest.raises(RegistryError, match="pagination goes back to a page it gave"):
        c.list_tags(parse_reference(f"{REG}/team/app").repository)
    assert c.stats.total == 2  # the first page and the second; the second is not asked for again
