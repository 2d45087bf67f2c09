"""The registry client's HTTP behaviour, against canned answers: auth challenges, retries, verification, counting."""

from __future__ import annotations

import base64
import errno
import hashlib
import re
import ssl
from pathlib import Path

import pytest
from responses import RequestsMock, matchers

from ocivendir.errors import (
    DigestMismatch,
    NotFound,
    RateLimited,
    RegistryError,
    TLSVerifyError,
    Transient,
    Unauthorized,
    UnsupportedMediaType,
)
from ocivendir.oci.reference import parse_reference
from ocivendir.registry.client import ClientOptions, RegistryClient
from ocivendir.registry.credentials import Credential
from ocivendir.registry.proxy import ProxyConfig
from ocivendir.registry.retry import RetryPolicy
from ocivendir.registry.transport import basic_auth
from ocivendir.results import ImageStatus

REG = "registry.example.com"
MANIFEST = b'{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json","config":{},"layers":[]}'
DIGEST = "sha256:" + hashlib.sha256(MANIFEST).hexdigest()
BASE = f"https://{REG}/v2/team/app"


def client(credential: Credential | None = None, *, sleeps: list[float] | None = None, attempts: int = 5,
           timeout: float = 300.0) -> RegistryClient:  # fmt: skip
    policy = RetryPolicy(attempts=attempts, sleep=(sleeps.append if sleeps is not None else lambda _s: None),
                         jitter=lambda: 1.0)  # fmt: skip
    # no real TLS here: the machine's trust store is not read (its reading time would count against the deadline)
    options = ClientOptions(
        retry=policy, timeout_seconds=timeout, ssl_cert_file="/nonexistent", ssl_cert_dir="/nonexistent"
    )
    return RegistryClient(options, lambda _r, _p, **_: credential or Credential())


def test_anonymous_bearer_challenge_fetches_a_pull_token_and_counts_auth(rsps: RequestsMock) -> None:
    challenge = f'Bearer realm="https://auth.example.com/token",service="{REG}",scope="repository:team/app:pull"'
    rsps.get(f"{BASE}/manifests/{DIGEST}", status=401, headers={"WWW-Authenticate": challenge})
    rsps.get(
        "https://auth.example.com/token",
        json={"token": "tok-1"},
        match=[matchers.query_param_matcher({"scope": "repository:team/app:pull", "service": REG})],
    )
    rsps.get(
        f"{BASE}/manifests/{DIGEST}",
        body=MANIFEST,
        match=[matchers.header_matcher({"Authorization": "Bearer tok-1"})],
    )
    c = client()
    raw, _, digest = c.get_manifest(parse_reference(f"{REG}/team/app@{DIGEST}"))
    assert raw == MANIFEST
    assert str(digest) == DIGEST
    assert c.stats.total == 3
    assert c.stats.auth == 2


def test_bearer_token_is_reused_for_the_same_repository(rsps: RequestsMock) -> None:
    challenge = 'Bearer realm="https://auth.example.com/token",service="svc"'
    rsps.head(f"{BASE}/manifests/v1", status=401, headers={"WWW-Authenticate": challenge})
    rsps.get("https://auth.example.com/token", json={"access_token": "tok"})
    rsps.head(f"{BASE}/manifests/v1", headers={"Docker-Content-Digest": DIGEST, "Content-Type": "x"})
    rsps.head(f"{BASE}/manifests/v2", headers={"Docker-Content-Digest": DIGEST, "Content-Type": "x"})
    c = client()
    c.resolve(parse_reference(f"{REG}/team/app:v1"))
    c.resolve(parse_reference(f"{REG}/team/app:v2"))
    assert c.stats.total == 4


def test_basic_challenge_uses_credentials_and_never_echoes_them(rsps: RequestsMock) -> None:
    rsps.get(f"{BASE}/manifests/{DIGEST}", status=401, headers={"WWW-Authenticate": 'Basic realm="r"'})
    rsps.get(f"{BASE}/manifests/{DIGEST}", status=401, headers={"WWW-Authenticate": 'Basic realm="r"'})
    with pytest.raises(Unauthorized) as caught:
        client(Credential(username="alice", password="hunter2")).get_manifest(
            parse_reference(f"{REG}/team/app@{DIGEST}")
        )
    assert REG in str(caught.value)
    assert "hunter2" not in str(caught.value)
    assert "alice" not in str(caught.value)


