"""Test support: run a socketserver (a stub registry, a proxy) in a daemon thread for the length of a block."""

from __future__ import annotations

import contextlib
import socketserver
import threading
from collections.abc import Iterator
from typing import TypeVar

Server = TypeVar("Server", bound=socketserver.BaseServer)


@contextlib.contextmanager
def serving(server: Server) -> Iterator[Server]:
    """Serve `server` in a daemon thread; shut it down and close it afterwards."""
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
