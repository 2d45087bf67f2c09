"""The request path splits its URLs and encodes its token forms as `urllib.parse` does, without importing it."""

from __future__ import annotations

import pytest

from ocivendir.registry.connections import _split, _split_parsed
from ocivendir.registry.transport import form_encode
from tests.support.fresh import fresh_python


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
    done = fresh_python(code)
    assert done.stdout == "('http', '127.0.0.1', 5000, '/v2/a/manifests/v1') False\n"


@pytest.mark.parametrize(
    "form",
    [{"scope": "repository:team/app:pull", "service": "registry.test"}, {"a b": "c+d&e=f/g?h#i~j_k.l-m"},
     {"user": "n\u00e9e \u2603", "empty": ""}, {}],
)  # fmt: skip
def test_a_token_form_is_urlencoded_as_urllib_does(form: dict[str, str]) -> None:
    from urllib.parse import urlencode  # noqa: PLC0415

    assert form_encode(form) == urlencode(form)
