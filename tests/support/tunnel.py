"""Owns: a CONNECT proxy for tests on 127.0.0.1 — it records every tunnel asked for and joins it to a local port."""

from __future__ import annotations

import contextlib
import socket
import socketserver
import threading

__all__ = ["ConnectProxy"]


class ConnectProxy(socketserver.ThreadingTCPServer):
    """An HTTP CONNECT proxy that tunnels to 127.0.0.1 (names need no DNS).

    The tunnel goes to `upstream` when given, else to the port named in the CONNECT target. Anything but CONNECT is
    answered 405. `tunnels` holds each CONNECT's request line and headers, in order.
    """

    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, upstream: int | None = None) -> None:
        """Listen on a free 127.0.0.1 port."""
        super().__init__(("127.0.0.1", 0), _TunnelHandler)
        self.upstream = upstream
        self.tunnels: list[tuple[str, dict[str, str]]] = []

    @property
    def connects(self) -> list[str]:
        """The CONNECT targets (`host:port`) asked for, in order."""
        return [line.split()[1] for line, _ in self.tunnels]


class _TunnelHandler(socketserver.StreamRequestHandler):
    server: ConnectProxy

    def handle(self) -> None:
        line = self.rfile.readline().decode("latin-1").strip()
        headers = {}
        while (header := self.rfile.readline().decode("latin-1").strip()) != "":
            name, _, value = header.partition(":")
            headers[name.strip()] = value.strip()
        method, target = [*line.split(), "", ""][:2]
        if method != "CONNECT":
            self.wfile.write(b"HTTP/1.1 405 Method Not Allowed\r\nContent-Length: 0\r\n\r\n")
            return
        self.server.tunnels.append((line, headers))
        port = self.server.upstream or int(target.rsplit(":", 1)[1])
        with socket.create_connection(("127.0.0.1", port)) as upstream:
            self.wfile.write(b"HTTP/1.1 200 Connection established\r\n\r\n")
            self.wfile.flush()
            pump = threading.Thread(target=_pipe, args=(upstream, self.connection), daemon=True)
            pump.start()
            _pipe(self.connection, upstream)
            pump.join(5)


def _pipe(source: socket.socket, sink: socket.socket) -> None:
    with contextlib.suppress(OSError):
        while data := source.recv(65536):
            sink.sendall(data)
    with contextlib.suppress(OSError):
        sink.shutdown(socket.SHUT_WR)
