"""Deadlines against a trickling registry: the response-header timeout bounds a whole head, `--timeout` every read.

A hostile server on loopback sends one byte at a time, each well within any per-read timeout. What is asserted is how
many paced bytes the client took before it hung up (the server gives up after `GIVE_UP` on its own), never how long
anything took: a client that waits for every byte reads them all.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import run_cli
from tests.support.builders import make_image, sha
from tests.support.hostile import Reply, Seen, hostile, image_routes

GIVE_UP = 60
IMAGE = make_image({"a.txt": "a"})
REPO = "hostile/img"
_HEAD = [("Content-Type", "application/octet-stream"), ("X-Padding", "p" * 200)]


def _pull(host: str, out: Path, *flags: str) -> tuple[int, str]:
    result = run_cli("pull", "-i", f"{host}/{REPO}@{IMAGE.digest}", "-o", str(out), "--no-cache", *flags)
    return result.exit_code, result.stderr


def test_a_head_trickled_a_byte_at_a_time_is_bounded_by_the_response_header_timeout(tmp_path: Path) -> None:
    """0.3 s a byte: every recv is quick, the head never ends within 2 s (today's code read 60 bytes, 18 s)."""
    trickle = Reply(headers=_HEAD, body=IMAGE.manifest, head_pace=0.3, give_up=GIVE_UP)
    with hostile(image_routes(REPO, IMAGE, **{f"manifests/{IMAGE.digest}": trickle})) as server:
        code, stderr = _pull(server.host, tmp_path / "out", "--registry-response-header-timeout", "2s")
    assert code == 1, stderr
    assert "net/http: timeout awaiting response headers" in stderr
    assert server.paced_bytes < GIVE_UP // 2  # about 7 in 2 s
    assert len(server.paths("GET")) == 1  # not retried
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("what", ["manifest", "layer"])
def test_a_body_trickled_a_byte_at_a_time_is_bounded_by_the_runs_timeout(tmp_path: Path, what: str) -> None:
    """0.5 s a byte, each within the 30 s read timeout: `--timeout 3s` ends the run (today: read until 60 bytes)."""
    path = f"manifests/{IMAGE.digest}" if what == "manifest" else f"blobs/{sha(IMAGE.layers[0])}"
    body = IMAGE.manifest if what == "manifest" else IMAGE.layers[0]
    trickle = Reply(headers=_HEAD[:1], body=body, body_pace=0.5, give_up=GIVE_UP)
    with hostile(image_routes(REPO, IMAGE, **{path: trickle})) as server:
        code, stderr = _pull(server.host, tmp_path / "out", "--timeout", "3s")
    assert code == 1, stderr
    assert "network deadline of 3s exceeded" in stderr
    assert server.paced_bytes < GIVE_UP // 2  # about 6 in 3 s
    assert "Traceback" not in stderr
    assert not (tmp_path / "out").exists()


def test_every_redirect_hop_counts_against_the_runs_timeout(tmp_path: Path) -> None:
    """Each hop's head takes ~1.4 s (within the header timeout); `--timeout 3s` stops the chain after two or three.

    Today every hop got the time left when the first was sent: all 8 hops were followed, to the 404 at their end.
    """

    def route(request: Seen) -> Reply:
        hop = int(request.path.rsplit("/", 1)[1]) if request.path.startswith("/h/") else 0
        if hop >= 8:
            return Reply(status=404, reason="Not Found")
        headers = [("Location", f"/h/{hop + 1}"), ("Content-Length", "0")]
        return Reply(status=307, reason="Temporary Redirect", headers=headers, head_pace=0.02, give_up=1000)

    with hostile(route) as server:
        code, stderr = _pull(server.host, tmp_path / "out", "--timeout", "3s")
    assert code == 1, stderr
    assert "network deadline of 3s exceeded" in stderr
    assert server.paths()[1:] == [f"/h/{hop}" for hop in range(1, len(server.seen))]  # hops, not retries
    assert 2 <= len(server.seen) <= 4
