"""go-containerregistry's `transport.Error` text, case by case (ggcr's error.go is the reference)."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest
import requests
import responses

from ocivendir.registry.connections import Request, Response
from ocivendir.registry.ggcrtext import MAX_ERROR_JSON, MAX_TEXT, transport_text


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


GOLDEN = Path(__file__).resolve().parents[1] / "golden" / "ggcr" / "error-texts.json"
CASES = json.loads(GOLDEN.read_text())


def _body(given: str | list[str]) -> bytes:
    return base64.b64decode(given[1]) if isinstance(given, list) else given.encode()


@pytest.mark.parametrize(("method", "status", "body", "text"), CASES)
def test_every_recorded_answer_has_the_text_ggcr_gave_it(
    method: str, status: int, body: str | list[str], text: str
) -> None:
    """Whatever the body's shape — `{}`, `{"errors": null}`, `{"errors": [1]}`, not JSON — the text is ggcr's."""
    assert transport_text(answer(method, status, _body(body))) == text


def test_a_huge_body_is_cut_where_ggcr_would_print_it_whole() -> None:
    """A 30 MiB page ggcr prints whole; the text here stops at MAX_TEXT characters and says how long it was."""
    body = b"<html>" + b"x" * (8 << 20)
    got = transport_text(answer("GET", 502, body))
    assert len(got) < MAX_TEXT + 100
    url = "http://127.0.0.1:5000/v2/app/manifests/v1"
    full = f"GET {url}: unexpected status code 502 Bad Gateway: {body.decode()}"
    assert got == f"{full[:MAX_TEXT]}… ({len(full)} characters in all)"


def test_a_detail_nested_past_the_interpreters_stack_is_the_body_as_text() -> None:
    """Go decodes 10,000 levels; Python's json fewer: past them the body is shown as it came, never a traceback."""
    body = b'{"errors":[{"code":"A","detail":' + b"[" * 5000 + b"]" * 5000 + b"}]}"
    got = transport_text(answer("GET", 404, body))
    assert got.endswith(f"unexpected status code 404 Not Found: {body.decode()}")


def test_an_error_body_past_the_json_bound_is_shown_as_text_not_decoded() -> None:
    """30 MiB of `{},` decoded would take 1.7 GB: past MAX_ERROR_JSON bytes the body is text (ggcr would decode it)."""
    body = b'{"errors":[' + b"{}," * (MAX_ERROR_JSON // 3) + b'{"code":"A"}]}'
    assert len(body) > MAX_ERROR_JSON
    got = transport_text(answer("GET", 404, body))
    assert got.startswith("GET http://127.0.0.1:5000/v2/app/manifests/v1: unexpected status code 404 Not Found: ")
    assert len(got) < MAX_TEXT + 100
    small = body[: len(b'{"errors":[')] + b'{"code":"A"}]}'
    assert transport_text(answer("GET", 404, small)).endswith(": A: ")
