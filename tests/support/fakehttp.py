"""Test support: canned registry answers for the unit tier, served at the seam of `registry/connections.py`.

A small stand-in for the `responses` library, which mocked requests: answers are registered by method and URL
(`get`, `head`, `post`, with `status`, `headers`, `body` — bytes, text or an exception to raise — or `json`, and
`match` predicates), several matching registrations answer in turn and the last one repeats, and every
registration must have been asked for when the block ends. The client under test runs unchanged above the seam:
its requests are recorded at the connection's face, and each answer is real HTTP/1.1 bytes parsed by
`registry/http11.py` (every answer closes its connection, so no connection is reused in the unit tier; reuse is the
integration tier's).
"""

from __future__ import annotations

import json as jsonlib
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from http import HTTPStatus
from typing import Any
from urllib.parse import parse_qsl, urlsplit

import pytest

from ocivendir.registry import connections as http_module
from ocivendir.registry.http11 import RawResponse, Wire, read_response


@dataclass
class FakeRequest:
    """A request as the fake received it."""

    method: str
    url: str
    headers: dict[str, str]
    body: bytes
    via: str = ""  # host:port the connection was opened to (a proxy's, when one is used)

    @property
    def query(self) -> dict[str, str]:
        """The query string's parameters."""
        return dict(parse_qsl(urlsplit(self.url).query, keep_blank_values=True))


Matcher = Callable[[FakeRequest], bool]


@dataclass
class Answer:
    """One registration."""

    method: str
    url: str
    status: int = 200
    headers: Mapping[str, str] = field(default_factory=dict)
    body: bytes | BaseException = b""
    match: tuple[Matcher, ...] = ()
    calls: int = 0

    def matches(self, request: FakeRequest) -> bool:
        """Same method and URL (query aside), and every predicate holds."""
        same = request.method == self.method and _without_query(request.url) == _without_query(self.url)
        return same and all(predicate(request) for predicate in self.match)


@dataclass
class Call:
    """A request and the registration that answered it."""

    request: FakeRequest
    response: Answer


def _without_query(url: str) -> str:
    parts = urlsplit(url)
    port = f":{parts.port}" if parts.port and parts.port != {"https": 443, "http": 80}[parts.scheme] else ""
    return f"{parts.scheme}://{parts.hostname}{port}{parts.path}"


def header_matcher(expected: Mapping[str, str]) -> Matcher:
    """The request carries these headers (names case-insensitive)."""
    wanted = {k.lower(): v for k, v in expected.items()}
    return lambda request: all(
        {k.lower(): v for k, v in request.headers.items()}.get(k) == v for k, v in wanted.items()
    )


def query_param_matcher(expected: Mapping[str, str]) -> Matcher:
    """The query string is exactly these parameters."""
    return lambda request: request.query == dict(expected)


def urlencoded_params_matcher(expected: Mapping[str, str]) -> Matcher:
    """The form body is exactly these fields."""
    return lambda request: dict(parse_qsl(request.body.decode(), keep_blank_values=True)) == dict(expected)


class FakeHTTP:
    """The registered answers and the calls made (see the module docstring)."""

    def __init__(self) -> None:
        """No answers yet."""
        self.answers: list[Answer] = []
        self.calls: list[Call] = []
        self.used: list[Answer] = []

    def add(
        self,
        method: str,
        url: str,
        *,
        status: int = 200,
        headers: Mapping[str, str] | None = None,
        body: bytes | str | BaseException = b"",
        json: Any = None,
        match: tuple[Matcher, ...] | list[Matcher] = (),
    ) -> None:
        """Register an answer."""
        given = dict(headers or {})
        if json is not None:
            body = jsonlib.dumps(json)
            given.setdefault("Content-Type", "application/json")
        data = body.encode() if isinstance(body, str) else body
        self.answers.append(Answer(method, url, status, given, data, tuple(match)))

    def get(self, url: str, **kwargs: Any) -> None:
        """Register a GET answer."""
        self.add("GET", url, **kwargs)

    def head(self, url: str, **kwargs: Any) -> None:
        """Register a HEAD answer."""
        self.add("HEAD", url, **kwargs)

    def post(self, url: str, **kwargs: Any) -> None:
        """Register a POST answer."""
        self.add("POST", url, **kwargs)

    def answer(self, request: FakeRequest) -> Answer:
        """The registration for a request: the first match, used up when a later one matches too."""
        found = [a for a in self.answers if a.matches(request)]
        if not found:
            raise AssertionError(f"no answer registered for {request.method} {request.url}")
        chosen = found[0]
        if len(found) > 1:  # responses' rule: a used-up first match gives way to the next, a fresh one is used once
            self.answers.remove(chosen)
            self.used.append(chosen)
            if chosen.calls > 0:
                chosen = found[1]
        chosen.calls += 1
        self.calls.append(Call(request, chosen))
        return chosen

    def unfired(self) -> list[Answer]:
        """Registrations never asked for."""
        return [a for a in self.answers if a.calls == 0]


