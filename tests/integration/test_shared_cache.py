"""A cache shared by several callers does not hand private content to a caller who could not fetch it (issue 9.10).

Two layers: possession (a repository is served from the cache only what it once served itself, verified — so a lying
registry naming someone else's digests gets nothing) and credential grants on top (who may read it there).
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import shutil
import sqlite3
import ssl
import stat
import subprocess
from pathlib import Path

import pytest

from tests.conftest import run_cli
from tests.support.builders import DOCKER_CONFIG, DOCKER_LAYER, DOCKER_MANIFEST, Image, Pusher, make_image, sha
from tests.support.faults import Rule, fault_proxy
from tests.support.registry import PASSWORD, USERNAME, Registry

SECOND_USER, SECOND_PASSWORD = "second", "other-pass-2"  # fixtures/htpasswd


def pull_as(ref: str, out: Path, cache: Path, user: str | None, password: str | None) -> tuple[int, str]:
    creds = ["--registry-username", user, "--registry-password", password or ""] if user else []
    result = run_cli("pull", "-i", ref, "-o", str(out), "--cache-dir", str(cache), *creds)
    return result.exit_code, result.stderr


def manifest_requests(registry: Registry, mark: int) -> list[tuple[str, int]]:
    return [(m, s) for m, p, s in registry.since(mark) if "/manifests/" in p or "/blobs/" in p]


SECRET_IMAGE = make_image({"secret.txt": "s3cret"})


@pytest.fixture
def private(auth_registry: Registry, repo_prefix: str, tmp_path: Path) -> tuple[str, Path]:
    ref = Pusher(auth_registry).image(f"{repo_prefix}/private", SECRET_IMAGE)
    cache = tmp_path / "cache"
    assert pull_as(ref, tmp_path / "first", cache, USERNAME, PASSWORD)[0] == 0
    return ref, cache


def naming(image: Image) -> bytes:
    """The attacker's own manifest (its digest verifies) naming the config and layers of someone else's image."""
    doc = {
        "schemaVersion": 2,
        "mediaType": DOCKER_MANIFEST,
        "config": {"mediaType": DOCKER_CONFIG, "size": len(image.config), "digest": sha(image.config)},
        "layers": [{"mediaType": DOCKER_LAYER, "size": len(layer), "digest": sha(layer)} for layer in image.layers],
        "annotations": {"by": "attacker"},
    }
    return json.dumps(doc).encode()


def lying(proxy_rules: list[Rule], digest: str) -> None:
    """A registry that answers 200 (naming `digest`) to every HEAD, whatever it is asked."""
    proxy_rules.append(Rule("HEAD", ".", status=200, headers={"Docker-Content-Digest": digest,
                                                             "Content-Type": DOCKER_MANIFEST}))  # fmt: skip


def test_the_same_credential_is_served_from_the_cache_with_zero_requests(
    auth_registry: Registry, private: tuple[str, Path], tmp_path: Path
) -> None:
    ref, cache = private
    mark = auth_registry.mark()
    code, stderr = pull_as(ref, tmp_path / "again", cache, USERNAME, PASSWORD)
    assert code == 0, stderr
    assert auth_registry.since(mark) == []
    key = cache / "grants.key"
    assert stat.S_IMODE(key.stat().st_mode) == 0o600
    assert PASSWORD.encode() not in (cache / "index.db").read_bytes()


def test_a_caller_without_credentials_is_refused_and_gets_nothing(
    auth_registry: Registry, private: tuple[str, Path], tmp_path: Path
) -> None:
    ref, cache = private
    mark = auth_registry.mark()
    code, stderr = pull_as(ref, tmp_path / "anon", cache, None, None)
    assert code == 1
    assert "requires authentication" in stderr or "cannot read" in stderr or "does not let" in stderr
    assert not (tmp_path / "anon").exists()
    assert manifest_requests(auth_registry, mark) == [("GET", 401)]  # as with an empty cache: refused, no content


def test_a_bad_secret_is_refused(auth_registry: Registry, private: tuple[str, Path], tmp_path: Path) -> None:
    ref, cache = private
    mark = auth_registry.mark()
    code, stderr = pull_as(ref, tmp_path / "wrong", cache, USERNAME, "not-the-pass-7")
    assert code == 1
    assert "not-the-pass-7" not in stderr
    assert not (tmp_path / "wrong").exists()
    assert all(m == "GET" and s == 401 for m, s in manifest_requests(auth_registry, mark))


def test_another_valid_user_proves_access_with_one_manifest_get_then_is_served_with_zero_requests(
    auth_registry: Registry, private: tuple[str, Path], tmp_path: Path
) -> None:
    ref, cache = private
    mark = auth_registry.mark()
    code, stderr = pull_as(ref, tmp_path / "second", cache, SECOND_USER, SECOND_PASSWORD)
    assert code == 0, stderr
    assert (tmp_path / "second/secret.txt").read_text() == "s3cret"
    assert [r for r in manifest_requests(auth_registry, mark) if r[1] == 200] == [("GET", 200)]  # no blob
    mark = auth_registry.mark()
    assert pull_as(ref, tmp_path / "second-again", cache, SECOND_USER, SECOND_PASSWORD)[0] == 0
    assert auth_registry.since(mark) == []


def test_offline_a_caller_not_yet_seen_is_refused(private: tuple[str, Path], tmp_path: Path) -> None:
    ref, cache = private
    result = run_cli("pull", "-i", ref, "-o", str(tmp_path / "off"), "--cache-dir", str(cache), "--offline",
                     "--registry-username", SECOND_USER, "--registry-password", SECOND_PASSWORD)  # fmt: skip
    assert result.exit_code == 1
    assert "--offline" in result.stderr
    assert not (tmp_path / "off").exists()


def test_public_content_is_served_to_everyone_with_zero_requests(
    registry: Registry, pusher: Pusher, repo_prefix: str, tmp_path: Path
) -> None:
    ref = pusher.image(f"{repo_prefix}/public", make_image({"p.txt": "p"}))
    cache = tmp_path / "cache"
    assert pull_as(ref, tmp_path / "one", cache, None, None)[0] == 0
    mark = registry.mark()
    assert pull_as(ref, tmp_path / "two", cache, "someone", "anything")[0] == 0
    assert pull_as(ref, tmp_path / "three", cache, None, None)[0] == 0
    assert registry.since(mark) == []
    assert not (cache / "grants.key").exists()  # public content needs no fingerprint at all
    listed = json.loads(run_cli("cache", "ls", "--cache-dir", str(cache), "--json").stdout)
    assert [e["ref"] for e in listed["result"]["entries"]] == [ref]


def test_public_content_fetched_by_a_caller_with_credentials_is_still_public(
    registry: Registry, pusher: Pusher, repo_prefix: str, tmp_path: Path
) -> None:
    """A manifest a registry gave while no credential was sent is recorded as anyone's.

    Not as the first caller's (whose credential is not even looked up): a caller without credentials is then served
    with no request.
    """
    ref = pusher.image(f"{repo_prefix}/public", make_image({"p.txt": "p"}))
    cache = tmp_path / "cache"
    assert pull_as(ref, tmp_path / "one", cache, "someone", "anything")[0] == 0
    mark = registry.mark()
    assert pull_as(ref, tmp_path / "two", cache, None, None)[0] == 0
    assert registry.since(mark) == []
    assert not (cache / "grants.key").exists()


@pytest.mark.parametrize("config", ["{not json", '{"credsStore": "hangs"}'])
def test_an_anonymous_registry_never_reads_the_docker_config(
    registry: Registry, pusher: Pusher, repo_prefix: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, config: str
) -> None:
    """The docker config is read, and its helper run, only when a registry asks for credentials.

    Also with the shared cache, which records who may read what it fetched: a broken file or a helper that would hang
    is never met.
    """
    home = tmp_path / "home"
    (home / ".docker").mkdir(parents=True)
    (home / ".docker" / "config.json").write_text(config)
    helper = tmp_path / "bin" / "docker-credential-hangs"
    helper.parent.mkdir()
    helper.write_text(f"#!/bin/sh\ntouch {tmp_path / 'helper-ran'}\nsleep 600\n")
    helper.chmod(0o755)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("PATH", f"{helper.parent}:{os.environ['PATH']}")
    ref = pusher.image(f"{repo_prefix}/public", make_image({"p.txt": "p"}))
    for out in ("cold", "warm"):
        code, stderr = pull_as(ref, tmp_path / out, tmp_path / "cache", None, None)
        assert code == 0, stderr
    assert not (tmp_path / "helper-ran").exists()


def test_a_lying_registry_naming_a_victims_blob_digests_is_asked_for_them_itself_and_gets_nothing(
    auth_registry: Registry, registry: Registry, private: tuple[str, Path], tmp_path: Path
) -> None:
    _, cache = private
    crafted = naming(SECRET_IMAGE)
    with fault_proxy(registry.host) as attacker:
        attacker.rules.append(Rule("GET", f"/manifests/{sha(crafted)}", status=200, body=crafted,
                                   headers={"Content-Type": DOCKER_MANIFEST}))  # fmt: skip
        lying(attacker.rules, sha(crafted))
        mark = auth_registry.mark()
        code, stderr = pull_as(f"{attacker.host}/evil/app@{sha(crafted)}", tmp_path / "loot", cache, None, None)
        asked = [(m, p.rsplit("/", 1)[-1], s) for m, p, s in attacker.log]
    assert code == 1
    assert not (tmp_path / "loot").exists()
    assert "s3cret" not in stderr
    # the victim's config is fetched from the attacker's own registry, which cannot serve it
    assert ("GET", sha(SECRET_IMAGE.config), 404) in asked
    assert not [a for a in asked if a[0] == "HEAD"]  # a HEAD proves nothing for a repository that never served it
    assert auth_registry.since(mark) == []  # nothing was asked of (or revealed by) the victim's registry


@pytest.mark.parametrize("by", ["digest", "tag"])
def test_a_registry_answering_200_to_every_head_gains_nothing(
    registry: Registry, private: tuple[str, Path], tmp_path: Path, by: str
) -> None:
    ref, cache = private
    victim_digest = ref.split("@")[1]
    with fault_proxy(registry.host) as attacker:
        lying(attacker.rules, victim_digest)
        target = f"{attacker.host}/evil/app" + (f"@{victim_digest}" if by == "digest" else ":latest")
        code, stderr = pull_as(target, tmp_path / "loot", cache, None, None)
        asked = [(m, p.rsplit("/", 1)[-1], s) for m, p, s in attacker.log]
    assert code == 1, stderr
    assert not (tmp_path / "loot").exists()
    # the manifest is asked for by GET from the attacker's own storage (which does not have it), never served
    assert ("GET", victim_digest, 404) in asked
    assert not [a for a in asked if a[0] == "GET" and a[2] == 200]


def test_another_repository_of_the_same_registry_fetches_shared_blobs_itself_once(
    registry: Registry, pusher: Pusher, repo_prefix: str, tmp_path: Path
) -> None:
    image = make_image({"shared.txt": "same bytes"})
    first = pusher.image(f"{repo_prefix}/one", image)
    second = pusher.image(f"{repo_prefix}/two", image)
    cache = tmp_path / "cache"
    assert pull_as(first, tmp_path / "a", cache, None, None)[0] == 0
    blobs = sorted(path.name for path in (cache / "blobs/sha256").iterdir())
    mark = registry.mark()
    assert pull_as(second, tmp_path / "b", cache, None, None)[0] == 0
    fetched = sorted(p for m, p, _ in registry.since(mark) if m == "GET")
    assert fetched == sorted(
        [f"/v2/{repo_prefix}/two/manifests/{image.digest}"]
        + [f"/v2/{repo_prefix}/two/blobs/{sha(blob)}" for blob in image.blobs]
    )
    assert sorted(path.name for path in (cache / "blobs/sha256").iterdir()) == blobs  # stored once
    mark = registry.mark()
    assert pull_as(second, tmp_path / "c", cache, None, None)[0] == 0
    assert pull_as(first, tmp_path / "d", cache, None, None)[0] == 0
    assert registry.since(mark) == []


def test_an_index_from_before_possession_records_fetches_content_again_once(
    auth_registry: Registry, private: tuple[str, Path], tmp_path: Path
) -> None:
    ref, cache = private
    with contextlib.closing(sqlite3.connect(cache / "index.db")) as db, db:
        db.execute("DROP TABLE IF EXISTS possession")  # the index as ocivendir wrote it before possession existed,
        db.execute("PRAGMA user_version = 0")  # and before it stamped the file with its schema
    mark = auth_registry.mark()
    code, stderr = pull_as(ref, tmp_path / "again", cache, USERNAME, PASSWORD)
    assert code == 0, stderr
    assert (tmp_path / "again/secret.txt").read_text() == "s3cret"
    # the old index cannot say which repository served which bytes: manifest, config and layer are fetched again
    assert sorted(m for m, _, s in auth_registry.since(mark) if s == 200) == ["GET", "GET", "GET"]
    mark = auth_registry.mark()
    assert pull_as(ref, tmp_path / "third", cache, USERNAME, PASSWORD)[0] == 0
    assert auth_registry.since(mark) == []


def test_stale_if_error_names_a_digest_only_to_a_caller_that_read_it(
    auth_registry: Registry, repo_prefix: str, tmp_path: Path
) -> None:
    image = make_image({"tagged.txt": "private tag"})
    Pusher(auth_registry).image(f"{repo_prefix}/tagged", image, tag="v1")
    cache = tmp_path / "cache"
    with fault_proxy(auth_registry.host) as front:
        tag = f"{front.host}/{repo_prefix}/tagged:v1"
        assert pull_as(tag, tmp_path / "one", cache, USERNAME, PASSWORD)[0] == 0
        front.rules.append(Rule("*", ".", status=503))  # the registry is down from now on
        stale = ("--stale-if-error", "1h", "--timeout", "5s")
        anonymous = run_cli("pull", "-i", tag, "-o", str(tmp_path / "anon"), "--cache-dir", str(cache), *stale)
        other = run_cli("pull", "-i", tag, "-o", str(tmp_path / "other"), "--cache-dir", str(cache), *stale,
                        "--registry-username", USERNAME, "--registry-password", "wrong-pass-1")  # fmt: skip
        owner = run_cli("pull", "-i", tag, "-o", str(tmp_path / "owner"), "--cache-dir", str(cache), *stale,
                        "--registry-username", USERNAME, "--registry-password", PASSWORD)  # fmt: skip
    for refused in (anonymous, other):
        assert refused.exit_code == 1
        assert image.hex not in refused.stderr
        assert image.hex[:12] not in refused.stderr
    assert not (tmp_path / "anon").exists()
    assert not (tmp_path / "other").exists()
    assert owner.exit_code == 0, owner.stderr
    assert image.digest in owner.stderr  # the warning names the answer it used
    assert (tmp_path / "owner/tagged.txt").read_text() == "private tag"


def test_a_per_app_cache_serves_a_private_image_warm_with_zero_requests(
    auth_registry: Registry, repo_prefix: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ref = Pusher(auth_registry).image(f"{repo_prefix}/app", make_image({"app.yml": "private: true"}))
    auths = {"auths": {auth_registry.host: {"username": USERNAME, "password": PASSWORD}}}
    docker = base64.b64encode(json.dumps(auths).encode()).decode()
    stream = (
        "apiVersion: v1\nkind: Secret\nmetadata: {name: s}\ntype: kubernetes.io/dockerconfigjson\n"
        f"data: {{.dockerconfigjson: {docker}}}\n---\n"
        "apiVersion: vendir.k14s.io/v1alpha1\nkind: Config\ndirectories:\n- path: '0'\n  contents:\n"
        f"  - path: .\n    image:\n      url: {ref}\n      secretRef:\n        name: s\n"
    )
    monkeypatch.setenv("VENDIR_CACHE_DIR", str(tmp_path / "apps/uid-1"))
    runs = []
    for number in range(2):
        work = tmp_path / f"fetch{number}"
        work.mkdir()
        monkeypatch.chdir(work)
        mark = auth_registry.mark()
        result = run_cli("sync", "-f", "-", "--lock-file", "/dev/null", prog="vendir", stdin=stream)
        assert result.exit_code == 0, result.stderr
        assert (work / "0/app.yml").read_text() == "private: true"
        runs.append(auth_registry.since(mark))
    assert runs[0]
    assert runs[1] == []  # kapp-controller's per-App VENDIR_CACHE_DIR: a warm reconcile asks nothing


def test_links_planted_in_a_shared_cache_are_not_followed_by_a_pull(
    registry: Registry, pusher: Pusher, repo_prefix: str, tmp_path: Path
) -> None:
    image = make_image({"a.txt": "linked"})
    ref = pusher.image(f"{repo_prefix}/img", image)
    cache = tmp_path / "cache"
    assert pull_as(ref, tmp_path / "one", cache, None, None)[0] == 0
    layer = sha(image.layers[0]).split(":")[1]
    elsewhere, created = tmp_path / "elsewhere", tmp_path / "created-by-the-victim"
    elsewhere.mkdir()
    copy = elsewhere / "layer"
    copy.write_bytes(image.layers[0])
    (cache / f"blobs/sha256/{layer}").unlink()
    (cache / f"blobs/sha256/{layer}").symlink_to(copy)  # the right bytes, behind a link
    (cache / f"locks/blob-{layer}").unlink()
    (cache / f"locks/blob-{layer}").symlink_to(created)  # O_CREAT through it would create a file as the victim
    (cache / "tmp").rmdir()
    (cache / "tmp").symlink_to(elsewhere, target_is_directory=True)
    code, stderr = pull_as(ref, tmp_path / "two", cache, None, None)
    assert code == 0, stderr
    assert (tmp_path / "two/a.txt").read_text() == "linked"
    assert not created.exists()
    assert sorted(p.name for p in elsewhere.iterdir()) == ["layer"]  # nothing written to the link's target
    for name in (f"blobs/sha256/{layer}", f"locks/blob-{layer}", "tmp"):
        assert not (cache / name).is_symlink(), name
    assert (cache / f"blobs/sha256/{layer}").read_bytes() == image.layers[0]
    report = run_cli("cache", "verify", "--cache-dir", str(cache), "--json")
    assert report.exit_code == 0, report.stdout


def test_a_registries_yaml_login_is_the_callers_credential_to_the_cache(
    auth_registry: Registry, repo_prefix: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A registries.yaml `configs` auth is part of the caller's fingerprint.

    A caller whose only login was there counted as anonymous: the private image it fetched was then served to a caller
    with nothing, with no request (review).
    """
    ref = Pusher(auth_registry).image(f"{repo_prefix}/private", SECRET_IMAGE)
    cache = tmp_path / "cache"
    logged_in, empty = tmp_path / "registries.yaml", tmp_path / "empty.yaml"
    logged_in.write_text(
        f"configs:\n  {auth_registry.host}:\n    auth: {{username: {USERNAME}, password: {PASSWORD}}}\n"
    )
    empty.write_text("configs: {}\n")
    monkeypatch.setenv("OCIVENDIR_REGISTRY_CONFIG", str(logged_in))
    assert pull_as(ref, tmp_path / "first", cache, None, None)[0] == 0
    mark = auth_registry.mark()
    assert pull_as(ref, tmp_path / "again", cache, None, None)[0] == 0
    assert auth_registry.since(mark) == []  # the same login: served from the cache
    monkeypatch.setenv("OCIVENDIR_REGISTRY_CONFIG", str(empty))
    code, stderr = pull_as(ref, tmp_path / "other", cache, None, None)
    assert code == 1
    assert "requires authentication" in stderr
    assert manifest_requests(auth_registry, mark)  # it asked the registry itself, which refused it
    assert not (tmp_path / "other").exists()


