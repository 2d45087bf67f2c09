"""A cache shared by several callers does not hand private content to a caller who could not fetch it (issue 9.10)."""

from __future__ import annotations

import json
import stat
from pathlib import Path

import pytest

from tests.conftest import run_cli
from tests.support.builders import Pusher, make_image
from tests.support.registry import PASSWORD, USERNAME, Registry

SECOND_USER, SECOND_PASSWORD = "second", "other-pass-2"  # fixtures/htpasswd


def pull_as(ref: str, out: Path, cache: Path, user: str | None, password: str | None) -> tuple[int, str]:
    creds = ["--registry-username", user, "--registry-password", password or ""] if user else []
    result = run_cli("pull", "-i", ref, "-o", str(out), "--cache-dir", str(cache), *creds)
    return result.exit_code, result.stderr


def manifest_requests(registry: Registry, mark: int) -> list[tuple[str, int]]:
    return [(m, s) for m, p, s in registry.since(mark) if "/manifests/" in p or "/blobs/" in p]


@pytest.fixture
def private(auth_registry: Registry, repo_prefix: str, tmp_path: Path) -> tuple[str, Path]:
    ref = Pusher(auth_registry).image(f"{repo_prefix}/private", make_image({"secret.txt": "s3cret"}))
    cache = tmp_path / "cache"
    assert pull_as(ref, tmp_path / "first", cache, USERNAME, PASSWORD)[0] == 0
    return ref, cache


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
    assert [m for m, _ in manifest_requests(auth_registry, mark)] == ["HEAD"]  # one probe, no content


def test_a_bad_secret_is_refused(auth_registry: Registry, private: tuple[str, Path], tmp_path: Path) -> None:
    ref, cache = private
    mark = auth_registry.mark()
    code, stderr = pull_as(ref, tmp_path / "wrong", cache, USERNAME, "not-the-pass-7")
    assert code == 1
    assert "not-the-pass-7" not in stderr
    assert not (tmp_path / "wrong").exists()
    assert all(m == "HEAD" and s == 401 for m, s in manifest_requests(auth_registry, mark))


def test_another_valid_user_proves_access_with_one_head_then_is_served_with_zero_requests(
    auth_registry: Registry, private: tuple[str, Path], tmp_path: Path
) -> None:
    ref, cache = private
    mark = auth_registry.mark()
    code, stderr = pull_as(ref, tmp_path / "second", cache, SECOND_USER, SECOND_PASSWORD)
    assert code == 0, stderr
    assert (tmp_path / "second/secret.txt").read_text() == "s3cret"
    assert [r for r in manifest_requests(auth_registry, mark) if r[1] == 200] == [("HEAD", 200)]
    assert not [m for m, _ in manifest_requests(auth_registry, mark) if m == "GET"]
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
