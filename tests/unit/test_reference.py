"""References parse and canonicalise as go-containerregistry's weak validation does (imgpkg-bundles spec §3)."""

from __future__ import annotations

import random
import re

import pytest

from ocivendir.errors import BadReference
from ocivendir.oci.reference import is_plain_http_host, parse_digest, parse_reference, vendir_tag
from tests.support.fresh import fresh_python

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


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("user:hunter2@r.io/team/app:v1", "<credentials>@r.io/team/app:v1"),
        ("user:hunter2@r.io:5000/team/app", "<credentials>@r.io:5000/team/app"),
        (f"user@r.io/app@sha256:{HEX}", f"<credentials>@r.io/app@sha256:{HEX}"),
        ("https://user:hunter2@r.io/app", "https://<credentials>@r.io/app"),
    ],
)
def test_credentials_in_a_reference_are_a_reference_error_that_never_shows_them(text: str, shown: str) -> None:
    with pytest.raises(BadReference) as caught:
        parse_reference(text)
    assert caught.value.message.startswith(f"could not parse reference: {shown}")
    assert "digest" not in caught.value.message  # was: "unsupported digest algorithm"
    assert "hunter2" not in str(caught.value)
    assert caught.value.exit_code == 2
    assert parse_reference(f"nginx@sha256:{HEX}").digest is not None  # an `@` after the name is still a digest


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


# the regular expressions this module used before its checks became str methods: the oracle of the test below
_OLD_LABEL = r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
_OLD = {
    "host": re.compile(rf"(?:\[[0-9A-Fa-f:.]+\]|{_OLD_LABEL}(?:\.{_OLD_LABEL})*)(?::(?P<port>[0-9]{{1,5}}))?"),
    "tag": re.compile(r"[A-Za-z0-9_.-]{1,128}"),
    "repo": re.compile(r"[a-z0-9_./-]+"),
    "hex": re.compile(r"[0-9a-f]{64}"),
    "vendir": re.compile(r"\A(.+?)(:[0-9a-zA-Z_\-\.]+)?(@[0-9a-z]+:[0-9a-z]+)?\Z"),
}


def _old_parse(text: str) -> str | None:
    """parse_reference as the regexes decided it: the canonical form, or None for BadReference."""
    if not text or text != text.strip() or "://" in text:
        return None
    digest = None
    if "@" in text:
        text, _, digest = text.partition("@")
        algorithm, _, hex_part = digest.partition(":")
        if "@" in digest or algorithm != "sha256" or not _OLD["hex"].fullmatch(hex_part):
            return None
    tag = None
    colon = text.rfind(":")
    if colon != -1 and "/" not in text[colon + 1 :]:
        text, tag = text[:colon], text[colon + 1 :]
        if not _OLD["tag"].fullmatch(tag):
            return None
    head, sep, repo = text.partition("/")
    registry = head if sep and ("." in head or ":" in head) else "index.docker.io"
    repo = repo if registry == head else text
    host = _OLD["host"].fullmatch(registry)
    if not host or int(host.group("port") or 0) > 65535:
        return None
    if not 2 <= len(repo) <= 255 or not _OLD["repo"].fullmatch(repo) or {"", ".", ".."} & set(repo.split("/")):
        return None
    registry = "index.docker.io" if registry in {"docker.io", "index.docker.io"} else registry
    repo = f"library/{repo}" if registry == "index.docker.io" and "/" not in repo else repo
    return f"{registry}/{repo}@{digest}" if digest else f"{registry}/{repo}:{tag or 'latest'}"


def _old_vendir_tag(url: str) -> str | None:
    match = _OLD["vendir"].match(url)
    return match.group(2)[1:] if match and match.group(2) else None


def _new_parse(text: str) -> str | None:
    try:
        return str(parse_reference(text))
    except BadReference:
        return None


