"""The request path's URL split gives `urlsplit`'s answer without importing `urllib.parse` for the usual URLs."""

from __future__ import annotations

import subprocess
import sys

import pytest

from ocivendir.registry.connections import _split, _split_parsed


@pytest.mark.parametrize(
    "url",
    ["http://127.0.0.1:5000/v2/a/manifests/v1", "https://Registry.Example.com/v2/", "https://reg.test",
     "HTTPS://reg.test:443/v2/a/blobs/sha256:ab?x=1&y=2#frag", "http://reg.test:0/x", "http://reg.test?only=query",
     "http://reg.test/x#f?not-query", "https://[::1]:5000/v2/", "https://u:p@reg.test/x", "http://reg.test:/x",
     "http://reg.test/a%20b", " http://reg.test/x", "http://reg.t\u00e9st/x", "https://auth.test/token?scope=a b"],
)  # fmt: skip
def test_the_split_is_urlsplits(url: str) -> None:
    assert _split(url) == _split_parsed(url)


def test_a_usual_url_is_split_without_urllib() -> None:
    code = (
        "import sys\nfrom ocivendir.registry.connections import _split\n"
        "print(_split('http://127.0.0.1:5000/v2/a/manifests/v1'), 'urllib.parse' in sys.modules)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout == "('http', '127.0.0.1', 5000, '/v2/a/manifests/v1') False\n"
