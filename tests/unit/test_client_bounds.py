"""Bodies read at once are bounded: a token endpoint or a tag list that does not end is a clear error, not memory."""

from __future__ import annotations

import pytest
from responses import RequestsMock

from ocivendir.errors import NotFound, RegistryError, Transient
from ocivendir.oci.reference import parse_reference
from ocivendir.registry import connections
from tests.unit.test_client import BASE, DIGEST, REG, client


def test_a_token_answer_that_does_not_end_is_a_clear_error_not_memory(
    rsps: RequestsMock, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(connections, "MAX_BODY_BYTES", 1 << 16)
    rsps.get(f"{BASE}/manifests/{DIGEST}", status=401, headers={"WWW-Authenticate": 'Bearer realm="https://auth.example.com/token"'})  # fmt: skip
    rsps.get("https://auth.example.com/token", body=b'{"token": "' + b"t" * (1 << 17) + b'"}')
    with pytest.raises(Transient, match="larger than 65536 bytes"):
        client(attempts=1).get_manifest(parse_reference(f"{REG}/team/app@{DIGEST}"))


def test_a_tag_list_that_does_not_end_is_a_clear_error_not_memory(
    rsps: RequestsMock, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(connections, "MAX_BODY_BYTES", 1 << 16)
    rsps.get(f"{BASE}/tags/list", json={"tags": [f"v{i}" for i in range(20000)]})
    with pytest.raises(Transient, match="larger than 65536 bytes"):
        client(attempts=1).list_tags(parse_reference(f"{REG}/team/app:v1").repository)


def test_tag_pages_that_link_back_are_a_clear_error_not_an_endless_walk(rsps: RequestsMock) -> None:
    rsps.get(f"{BASE}/tags/list?n=1000", json={"tags": ["a"]},
             headers={"Link": '</v2/team/app/tags/list?n=1000&last=a>; rel="next"'})  # fmt: skip
    rsps.get(f"{BASE}/tags/list?n=1000&last=a", json={"tags": ["b"]},
             headers={"Link": '</v2/team/app/tags/list?n=1000&last=a>; rel="next"'})  # fmt: skip
    c = client(attempts=1, timeout=5.0)
    with pytest.raises(RegistryError, match="pagination goes back to a page it gave"):
        c.list_tags(parse_reference(f"{REG}/team/app").repository)
    assert c.stats.total == 2  # the first page and the second; the second is not asked for again


@pytest.mark.parametrize(
    ("headers", "body"),
    [({"Content-Length": "1000"}, b'{"errors": ['), ({}, b"x" * (1 << 17))],  # broken off; past the cap
)
def test_an_error_answer_whose_body_breaks_off_or_never_ends_is_still_the_registry_error(
    rsps: RequestsMock, monkeypatch: pytest.MonkeyPatch, headers: dict[str, str], body: bytes
) -> None:
    monkeypatch.setattr(connections, "MAX_BODY_BYTES", 1 << 16)
    rsps.get(f"{BASE}/manifests/{DIGEST}", status=404, headers=headers, body=body)
    with pytest.raises(NotFound, match=r"not found \(Not Found\)"):
        client(attempts=1).get_manifest(parse_reference(f"{REG}/team/app@{DIGEST}"))


def test_a_body_cut_short_of_its_content_length_is_transient_not_a_shorter_answer(rsps: RequestsMock) -> None:
    rsps.get(f"{BASE}/tags/list", headers={"Content-Length": "1000"}, body=b'{"tags": ["a"]}')
    with pytest.raises(Transient, match="cut short: 985 of its Content-Length bytes never came"):
        client(attempts=1).list_tags(parse_reference(f"{REG}/team/app:v1").repository)
