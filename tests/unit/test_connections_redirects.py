"""Redirects at the connection seam: where credentials may follow a redirect (Go's and requests' rules, stricter)."""

from __future__ import annotations

import pytest
from responses import RequestsMock

from ocivendir.registry.connections import Agent, ConnectFailed

TIMEOUTS = (1.0, 1.0)


def _direct(_scheme: str, _host: str, _port: int) -> None:
    return None


def _agent() -> Agent:
    def no_tls() -> object:
        raise AssertionError("the fake connections make no TLS context")

    return Agent(no_tls, "ocivendir/test", 2)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("location", "kept"),
    [
        ("https://reg.test/storage/x", True),
        ("/storage/x", True),
        ("https://REG.test/storage/x", True),
        ("http://reg.test/storage/x", False),  # https -> http on the same host: never in clear text
        ("https://reg.test:8443/storage/x", False),
        ("https://other.test/storage/x", False),
        ("https://user:pw@reg.test/storage/x", False),
    ],
)
def test_authorization_follows_a_redirect_only_to_the_same_https_origin(
    rsps: RequestsMock, location: str, kept: bool
) -> None:
    rsps.get("https://reg.test/v2/a/blobs/x", status=307, headers={"Location": location})
    target = location if "://" in location else f"https://reg.test{location}"
    rsps.get(target.replace("user:pw@", "").replace("REG", "reg"), body=b"data")
    answer = _agent().request(
        "GET", "https://reg.test/v2/a/blobs/x", {"Authorization": "Bearer secret"}, timeouts=TIMEOUTS,
        proxy_for=_direct,
    )  # fmt: skip
    assert answer.content == b"data"
    sent = [call.request.headers.get("Authorization") for call in rsps.calls]
    assert sent == ["Bearer secret", "Bearer secret" if kept else None]


def test_a_redirect_location_with_spaces_is_escaped_as_requests_did(rsps: RequestsMock) -> None:
    rsps.get("https://reg.test/v2/a/blobs/x", status=307, headers={"Location": "/storage/a b\u00e9"})
    rsps.get("https://reg.test/storage/a%20b%C3%A9", body=b"data")
    answer = _agent().request("GET", "https://reg.test/v2/a/blobs/x", {}, timeouts=TIMEOUTS, proxy_for=_direct)
    assert (answer.content, rsps.calls[-1].request.url) == (b"data", "https://reg.test/storage/a%20b%C3%A9")


@pytest.mark.parametrize(
    "location", ["ftp://reg.test/x", "file:///etc/passwd", "http://reg.test:99999/x", "http://[::1/x", "http:///x"]
)
def test_an_unusable_redirect_location_is_a_connection_failure_not_a_crash(rsps: RequestsMock, location: str) -> None:
    rsps.get("https://reg.test/v2/a/blobs/x", status=302, headers={"Location": location})
    with pytest.raises(ConnectFailed, match="unusable location"):
        _agent().request("GET", "https://reg.test/v2/a/blobs/x", {}, timeouts=TIMEOUTS, proxy_for=_direct)
