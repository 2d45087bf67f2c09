"""Credentials stay with their registry: a redirect target that challenges on its own gets none of them.

A registry on loopback redirects a blob GET to a second server, which answers 401 with its own Bearer realm (a token
endpoint on the second server that would take any Basic credentials it is sent). As imgpkg does, nothing is sent to
the second server but the plain GET, and the pull fails with an error naming the registry and the host it redirected to.
"""

from __future__ import annotations

import base64
from pathlib import Path

import pytest

from tests.conftest import run_cli
from tests.support.builders import make_image, sha
from tests.support.hostile import Reply, Seen, hostile, image_routes

IMAGE = make_image({"a.txt": "a"})
REPO = "team/img"
USER, PASSWORD = "alice", "s3cret-of-the-registry"
BASIC = "Basic " + base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()


def _elsewhere(request: Seen) -> Reply:
    """The redirect target: a token endpoint that takes anything, and a 401 with its realm for everything else."""
    if request.path.startswith("/token"):
        return Reply(headers=[("Content-Type", "application/json")], body=b'{"token":"stolen"}')
    realm = f'Bearer realm="http://{request.headers["host"]}/token",service="elsewhere"'
    return Reply(status=401, reason="Unauthorized", headers=[("WWW-Authenticate", realm)])


@pytest.mark.parametrize("registry_auth", ["none", "basic"])
def test_a_redirect_targets_challenge_gets_no_credentials(tmp_path: Path, registry_auth: str) -> None:
    with hostile(_elsewhere) as other:
        layer = f"blobs/{sha(IMAGE.layers[0])}"
        moved = Reply(status=307, reason="Temporary Redirect", headers=[("Location", f"http://{other.host}/b/1")])
        serve = image_routes(REPO, IMAGE, **{layer: moved})

        def registry(request: Seen) -> Reply:
            if registry_auth == "basic" and request.headers.get("authorization") != BASIC:
                return Reply(status=401, reason="Unauthorized", headers=[("WWW-Authenticate", 'Basic realm="r"')])
            return serve(request)

        with hostile(registry) as origin:
            result = run_cli("pull", "-i", f"{origin.host}/{REPO}@{IMAGE.digest}", "-o", str(tmp_path / "out"),
                             "--no-cache", "--registry-username", USER, "--registry-password", PASSWORD)  # fmt: skip
    assert result.exit_code == 1, result.stderr
    assert [(s.method, s.path) for s in other.seen] == [("GET", "/b/1")]  # no token asked for, nothing retried
    assert all("authorization" not in s.headers for s in other.seen)
    assert f"{origin.host} redirected the request to {other.host}, which asks for credentials" in result.stderr
    assert PASSWORD not in result.stderr
    assert not (tmp_path / "out").exists()