OPENSSL = shutil.which("openssl") or "/usr/bin/openssl"


class _ClientCertRegistry(Registry):
    """A TLS registry that admits only callers presenting a certificate of its CA (Distribution's `clientcas`)."""

    def _config(self) -> str:
        text = super()._config()  # makes the CA
        assert self.ca_cert is not None
        return text.replace("  tls:\n", f"  tls:\n    clientcas:\n      - {self.ca_cert}\n", 1)

    def client_cert(self) -> tuple[Path, Path]:
        key, csr, crt = self.workdir / "client.key", self.workdir / "client.csr", self.workdir / "client.crt"
        if not crt.exists():
            subprocess.run([OPENSSL, "req", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-out", csr,
                            "-subj", "/CN=client"], check=True, capture_output=True)  # fmt: skip
            subprocess.run([OPENSSL, "x509", "-req", "-in", csr, "-CA", self.workdir / "ca.crt", "-CAkey",
                            self.workdir / "ca.key", "-CAcreateserial", "-out", crt, "-days", "2"],
                           check=True, capture_output=True)  # fmt: skip
        return crt, key

    def ssl_context(self) -> ssl.SSLContext | None:
        context = super().ssl_context()
        if context is not None:
            context.load_cert_chain(*map(str, self.client_cert()))
        return context


