"""References parse and canonicalise as go-containerregistry's weak validation does (imgpkg-bundles spec §3)."""

from __future__ import annotations

import pytest

from ocivendir.errors import BadReference
from ocivendir.oci.reference import is_plain_http_host, parse_digest, parse_reference, vendir_tag

HEX = "75ffea7db4202cd300cda12f5ad43695ef14e731614189cb59bf504729e05c47"


@pytest.mark.parametrize(
    ("text", "canonical", "registry", "repo", "tag"),
    [
        ("nginx", "index.docker.io/library/nginx:latest", "index.docker.io", "library/nginx", None),
        ("nginx:1.25", "index.docker.io/library/nginx:1.25", "index.docker.io", "library/nginx", "1.25"),
        ("docker.io/x/y", "index.docker.io/x/y:latest", "index.docker.io", "x/y", None),
        ("docker.io/nginx", "index.docker.io/library/nginx:latest", "index.docker.io", "library/nginx", None),
        ("localhost/foo", "index.docker.io/localhost/foo:latest", "index.docker.io", "localhost/foo", None),
        ("localhost:5000/foo", "localhost:5000/foo:latest", "localhost:5000", "foo", None),
        ("host:5000/repo", "host:5000/repo:latest", "host:5000", "repo", None),
        ("127.0.0.1:5111/test/img:v1", "127.0.0.1:5111/test/img:v1", "127.0.0.1:5111", "test/img", "v1"),
        ("gcr.io/a/b/c/d:x_y.z-1", "gcr.io/a/b/c/d:x_y.z-1", "gcr.io", "a/b/c/d", "x_y.z-1"),
        (f"r.io/app@sha256:{HEX}", f"r.io/app@sha256:{HEX}", "r.io", "app", None),
        (f"r.io/app:v1@sha256:{HEX}", f"r.io/app@sha256:{HEX}", "r.io", "app", None),
        (f"library/image_with_config@sha256:{HEX}", f"index.docker.io/library/image_with_config@sha256:{HEX}",
         "index.docker.io", "library/image_with_config", None),
    ],
)  # fmt: skip
def test_valid_references_canonicalise(text: str, canonical: str, registry: str, repo: str, tag: str | None) -> None:
    ref = parse_reference(text)
    assert str(ref) == canonical
    assert ref.repository.registry == registry
    assert ref.repository.path == repo
    assert ref.tag == tag


@pytest.mark.parametrize(
    "text",
    [
        "", " nginx", "Nginx", "r.io/UPPER", "r.io/a", "127.0.0.1:1/a", "http://r.io/app", "https://r.io/app",
        "r.io/app:", "r.io/app:bad tag", "r.io//app", "r.io/app/", f"r.io/app@sha256:{HEX.upper()}",
        f"r.io/app@sha256:{HEX[:10]}", f"r.io/app@sha512:{HEX}", "r.io/app@", f"r.io/app@sha256:{HEX}@x",
        "r.io/app:" + "t" * 129, "r.io/app/../x", "r.io/../app", "r.io/./app", "r.io/app/.", "r.io/app/..:v1",
        f"r.io/a/../b@sha256:{HEX}", "../app", "app/./x", "127.0.0.1:99999/app/x", "r..io/app", "a-.io/app",
        "-a.io/app", f"{'a' * 64}.io/app",
    ],
)  # fmt: skip
def test_invalid_references_are_refused_naming_the_reference(text: str) -> None:
    with pytest.raises(BadReference) as caught:
        parse_reference(text)
    assert text.strip() in str(caught.value) or "digest" in str(caught.value)


def test_digest_rules() -> None:
    assert str(parse_digest(f"sha256:{HEX}")) == f"sha256:{HEX}"
    assert parse_digest(f"sha256:{HEX}").tag_form == f"sha256-{HEX}"
    with pytest.raises(BadReference, match="unsupported digest algorithm"):
        parse_digest(f"sha512:{HEX}")
    with pytest.raises(BadReference, match="64 lowercase hex"):
        parse_digest("sha256:abc")


def test_same_repository_compares_registry_and_path() -> None:
    a = parse_reference(f"r.io/app@sha256:{HEX}")
    assert a.same_repository(parse_reference("r.io/app:v2"))
    assert not a.same_repository(parse_reference("r.io/other:v2"))
    assert not a.same_repository(parse_reference("s.io/app:v2"))


def test_docker_hub_api_host_is_registry_1() -> None:
    assert parse_reference("nginx").repository.api_host == "registry-1.docker.io"
    assert parse_reference("r.io/x/y").repository.api_host == "r.io"


@pytest.mark.parametrize(
    ("url", "tag"),
    [("repo:v1", "v1"), (f"repo:v1@sha256:{HEX}", "v1"), (f"repo@sha256:{HEX}", None), ("host:5000/repo", None),
     ("host:5000/repo:1.0", "1.0"), ("repo", None)],
)  # fmt: skip
def test_vendir_tag_follows_vendirs_regex(url: str, tag: str | None) -> None:
    assert vendir_tag(url) == tag


@pytest.mark.parametrize(
    ("host", "plain"),
    [("127.0.0.1:5000", True), ("127.9.9.9", True), ("[::1]:5000", True), ("localhost:80", True),
     ("registry.local", True), ("a.svc.cluster.local", True), ("10.1.2.3:5000", True), ("172.16.0.1", True),
     ("192.168.1.1", True), ("172.32.0.1", False), ("8.8.8.8", False), ("gcr.io", False), ("169.254.1.1", False)],
)  # fmt: skip
def test_plain_http_fallback_only_for_ggcrs_hosts(host: str, plain: bool) -> None:
    assert is_plain_http_host(host) is plain