def test_basic_challenge_without_credentials_is_a_clear_auth_error(rsps: RequestsMock) -> None:
    rsps.get(f"{BASE}/manifests/{DIGEST}", status=401, headers={"WWW-Authenticate": 'Basic realm="r"'})
    with pytest.raises(Unauthorized, match="requires authentication"):
        client().get_manifest(parse_reference(f"{REG}/team/app@{DIGEST}"))


def test_5xx_is_retried_with_backoff_then_succeeds(rsps: RequestsMock) -> None:
    sleeps: list[float] = []
    rsps.get(f"{BASE}/manifests/{DIGEST}", status=503)
    rsps.get(f"{BASE}/manifests/{DIGEST}", status=502)
    rsps.get(f"{BASE}/manifests/{DIGEST}", body=MANIFEST)
    c = client(sleeps=sleeps)
    c.get_manifest(parse_reference(f"{REG}/team/app@{DIGEST}"))
    assert sleeps == [0.25, 0.5]
    assert c.stats.total == 3


def test_retry_after_is_honoured_up_to_the_cap_and_a_longer_wait_fails_fast(rsps: RequestsMock) -> None:
    sleeps: list[float] = []
    rsps.get(f"{BASE}/manifests/{DIGEST}", status=429, headers={"Retry-After": "3"})
    rsps.get(f"{BASE}/manifests/{DIGEST}", body=MANIFEST)
    client(sleeps=sleeps).get_manifest(parse_reference(f"{REG}/team/app@{DIGEST}"))
    assert sleeps == [3.0]
    rsps.get(f"{BASE}/manifests/{DIGEST}", status=429, headers={"Retry-After": "120"})
    with pytest.raises(RateLimited, match="120s"):
        client(sleeps=sleeps).get_manifest(parse_reference(f"{REG}/team/app@{DIGEST}"))


def test_501_is_not_retried_and_404_maps_to_not_found(rsps: RequestsMock) -> None:
    rsps.get(f"{BASE}/manifests/{DIGEST}", status=404, json={"errors": [{"code": "MANIFEST_UNKNOWN",
                                                                          "message": "manifest unknown"}]})  # fmt: skip
    with pytest.raises(NotFound, match="MANIFEST_UNKNOWN"):
        client().get_manifest(parse_reference(f"{REG}/team/app@{DIGEST}"))


def test_attempts_are_bounded(rsps: RequestsMock) -> None:
    sleeps: list[float] = []
    for _ in range(3):
        rsps.get(f"{BASE}/manifests/{DIGEST}", status=500)
    with pytest.raises(Transient, match="500"):
        client(sleeps=sleeps, attempts=3).get_manifest(parse_reference(f"{REG}/team/app@{DIGEST}"))
    assert len(sleeps) == 2


def test_a_manifest_that_does_not_match_its_digest_is_rejected(rsps: RequestsMock) -> None:
    rsps.get(f"{BASE}/manifests/{DIGEST}", body=MANIFEST + b" ")
    with pytest.raises(DigestMismatch, match=DIGEST):
        client().get_manifest(parse_reference(f"{REG}/team/app@{DIGEST}"))


def test_a_tag_manifest_is_checked_against_docker_content_digest(rsps: RequestsMock) -> None:
    rsps.get(f"{BASE}/manifests/v1", body=MANIFEST, headers={"Docker-Content-Digest": "sha256:" + "0" * 64})
    with pytest.raises(DigestMismatch):
        client().get_manifest(parse_reference(f"{REG}/team/app:v1"))


