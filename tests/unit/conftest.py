"""The unit tier never touches the network: only `responses` (requests' mock) answers HTTP here."""

from __future__ import annotations

import socket
from collections.abc import Iterator

import pytest
import responses


@pytest.fixture
def rsps() -> Iterator[responses.RequestsMock]:
    """Answers for every request the registry client sends; fails the test if a registration went unused."""
    with responses.RequestsMock(assert_all_requests_are_fired=True) as mock:
        yield mock


@pytest.fixture(autouse=True)
def no_sockets(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*_args: object, **_kwargs: object) -> None:
        msg = "unit tests must not open network connections"
        raise RuntimeError(msg)

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
