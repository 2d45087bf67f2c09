"""go-containerregistry's `transport.Error` text, case by case (ggcr's error.go is the reference)."""

from __future__ import annotations

import pytest
import requests
import responses

from ocivendir.registry.connections import Request, Response
from ocivendir.registry.ggcrtext import transport_text


def answer(method: str, status: int, body: bytes) -> Response:
    url = "http://127.0.0.1:5000/v2/app/manifests/v1"
    with responses.RequestsMock() as mock:
        mock.add(method, url, status=status, body=body)
        got = requests.request(method, url, stream=True, timeout=1)
    return Response(got, Request(method, url, {}))


@pytest.mark.parametrize(
    ("method", "status", "body", "text"),
    [
        ("GET", 404, b'{"errors":[{"code":"NAME_UNKNOWN","message":"Unknown name"}]}', "NAME_UNKNOWN: Unknown name"),
        ("GET", 404, b'{"errors":[{"code":"MANIFEST_UNKNOWN","message":"manifest unknown","detail":{"Tag":"v1","A":[1,2]}}]}',
         "MANIFEST_UNKNOWN: manifest unknown; map[A:[1 2] Tag:v1]"),
        ("GET", 401, b'{"errors":[{"code":"UNAUTHORIZED","message":"a"},{"code":"DENIED","message":"b"}]}',
         "multiple errors returned: UNAUTHORIZED: a; DENIED: b"),
        ("HEAD", 404, b"", "unexpected status code 404 Not Found (HEAD responses have no body, use GET for details)"),
        ("GET", 502, b"", "unexpected status code 502 Bad Gateway"),
        ("GET", 500, b"oops", "unexpected status code 500 Internal Server Error: oops"),
    ],
)  # fmt: skip
def test_texts_match_ggcr(method: str, status: int, body: bytes, text: str) -> None:
    url = "http://127.0.0.1:5000/v2/app/manifests/v1"
    assert transport_text(answer(method, status, body)) == f"{method} {url}: {text}"