def test_blob_is_streamed_verified_and_deleted_on_mismatch(rsps: RequestsMock, tmp_path: Path) -> None:
    data = b"layer bytes" * 1000
    digest = "sha256:" + hashlib.sha256(data).hexdigest()
    rsps.get(f"{BASE}/blobs/{digest}", body=data)
    target = tmp_path / "blob"
    ref = parse_reference(f"{REG}/team/app@{digest}")
    c = client()
    c.fetch_blob_to(ref.repository, ref.digest, len(data), target)  # type: ignore[arg-type]
    assert target.read_bytes() == data
    again = tmp_path / "again"  # a file holding the whole blob already is verified, not fetched again
    c.fetch_blob_to(ref.repository, ref.digest, len(data), target)  # type: ignore[arg-type]
    rsps.get(f"{BASE}/blobs/{digest}", body=b"tampered" + data[8:])
    with pytest.raises(DigestMismatch):
        c.fetch_blob_to(ref.repository, ref.digest, len(data), again)  # type: ignore[arg-type]
    assert not again.exists() or again.stat().st_size == 0


def test_a_blob_body_is_handed_on_in_half_mebibyte_chunks(rsps: RequestsMock, tmp_path: Path) -> None:
    """Each chunk costs the hashing thread, the cache file and the tee a hand-over: 512 KiB ones halve them (CPU)."""
    data = bytes(range(256)) * (9 << 10) + b"end"  # 2.25 MiB and 3 bytes
    digest = "sha256:" + hashlib.sha256(data).hexdigest()
    rsps.get(f"{BASE}/blobs/{digest}", body=data)
    ref = parse_reference(f"{REG}/team/app@{digest}")
    seen: list[int] = []
    client().fetch_blob_to(ref.repository, ref.digest, len(data), tmp_path / "blob",  # type: ignore[arg-type]
                           on_chunk=lambda _offset, chunk: seen.append(len(chunk)))  # fmt: skip
    assert seen == [512 << 10] * 4 + [(256 << 10) + 3]


def test_presence_probes_report_each_status(rsps: RequestsMock) -> None:
    ref = parse_reference(f"{REG}/team/app@{DIGEST}")
    rsps.head(f"{BASE}/manifests/{DIGEST}", status=200)
    rsps.head(f"{BASE}/manifests/{DIGEST}", status=404)
    rsps.head(f"{BASE}/manifests/{DIGEST}", status=403)
    c = client(attempts=1)
    assert c.exists(ref.repository, ref.digest) is ImageStatus.PRESENT  # type: ignore[arg-type]
    assert c.exists(ref.repository, ref.digest) is ImageStatus.MISSING  # type: ignore[arg-type]
    assert c.exists(ref.repository, ref.digest) is ImageStatus.DENIED  # type: ignore[arg-type]
    rsps.head(f"{BASE}/manifests/{DIGEST}", status=500)
    assert c.exists(ref.repository, ref.digest) is ImageStatus.ERROR  # type: ignore[arg-type]


def test_tags_are_listed_across_pages(rsps: RequestsMock) -> None:
    rsps.get(f"{BASE}/tags/list?n=1000", json={"tags": ["a", "b"]},
             headers={"Link": '</v2/team/app/tags/list?n=1000&last=b>; rel="next"'})  # fmt: skip
    rsps.get(f"{BASE}/tags/list?n=1000&last=b", json={"tags": ["c"]})
    assert client().list_tags(parse_reference(f"{REG}/team/app").repository) == ["a", "b", "c"]


def test_a_next_page_link_with_spaces_is_requested_escaped_as_a_redirect_is(rsps: RequestsMock) -> None:
    """A hostile `Link` (a space, a tab, UTF-8 bytes) was put on the request line as it came: a ValueError."""
    utf8 = "\u00e9".encode().decode("latin-1")  # the header's bytes as http.client hands them on
    rsps.get(f"{BASE}/tags/list?n=1000", json={"tags": ["a"]},
             headers={"Link": f'</v2/team/app/tags/list?n=1000&last=a b\tc{utf8}>; rel="next"'})  # fmt: skip
    rsps.get(f"{BASE}/tags/list", json={"tags": ["d"]})
    assert client().list_tags(parse_reference(f"{REG}/team/app").repository) == ["a", "d"]
    assert rsps.calls[-1].request.url.endswith("/tags/list?n=1000&last=a%20bc%C3%A9")  # urlsplit drops tabs


@pytest.mark.parametrize("answer", [[1], {"tags": 5}, {"tags": "abc"}, {"tags": [{"a": 1}]}, "tags"])
def test_a_tag_list_that_is_not_a_list_of_strings_is_a_registry_error(rsps: RequestsMock, answer: object) -> None:
    rsps.get(f"{BASE}/tags/list?n=1000", json=answer)
    with pytest.raises(RegistryError, match="not a tag list"):
        client().list_tags(parse_reference(f"{REG}/team/app").repository)