def _corpus() -> list[str]:
    hosts = [
        "r.io",
        "R-1.io",
        "a.b.c",
        "-a.io",
        "a-.io",
        "a..b",
        "[::1]",
        "[fe80::1%]",
        "[1:2]x",
        "localhost",
        "é.io",
        "docker.io",
        "a" * 64 + ".io",
        "127.0.0.1",
        "x_y.io",
        "",
    ]
    ports = ["", ":5000", ":65535", ":65536", ":0", ":123456", ":", ":x"]
    paths = ["/a", "/a_b.c-d", "/UP", "/a/b", "//a", "/./a", "/../a", "/a/", "", "/" + "r" * 260, "/é"]
    tags = ["", ":v1", ":V_1.2-x", ":", ":a/b", ":" + "t" * 128, ":" + "t" * 129, ":é"]
    digests = [
        "",
        f"@sha256:{HEX}",
        f"@sha256:{HEX.upper()}",
        f"@sha512:{HEX}",
        "@md5:ab",
        "@",
        "@x@y",
        f"@sha256:{HEX[:-1]}",
    ]
    rng = random.Random(12)  # noqa: S311 - reproducible test data
    found = {rng.choice(hosts) + rng.choice(ports) + rng.choice(paths) + rng.choice(paths) + rng.choice(tags)
             + rng.choice(digests) for _ in range(8000)}  # fmt: skip
    found |= {"".join(rng.choice("ab1.-_:/@[]Z\n ") for _ in range(rng.randint(1, 12))) for _ in range(4000)}
    return sorted(found)


def test_the_str_checks_decide_exactly_as_the_old_regular_expressions() -> None:
    corpus = _corpus()
    assert [(t, _new_parse(t)) for t in corpus] == [(t, _old_parse(t)) for t in corpus]
    assert [(t, vendir_tag(t)) for t in corpus] == [(t, _old_vendir_tag(t)) for t in corpus]
    assert sum(_old_parse(t) is not None for t in corpus) > 100  # the corpus reaches the valid side too
    assert sum(_old_vendir_tag(t) is not None for t in corpus) > 100


@pytest.mark.parametrize(
    "host",
    ["127.0.0.1", "127.9.9.9:5000", "10.1.2.3", "172.15.0.1", "172.16.0.1", "172.31.255.255", "172.32.0.1",
     "192.168.1.1", "192.169.0.1", "8.8.8.8", "256.0.0.1", "01.0.0.1", "127.0.0.01", "1.2.3", "0.0.0.0",  # noqa: S104 - a host name, not a bind
     "\u0661\u0662\u0667.0.0.1", "[::1]:5000", "reg.local", "example.com"],
)  # fmt: skip
def test_a_dotted_ipv4_host_is_judged_as_ipaddress_judges_it(host: str) -> None:
    import ipaddress  # noqa: PLC0415

    name = host.rsplit(":", 1)[0].strip("[]") if host.count(":") == 1 or host.startswith("[") else host
    try:
        address = ipaddress.ip_address(name)
        private = ("10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16")
        expected = address.is_loopback or any(address in ipaddress.ip_network(n) for n in private)
    except ValueError:
        expected = name.endswith(".local")
    assert is_plain_http_host(host) is expected


def test_a_loopback_ipv4_registry_is_judged_without_importing_ipaddress() -> None:
    code = (
        "import sys\nfrom ocivendir.oci.reference import is_plain_http_host\n"
        "print(is_plain_http_host('127.0.0.1:5000'), is_plain_http_host('8.8.8.8'), 'ipaddress' in sys.modules)"
    )
    done = fresh_python(code)
    assert done.stdout == "True False False\n"


def test_a_parsed_reference_is_kept_and_a_refused_one_refused_every_time() -> None:
    """A worker parses the same references call after call: the frozen answer is kept, never a failure."""
    text = "registry.example:5000/team/app@sha256:" + "a" * 64
    assert parse_reference(text) is parse_reference(text)
    assert parse_digest("sha256:" + "b" * 64) is parse_digest("sha256:" + "b" * 64)
    for _ in range(2):
        with pytest.raises(BadReference):
            parse_reference("user:secret@registry.example/app@sha256:" + "a" * 64)