@pytest.mark.parametrize("with_password", [False, True])
def test_a_client_certificate_is_the_callers_credential_to_the_cache(
    tmp_path_factory: pytest.TempPathFactory, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, with_password: bool
) -> None:
    """A client certificate is a credential to the shared cache.

    A registry admitting by certificate never challenges: what it gave is not anyone's, and the certificate is part
    of the caller's fingerprint (a caller without it used to be served the private image from the cache).
    """
    registry = _ClientCertRegistry(mode="tls", workdir=tmp_path_factory.mktemp("mtls")).start()
    try:
        ref = Pusher(registry).image("team/private", SECRET_IMAGE)
        crt, key = registry.client_cert()
        assert registry.ca_cert is not None
        monkeypatch.setenv("SSL_CERT_FILE", str(registry.ca_cert))
        with_cert, without = tmp_path / "registries.yaml", tmp_path / "empty.yaml"
        with_cert.write_text(f"configs:\n  {registry.host}:\n    tls: {{cert_file: {crt}, key_file: {key}}}\n")
        without.write_text("configs: {}\n")
        monkeypatch.setenv("OCIVENDIR_REGISTRY_CONFIG", str(with_cert))
        login = ("someone", "anything") if with_password else (None, None)  # a login this registry never asks for
        assert pull_as(ref, tmp_path / "first", tmp_path / "cache", *login)[0] == 0
        mark = registry.mark()
        assert pull_as(ref, tmp_path / "again", tmp_path / "cache", *login)[0] == 0
        assert registry.since(mark) == []
        monkeypatch.setenv("OCIVENDIR_REGISTRY_CONFIG", str(without))
        code, _ = pull_as(ref, tmp_path / "other", tmp_path / "cache", None, None)
        assert code == 1  # asked the registry itself, whose handshake refuses it
        assert not (tmp_path / "other").exists()
    finally:
        registry.stop()