@pytest.mark.parametrize(
    "answer",
    [{"token": "a\r\nX-Injected: 1"}, {"token": "t\u00f6k\u20acn"}, {"token": "a b"}, {"token": ""},
     {"token": {"nested": 1}}, {"access_token": 5}, [1], "token"],
)  # fmt: skip
def test_a_token_that_cannot_be_sent_as_a_header_is_a_registry_error(rsps: RequestsMock, answer: object) -> None:
    """A token endpoint is the registry's: what it sends must be text a header can carry, or the endpoint is named.

    A token with a CR/LF, a space, non-ASCII text or no text at all ended the run as an internal error (ValueError,
    UnicodeEncodeError, AttributeError).
    """
    challenge = f'Bearer realm="https://auth.example.com/token",service="{REG}"'
    rsps.get(f"{BASE}/manifests/{DIGEST}", status=401, headers={"WWW-Authenticate": challenge})
    rsps.get("https://auth.example.com/token", json=answer)
    with pytest.raises(
        RegistryError, match=re.escape("token endpoint https://auth.example.com/token sent no usable token")
    ):
        client().get_manifest(parse_reference(f"{REG}/team/app@{DIGEST}"))


@pytest.mark.parametrize(
    "realm",
    ["https://auth.example.com:99999/token", "https://[::1/token", "https://auth.example.com:1:2/token",
     "file:///etc/passwd", "ftp://auth.example.com/token", "/token", "https:///token"],
)  # fmt: skip
def test_a_bearer_realm_that_is_no_http_url_is_refused_naming_it(rsps: RequestsMock, realm: str) -> None:
    """The registry names the realm: a bad port or bracket was an internal ValueError; ftp:// was asked over HTTP."""
    challenge = f'Bearer realm="{realm}",service="{REG}"'
    rsps.get(f"{BASE}/manifests/{DIGEST}", status=401, headers={"WWW-Authenticate": challenge})
    with pytest.raises(Unauthorized, match=re.escape(f"sent a Bearer challenge with an unusable realm {realm!r}")):
        client().get_manifest(parse_reference(f"{REG}/team/app@{DIGEST}"))


def test_loopback_falls_back_to_plain_http_and_counts_the_failed_connection(rsps: RequestsMock) -> None:
    rsps.head("https://127.0.0.1:5000/v2/app/manifests/v1", body=ConnectionError("refused"))
    rsps.head("http://127.0.0.1:5000/v2/app/manifests/v1", headers={"Docker-Content-Digest": DIGEST})
    c = client()
    assert str(c.resolve(parse_reference("127.0.0.1:5000/app:v1")).digest) == DIGEST
    assert c.stats.connect_errors == 1
    assert c.stats.total == 1


def test_public_hosts_never_fall_back_to_plain_http(rsps: RequestsMock) -> None:
    for _ in range(2):
        rsps.head(f"{BASE}/manifests/v1", body=ConnectionError("refused"))
    with pytest.raises(Transient, match="reachable"):
        client(attempts=2).resolve(parse_reference(f"{REG}/team/app:v1"))


def test_a_refused_connection_is_not_retried(rsps: RequestsMock) -> None:
    refused = ConnectionRefusedError(errno.ECONNREFUSED, "Connection refused")
    rsps.head(f"{BASE}/manifests/v1", body=refused)
    sleeps: list[float] = []
    c = client(sleeps=sleeps)
    with pytest.raises(Transient, match="connect: connection refused"):
        c.resolve(parse_reference(f"{REG}/team/app:v1"))
    assert (c.stats.connect_errors, sleeps) == (1, [])


def test_a_reset_connection_is_still_retried(rsps: RequestsMock) -> None:
    reset = ConnectionResetError(errno.ECONNRESET, "Connection reset by peer")
    for _ in range(3):
        rsps.head(f"{BASE}/manifests/v1", body=reset)
    sleeps: list[float] = []
    c = client(sleeps=sleeps, attempts=3)
    with pytest.raises(Transient, match="connection reset by peer"):
        c.resolve(parse_reference(f"{REG}/team/app:v1"))
    assert (c.stats.connect_errors, len(sleeps)) == (3, 2)


