"""Owns: asking a server whether it speaks TLS at all — without `ssl`, a trust store, or a handshake to finish.

Where plain HTTP is allowed and the scheme not yet known, https is tried first (as Go does) but may be a guess. The
guess is checked with one TLS 1.2/1.3 ClientHello (with SNI for a host name) and the first two bytes of the answer:
a TLS record (a handshake message or an alert, version 3.x) means TLS, so the real, verified handshake follows on a
new connection; anything else — an HTTP answer, another protocol, the connection closed — means it does not, in Go's
words (`http: server gave HTTP response to HTTPS client`, `tls: first record does not look like a TLS handshake`).
So a plain-HTTP registry is found out without `ssl` ever being imported.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    import socket

__all__ = ["check_speaks_tls", "client_hello"]

_SUITES = bytes.fromhex("130113021303c02bc02fc02cc030cca9cca8009c009d")
_HANDSHAKE, _ALERT, _TLS_MAJOR = 0x16, 0x15, 0x03


def _extension(kind: int, data: bytes) -> bytes:
    return kind.to_bytes(2, "big") + len(data).to_bytes(2, "big") + data


def _vector(data: bytes, width: int = 2) -> bytes:
    return len(data).to_bytes(width, "big") + data


def client_hello(server_name: str | None) -> bytes:
    """A ClientHello record offering TLS 1.3 and 1.2 with common suites, groups and signatures (SNI when named)."""
    extensions = (
        (_extension(0x0000, _vector(b"\x00" + _vector(server_name.encode("idna")))) if server_name else b"")
        + _extension(0x000A, _vector(bytes.fromhex("001d00170018")))  # supported_groups: x25519, P-256, P-384
        + _extension(0x000B, b"\x01\x00")  # ec_point_formats: uncompressed
        + _extension(0x000D, _vector(bytes.fromhex("04030804040105030805050108060601")))  # signatures
        + _extension(0x002B, b"\x04\x03\x04\x03\x03")  # supported_versions: TLS 1.3, TLS 1.2
    )
    body = b"\x03\x03" + bytes(32) + b"\x00" + _vector(_SUITES) + b"\x01\x00" + _vector(extensions)
    handshake = b"\x01" + _vector(body, 3)
    return b"\x16\x03\x01" + _vector(handshake)


def check_speaks_tls(sock: socket.socket, server_name: str | None) -> None:
    """Send a ClientHello on the connected `sock`; an answer that is no TLS record is `OSError` with Go's text."""
    sock.sendall(client_hello(server_name))
    head = b""
    while len(head) < 2 and (more := sock.recv(2 - len(head))):  # noqa: PLR2004
        head += more
    if len(head) == 2 and head[0] in {_HANDSHAKE, _ALERT} and head[1] == _TLS_MAJOR:  # noqa: PLR2004
        return
    if head.startswith(b"HT"):
        raise OSError("http: server gave HTTP response to HTTPS client")
    raise OSError("tls: first record does not look like a TLS handshake")
