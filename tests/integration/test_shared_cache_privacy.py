"""A caller not known to read a shared cache's manifest learns only what the registry tells it (issue 22.6).

Against the real htpasswd-mode registry with two valid users: whatever a caller without access sees — exit code,
stderr, the `--json` envelope, the `--offline` refusal, vendir mode's error chain, the manifest requests it sends — is
exactly what it sees with an empty cache, so it cannot tell that someone else's private digest is cached.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import run_cli
from tests.support.builders import Pusher, make_image
from tests.support.registry import PASSWORD, USERNAME, Registry

SECOND_USER, SECOND_PASSWORD = "second", "other-pass-2"  # fixtures/htpasswd
NO_ACCESS = {
    "anonymous": (),
    "a wrong password": ("--registry-username", USERNAME, "--registry-password", "not-the-pass-7"),
    "an unknown user": ("--registry-username", "nobody", "--registry-password", "guess-9"),
}


@pytest.fixture
def private(auth_registry: Registry, repo_prefix: str, tmp_path: Path) -> tuple[str, Path]:
    """A private image, pulled into a shared cache by its owner (the first user)."""
    ref = Pusher(auth_registry).image(f"{repo_prefix}/private", make_image({"secret.txt": "s3cret"}))
    cache = tmp_path / "shared"
    owner = run_cli("pull", "-i", ref, "-o", str(tmp_path / "owner"), "--cache-dir", str(cache),
                    "--registry-username", USERNAME, "--registry-password", PASSWORD)  # fmt: skip
    assert owner.exit_code == 0, owner.stderr
    return ref, cache


def seen(registry: Registry, mark: int) -> list[tuple[str, int]]:
    return [(m, s) for m, p, s in registry.since(mark) if "/manifests/" in p or "/blobs/" in p]


def attempt(registry: Registry, cache: Path, out: Path, *args: str) -> tuple[int, str, str, list[tuple[str, int]]]:
    mark = registry.mark()
    result = run_cli(*args, "--cache-dir", str(cache))
    assert not out.exists()
    return result.exit_code, result.stdout, result.stderr, seen(registry, mark)


@pytest.mark.parametrize("caller", sorted(NO_ACCESS))
@pytest.mark.parametrize("extra", [(), ("--json",), ("--offline",), ("--offline", "--json")], ids=str)
def test_a_caller_without_access_sees_what_an_empty_cache_shows(
    auth_registry: Registry, private: tuple[str, Path], tmp_path: Path, caller: str, extra: tuple[str, ...]
) -> None:
    ref, shared = private
    out = tmp_path / "out"
    args = ("pull", "-i", ref, "-o", str(out), *NO_ACCESS[caller], *extra)
    cached = attempt(auth_registry, shared, out, *args)
    empty = attempt(auth_registry, tmp_path / "empty", out, *args)
    assert cached == empty
    code, stdout, stderr, requests = cached
    assert code == 1
    assert "in the cache" not in stdout + stderr or "not in the cache" in stdout + stderr
    assert "seen" not in stdout + stderr
    assert not [m for m, s in requests if s == 200]
    if "--json" in extra:
        assert json.loads(stdout)["status"] == "error"


@pytest.mark.parametrize("caller", sorted(NO_ACCESS))
def test_a_private_tag_cached_for_someone_else_shows_what_an_empty_cache_shows(
    auth_registry: Registry, repo_prefix: str, tmp_path: Path, caller: str
) -> None:
    Pusher(auth_registry).image(f"{repo_prefix}/tagged", make_image({"t.txt": "private tag"}), tag="v1")
    tag = f"{auth_registry.host}/{repo_prefix}/tagged:v1"
    shared = tmp_path / "shared"
    owner = run_cli("pull", "-i", tag, "-o", str(tmp_path / "owner"), "--cache-dir", str(shared),
                    "--registry-username", USERNAME, "--registry-password", PASSWORD)  # fmt: skip
    assert owner.exit_code == 0, owner.stderr
    out = tmp_path / "out"
    for extra in ((), ("--json",), ("--stale-if-error", "1h")):
        args = ("pull", "-i", tag, "-o", str(out), *NO_ACCESS[caller], *extra)
        cached = attempt(auth_registry, shared, out, *args)
        assert cached == attempt(auth_registry, tmp_path / "empty", out, *args)
        assert cached[0] == 1


def test_vendir_mode_without_access_shows_what_an_empty_cache_shows(
    auth_registry: Registry, private: tuple[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ref, shared = private
    stream = (
        "apiVersion: vendir.k14s.io/v1alpha1\nkind: Config\ndirectories:\n- path: '0'\n  contents:\n"
        f"  - path: .\n    image:\n      url: {ref}\n"
    )
    results = []
    for cache in (shared, tmp_path / "empty"):
        monkeypatch.setenv("VENDIR_CACHE_DIR", str(cache))
        work = tmp_path / f"work-{cache.name}"
        work.mkdir()
        monkeypatch.chdir(work)
        mark = auth_registry.mark()
        result = run_cli("sync", "-f", "-", "--lock-file", "/dev/null", prog="vendir", stdin=stream)
        results.append((result.exit_code, result.stdout, result.stderr, seen(auth_registry, mark)))
        assert not (work / "0").exists()
    assert results[0] == results[1]
    assert results[0][0] == 1
    assert "cache" not in results[0][2]


def test_another_valid_user_proves_access_as_an_uncached_fetch_would_then_is_served_warm(
    auth_registry: Registry, private: tuple[str, Path], tmp_path: Path
) -> None:
    ref, shared = private
    creds = ("--registry-username", SECOND_USER, "--registry-password", SECOND_PASSWORD)
    mark = auth_registry.mark()
    first = run_cli("pull", "-i", ref, "-o", str(tmp_path / "second"), "--cache-dir", str(shared), *creds)
    assert first.exit_code == 0, first.stderr
    assert (tmp_path / "second/secret.txt").read_text() == "s3cret"
    # the manifest is fetched with the caller's credentials (a challenge, then the verified GET); the config and
    # layer, possessed by this repository, come from the cache
    assert [r for r in seen(auth_registry, mark) if r[1] == 200] == [("GET", 200)]
    mark = auth_registry.mark()
    again = run_cli("pull", "-i", ref, "-o", str(tmp_path / "again"), "--cache-dir", str(shared), *creds)
    assert again.exit_code == 0, again.stderr
    assert auth_registry.since(mark) == []
    offline = run_cli("pull", "-i", ref, "-o", str(tmp_path / "offline"), "--cache-dir", str(shared), "--offline",
                      *creds)  # fmt: skip
    assert offline.exit_code == 0, offline.stderr