def test_unknown_ca_names_the_x509_error_kapp_controller_matches(rsps: RequestsMock) -> None:
    error = ssl.SSLCertVerificationError(
        "[SSL: CERTIFICATE_VERIFY_FAILED] certificate verify failed: unable to get local issuer certificate"
    )
    rsps.head(f"{BASE}/manifests/v1", body=error)
    with pytest.raises(TLSVerifyError, match="x509: certificate signed by unknown authority"):
        client().resolve(parse_reference(f"{REG}/team/app:v1"))


def test_the_run_deadline_bounds_retries(rsps: RequestsMock) -> None:
    rsps.get(f"{BASE}/manifests/{DIGEST}", status=503)
    with pytest.raises(Transient, match="deadline"):
        client(timeout=0.1, sleeps=[]).get_manifest(parse_reference(f"{REG}/team/app@{DIGEST}"))


def test_resolve_falls_back_to_get_when_head_is_refused(rsps: RequestsMock) -> None:
    rsps.head(f"{BASE}/manifests/v1", status=405)
    rsps.get(f"{BASE}/manifests/v1", body=MANIFEST)
    resolved = client().resolve(parse_reference(f"{REG}/team/app:v1"))
    assert str(resolved.digest) == DIGEST
    assert resolved.raw == MANIFEST


@pytest.mark.parametrize("header", ["sha256:xyz", "md5:abc", "garbage"])
def test_a_malformed_digest_from_the_registry_is_a_registry_error_not_a_usage_error(
    rsps: RequestsMock, header: str
) -> None:
    rsps.head(f"{BASE}/manifests/v1", headers={"Docker-Content-Digest": header, "Content-Type": "x"})
    rsps.get(f"{BASE}/manifests/v2", body=MANIFEST, headers={"Docker-Content-Digest": header})
    for tag in ("v1", "v2"):
        call = client().resolve if tag == "v1" else client().get_manifest
        with pytest.raises(RegistryError, match="the registry served an invalid digest") as caught:
            call(parse_reference(f"{REG}/team/app:{tag}"))
        assert caught.value.exit_code == 1


def test_a_malformed_descriptor_digest_in_a_served_manifest_is_a_registry_error() -> None:
    from ocivendir.oci.manifest import parse_manifest  # noqa: PLC0415

    config = f'{{"mediaType":"application/vnd.oci.image.config.v1+json","digest":"{DIGEST}","size":2}}'
    layer = '{"mediaType":"application/vnd.oci.image.layer.v1.tar+gzip","digest":"sha256:../../x","size":1}'
    bad = MANIFEST.replace(b'"config":{},"layers":[]', f'"config":{config},"layers":[{layer}]'.encode())
    with pytest.raises(RegistryError, match="invalid digest") as caught:
        parse_manifest(bad)
    assert caught.value.exit_code == 1


DEEP = b"[" * 100_000 + b"]" * 100_000  # Go's encoding/json stops at 10,000 levels: "exceeded max depth"


def test_a_manifest_or_config_nested_past_the_stack_is_invalid_json_not_a_recursion_error() -> None:
    from ocivendir.oci.manifest import parse_config, parse_manifest  # noqa: PLC0415

    for parse in (parse_manifest, parse_config):
        with pytest.raises(UnsupportedMediaType, match="is not valid JSON: Nested too deeply"):
            parse(DEEP)


@pytest.mark.parametrize("where", ["token", "tag list", "error body"])
def test_registry_json_nested_past_the_stack_is_a_registry_error_not_a_recursion_error(
    rsps: RequestsMock, where: str
) -> None:
    """json.loads raises RecursionError (no ValueError) 100,000 levels down: it ended the run as an internal error."""
    ref = parse_reference(f"{REG}/team/app@{DIGEST}")
    if where == "token":
        challenge = f'Bearer realm="https://auth.example.com/token",service="{REG}"'
        rsps.get(f"{BASE}/manifests/{DIGEST}", status=401, headers={"WWW-Authenticate": challenge})
        rsps.get("https://auth.example.com/token", body=DEEP)
        with pytest.raises(RegistryError, match="sent no usable token"):
            client().get_manifest(ref)
    elif where == "tag list":
        rsps.get(f"{BASE}/tags/list?n=1000", body=DEEP)
        with pytest.raises(RegistryError, match="invalid JSON in the answer"):
            client().list_tags(ref.repository)
    else:
        rsps.get(f"{BASE}/manifests/{DIGEST}", status=404, body=DEEP)
        with pytest.raises(NotFound):
            client().get_manifest(ref)


