"""A tag behind Basic auth costs one request per warm call in a process serving calls, for the same credentials.

Against the real htpasswd registry, each call in this one process (`in_process`: the worker that would serve them);
the counts are the registry's access log. Another credential, or none, starts with the registry's challenge.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import run_cli
from tests.support.builders import Pusher, make_image
from tests.support.registry import PASSWORD, USERNAME, Registry


def _pull(ref: str, out: Path, cache: Path, user: str | None, password: str | None) -> int:
    creds = ["--registry-username", user, "--registry-password", password or ""] if user else []
    return run_cli("pull", "-i", ref, "-o", str(out), "--cache-dir", str(cache), *creds).exit_code


def _statuses(registry: Registry, mark: int) -> list[tuple[str, int]]:
    return [(method, status) for method, _, status in registry.since(mark)]


@pytest.mark.in_process
def test_a_warm_tag_behind_basic_auth_is_one_head_with_the_same_credentials(
    auth_registry: Registry, repo_prefix: str, tmp_path: Path
) -> None:
    Pusher(auth_registry).image(f"{repo_prefix}/app", make_image({"a.txt": "a"}), tag="v1")
    ref = f"{auth_registry.host}/{repo_prefix}/app:v1"
    cache = tmp_path / "cache"
    mark = auth_registry.mark()
    assert _pull(ref, tmp_path / "cold", cache, USERNAME, PASSWORD) == 0
    assert _statuses(auth_registry, mark)[:2] == [("HEAD", 401), ("HEAD", 200)]  # the cold call learns the challenge
    for number in range(3):
        mark = auth_registry.mark()
        assert _pull(ref, tmp_path / f"warm{number}", cache, USERNAME, PASSWORD) == 0
        assert _statuses(auth_registry, mark) == [("HEAD", 200)]
        assert (tmp_path / f"warm{number}" / "a.txt").read_text() == "a"


@pytest.mark.in_process
@pytest.mark.parametrize(("user", "password"), [(None, None), (USERNAME, "wrong-pass")])
def test_another_credential_or_none_is_challenged_first_and_refused(
    auth_registry: Registry, repo_prefix: str, tmp_path: Path, user: str | None, password: str | None
) -> None:
    """What the right credential's calls learned is never sent for another one; the right one keeps it."""
    Pusher(auth_registry).image(f"{repo_prefix}/app", make_image({"a.txt": "a"}), tag="v1")
    ref = f"{auth_registry.host}/{repo_prefix}/app:v1"
    cache = tmp_path / "cache"
    assert _pull(ref, tmp_path / "cold", cache, USERNAME, PASSWORD) == 0
    mark = auth_registry.mark()
    assert _pull(ref, tmp_path / "other", cache, user, password) != 0
    assert _statuses(auth_registry, mark)[0] == ("HEAD", 401)
    assert not (tmp_path / "other").exists()
    mark = auth_registry.mark()
    assert _pull(ref, tmp_path / "again", cache, USERNAME, PASSWORD) == 0
    assert _statuses(auth_registry, mark) == [("HEAD", 200)]
