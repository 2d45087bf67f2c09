"""A tag list a hostile registry pages without end is read within bounds: pages, tags and bytes, then a clear error.

The registry on loopback answers every `tags/list` page with a `Link` to one more (the README names the bounds:
10,000 pages, a million tags, 64 MiB). Past a bound the `tagSelection` sync fails, naming the registry; it never
keeps reading until the run's deadline (today: memory grew without bound, 6.5 GB in 60 s).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import run_cli
from tests.support.hostile import Reply, Seen, hostile, write_tag_selection

REPO = "hostile/app"


def _page(tags: Callable[[int], list[str]], last: int, padding: int = 0) -> Callable[[Seen], Reply]:
    """Page i lists `tags(i)` (then `padding` spaces) and links to page i + 1, up to page `last`.

    The server ends the list itself a little past the bound, so that a client without bounds (today's) reads a finite
    list and fails the test, rather than the machine.
    """

    def route(request: Seen) -> Reply:
        if not request.path.startswith(f"/v2/{REPO}/tags/list"):
            return Reply(status=404, reason="Not Found")
        at = int(request.path.rsplit("last=", 1)[1]) if "last=" in request.path else 0
        headers = [("Content-Type", "application/json")]
        if at < last:
            headers.append(("Link", f'</v2/{REPO}/tags/list?n=1000&last={at + 1}>; rel="next"'))
        body = json.dumps({"name": REPO, "tags": tags(at)}).encode() + b" " * padding
        return Reply(headers=headers, body=body)

    return route


@pytest.mark.parametrize(
    ("route", "pages", "past"),
    [
        (_page(lambda at: [f"t{at}"], last=12_000), 10_000, "more than 10000 pages"),
        (_page(lambda at: [f"t{at}-{n}" for n in range(100_000)], last=12), 11, "more than 1000000 tags"),
        (_page(lambda at: [f"t{at}"], last=3, padding=30 << 20), 3, "more than 64 MiB"),
    ],
    ids=["pages", "tags", "bytes"],
)
def test_endless_tag_pages_stop_at_a_bound_with_an_error_naming_the_registry(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, route: Callable[[Seen], Reply], pages: int, past: str
) -> None:
    monkeypatch.setenv("OCIVENDIR_CACHE_DIR", str(tmp_path / "cache"))
    with hostile(route) as server:
        write_tag_selection(tmp_path / "vendir.yml", f"{server.host}/{REPO}")
        result = run_cli("sync", "--chdir", str(tmp_path))
    assert result.exit_code == 1, result.stderr
    assert f"Listing tags of '{server.host}/{REPO}': {server.host} sent a tag list of {past}" in result.stderr
    assert len(server.seen) == pages  # every page read once, none past the bound
    assert not (tmp_path / "vendor").exists()