def http_response(method: str, status: int, headers: Mapping[str, str], body: bytes) -> RawResponse:
    """A response parsed from the HTTP/1.1 bytes of this answer (its connection closes after it)."""
    head = [f"HTTP/1.1 {status} {HTTPStatus(status).phrase}", *(f"{k}: {v}" for k, v in headers.items())]
    if not any(k.lower() == "content-length" for k in headers):
        head.append(f"Content-Length: {len(body)}")
    head.append("Connection: close")
    return read_response(Wire(BytesSocket(("\r\n".join(head) + "\r\n\r\n").encode("latin1") + body)), method)


class BytesSocket:
    """What the wire reads from: fixed bytes, then the end of the stream."""

    def __init__(self, data: bytes) -> None:
        self._data = memoryview(data)

    def recv_into(self, buffer: bytearray | memoryview, nbytes: int = 0, /) -> int:
        count = min(nbytes or len(buffer), len(self._data))
        buffer[:count] = self._data[:count]
        self._data = self._data[count:]
        return count

    def sendall(self, _data: bytes, /) -> None:
        """Nothing listens."""

    def settimeout(self, _seconds: float) -> None:
        """Nothing waits here."""


class _Connection:
    """An `http.client` connection's face: it records the request and answers from the fake."""

    def __init__(self, fake: FakeHTTP, scheme: str, host: str, port: int) -> None:
        self._fake, self._scheme, self._host, self._port = fake, scheme, host, port
        self.sock = BytesSocket(b"")
        self._request: FakeRequest | None = None

    def connect(self) -> None:
        """Nothing to connect."""

    def request(self, method: str, target: str, body: bytes | None = None, headers: Mapping[str, str] = {}) -> None:
        default = {"https": 443, "http": 80}[self._scheme]
        port = "" if self._port == default else f":{self._port}"
        url = target if "://" in target else f"{self._scheme}://{self._host}{port}{target}"
        self._request = FakeRequest(method, url, dict(headers), body or b"", f"{self._host}:{self._port}")

    def limit(self, _idle: float, _until: float) -> None:
        """Nothing waits here."""

    def getresponse(self) -> RawResponse:
        assert self._request is not None
        answer = self._fake.answer(self._request)
        if isinstance(answer.body, BaseException):
            raise answer.body
        return http_response(self._request.method, answer.status, answer.headers, answer.body)

    def close(self) -> None:
        """Nothing to close."""


@pytest.fixture
def fake_http(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeHTTP]:
    """Answers for every request the registry client sends; fails the test if a registration went unused."""
    fake = FakeHTTP()

    def connect(scheme: str, host: str, port: int, _timeout: float, _tls: object) -> _Connection:
        return _Connection(fake, scheme, host, port)

    monkeypatch.setattr(http_module, "open_connection", connect)
    yield fake
    assert not fake.unfired(), f"registered but never asked for: {[(a.method, a.url) for a in fake.unfired()]}"


__all__ = [
    "BytesSocket",
    "FakeHTTP",
    "FakeRequest",
    "fake_http",
    "header_matcher",
    "http_response",
    "query_param_matcher",
    "urlencoded_params_matcher",
]