def test_the_token_endpoint_is_reached_through_the_proxy_as_the_registry_is(rsps: RequestsMock) -> None:
    plain = "registry.internal"
    refused = ConnectionRefusedError(errno.ECONNREFUSED, "Connection refused")
    rsps.head(f"https://{plain}/v2/team/app/manifests/v1", body=refused)  # no HTTPS_PROXY: https goes direct
    challenge = 'Bearer realm="http://auth.internal/token",service="svc"'
    rsps.head(f"http://{plain}/v2/team/app/manifests/v1", status=401, headers={"WWW-Authenticate": challenge})
    rsps.get("http://auth.internal/token", json={"token": "t"})
    rsps.head(f"http://{plain}/v2/team/app/manifests/v1", headers={"Docker-Content-Digest": DIGEST},
              match=[matchers.header_matcher({"Authorization": "Bearer t"})])  # fmt: skip
    options = ClientOptions(insecure_hosts=frozenset({plain}), proxy=ProxyConfig(http_proxy="proxy.internal:3128"))
    c = RegistryClient(options, lambda _r, _p, **_: Credential())
    assert str(c.resolve(parse_reference(f"{plain}/team/app:v1")).digest) == DIGEST
    proxies = [call.request.req_kwargs["proxies"] for call in rsps.calls]  # type: ignore[union-attr]
    assert proxies == [{}] + [{"http": "http://proxy.internal:3128"}] * 3


def test_a_registry_message_reaches_the_terminal_without_its_control_characters(rsps: RequestsMock) -> None:
    """An escape sequence in a registry's error message could rewrite the user's terminal: it is shown as `?`."""
    message = "gone\x1b]0;pwned\x07\x1b[2J\r\nFAKE: ok"
    rsps.get(f"{BASE}/manifests/{DIGEST}", status=404, json={"errors": [{"code": "MANIFEST_UNKNOWN",
                                                                        "message": message}]})  # fmt: skip
    with pytest.raises(NotFound) as caught:
        client().get_manifest(parse_reference(f"{REG}/team/app@{DIGEST}"))
    assert "MANIFEST_UNKNOWN: gone?]0;pwned??[2J??FAKE: ok" in str(caught.value)
    assert not any(c in str(caught.value) for c in "\x1b\x07\r\n")


@pytest.mark.parametrize("token", ["a\r\nX-Injected: 1", "t\u00f6k\u20acn", "a b"])
def test_a_registry_token_a_header_cannot_carry_is_refused_naming_the_registry(rsps: RequestsMock, token: str) -> None:
    """`--registry-token` / IMGPKG_TOKEN with a CR/LF or non-ASCII text ended the run as an internal ValueError."""
    challenge = f'Bearer realm="https://auth.example.com/token",service="{REG}"'
    rsps.get(f"{BASE}/manifests/{DIGEST}", status=401, headers={"WWW-Authenticate": challenge})
    with pytest.raises(Unauthorized, match=re.escape(f"the registry token for {REG} has characters an Authorization")):
        client(Credential(registry_token=token)).get_manifest(parse_reference(f"{REG}/team/app@{DIGEST}"))
    assert [call.request.url for call in rsps.calls] == [f"{BASE}/manifests/{DIGEST}"]  # the token was never sent


def test_basic_auth_is_utf8_as_go_encodes_it_so_any_password_can_be_sent() -> None:
    """Go's net/http sends the string's own (UTF-8) bytes; latin-1 sent other bytes for `ü` and could not send `€`."""
    assert (
        basic_auth("j\u00fcrgen", "p\u20acss") == "Basic " + base64.b64encode("j\u00fcrgen:p\u20acss".encode()).decode()
    )
