"""The unit tier never touches the network: only `tests/support/fakehttp.py` answers HTTP here."""

from __future__ import annotations

import socket

import pytest

from tests.support.fakehttp import FakeHTTP, fake_http

__all__ = ["fake_http", "rsps"]


@pytest.fixture
def rsps(fake_http: FakeHTTP) -> FakeHTTP:
    """The fake registry under the name the client tests use (they once used the `responses` library)."""
    return fake_http


@pytest.fixture(autouse=True)
def no_sockets(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*_args: object, **_kwargs: object) -> None:
        msg = "unit tests must not open network connections"
        raise RuntimeError(msg)

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
