"""Owns: one HTTP/1.1 exchange on a connected socket — a request written, a response read — and nothing else.

A small, strict replacement for `http.client` (which loads `email`, `ssl`, `socket` and their imports, ~130M
instructions, before the first byte). The response head is bounded as `http.client` and Go bound it: a line at most 64
KiB, at most 100 header lines (continuation lines included, as `http.client` counts them), the whole head at most 1 MiB
(Go's default header limit), at most 5 informational (1xx) answers before the real one. What is not HTTP/1.1 is a
`ProtocolError`, never guessed at: a bare CR or another control character in a line, a header name that is not a token,
a status code that is not three digits, conflicting or invalid `Content-Length` values, a transfer coding other than
`chunked`, a chunk-size line that is not 1 to 16 hex digits or longer than 4 KiB, a chunk not followed by CRLF, a body
that ends before its length or its last chunk. Folded header lines (obs-fold) are joined with a space, as RFC 9112 asks
of a client and as Go does; `chunked` wins over a `Content-Length` sent with it (RFC 9112 §6.3) and such a connection is
not reused. Trailers are read, bounded, and dropped. A body is framed by `Content-Length`, by chunks, or by the
connection's close; a HEAD, a 204, a 304, a 1xx and a successful CONNECT have none. Each read waits at most as long as
the owner's `Wire.limit` says, and none past its deadline: one byte a second keeps no read waiting, yet cannot stretch
a head or a body past the time given for all of it.
"""

from __future__ import annotations

from time import monotonic

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping
    from typing import Protocol

    class Socket(Protocol):
        """What the exchange needs of a socket (a plain one or a TLS one)."""

        def recv_into(self, buffer: bytearray | memoryview, nbytes: int = 0, /) -> int:
            """Read into `buffer`."""

        def sendall(self, data: bytes, /) -> None:
            """Write all of `data`."""

        def settimeout(self, seconds: float | None, /) -> None:
            """How long one read or write may wait."""


__all__ = [
    "MAX_HEADERS",
    "MAX_HEAD_BYTES",
    "MAX_INFORMATIONAL",
    "MAX_LINE",
    "Disconnected",
    "Headers",
    "ProtocolError",
    "RawResponse",
    "Wire",
    "read_response",
    "request_bytes",
]

MAX_LINE = 64 << 10  # http.client's _MAXLINE: one status or header line
MAX_HEADERS = 100  # http.client's _MAXHEADERS: lines of one head, continuation lines included
MAX_HEAD_BYTES = 1 << 20  # all header lines of one answer (and of its trailers) together
MAX_CHUNK_LINE = 4 << 10  # Go's maxLineLength for a chunk-size line (extensions included)
MAX_INFORMATIONAL = 5  # Go's max1xxResponses: `100 Continue` answers skipped before the real status line
_TOKEN = b"!#$%&'*+-.^_`|~0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
_CONTROL = bytes(range(9)) + bytes(range(10, 32)) + b"\x7f"  # all but HTAB
_HEX = b"0123456789abcdefABCDEF"
_NO_BODY_STATUS = frozenset({204, 304})
_UNSAFE_TARGET = dict.fromkeys([*range(33), 127])  # str.translate table: spaces and control characters removed


class ProtocolError(Exception):
    """The peer sent something that is not HTTP/1.1, or more than the bounds allow."""


class Disconnected(ConnectionResetError):
    """The connection closed before a status line began (a reused connection the server dropped while idle)."""


class Headers:
    """Header fields in the order received; names match case-insensitively, `get` gives the first."""

    __slots__ = ("_fields",)

    def __init__(self, fields: Iterable[tuple[str, str]] = ()) -> None:  # noqa: D107
        self._fields = list(fields)

    def get(self, name: str, default: str = "") -> str:
        """The first value of `name`, else `default` (an absent field and an empty one are alike falsy)."""
        wanted = name.lower()
        return next((value for key, value in self._fields if key.lower() == wanted), default)

    def get_all(self, name: str) -> list[str]:
        """Every value of `name`, in order."""
        wanted = name.lower()
        return [value for key, value in self._fields if key.lower() == wanted]

    def __getitem__(self, name: str) -> str:
        """The first value of `name` (`KeyError` when absent)."""
        found = self.get_all(name)
        if not found:
            raise KeyError(name)
        return found[0]

    def __contains__(self, name: object) -> bool:
        """Is there a field `name`?"""
        return isinstance(name, str) and bool(self.get_all(name))

    def items(self) -> list[tuple[str, str]]:
        """(name, value) pairs as received."""
        return list(self._fields)


class Wire:
    """Buffered reading from a socket: lines up to a limit, and bytes, each wait bounded once `limit` was called."""

    __slots__ = ("_buffer", "_idle", "_sock", "_until")

    def __init__(self, sock: Socket) -> None:  # noqa: D107
        self._sock = sock
        self._buffer = bytearray()
        self._idle: float | None = None  # None: the socket's own timeout, as set by its owner
        self._until = 0.0

    def limit(self, idle: float, until: float) -> None:
        """From now on no read waits more than `idle` seconds, nor past `until` (a `time.monotonic()` value).

        A server that sends a byte just before each wait would end stays within any per-read timeout: `until` bounds
        all the reads together (a response head, or everything left of a run), whatever their pace.
        """
        self._idle, self._until = idle, until

    def _recv_into(self, view: bytearray | memoryview, size: int) -> int:
        if self._idle is not None:
            left = self._until - monotonic()
            if left <= 0:
                raise TimeoutError("timed out")
            self._sock.settimeout(min(self._idle, left))
        return self._sock.recv_into(view, size)

    def line(self, limit: int) -> bytes:
        """The next line with its LF (at the end of the stream, what is left); longer than `limit`, an error."""
        start = 0
        while (end := self._buffer.find(b"\n", start)) < 0:
            if len(self._buffer) > limit:
                raise ProtocolError(f"a line longer than {limit} bytes")
            start = len(self._buffer)
            if not self._fill(1 << 14):
                end = len(self._buffer) - 1
                break
        if end + 1 > limit:
            raise ProtocolError(f"a line longer than {limit} bytes")
        line = bytes(self._buffer[: end + 1])
        del self._buffer[: end + 1]
        return line

    def read(self, size: int) -> bytes:
        """At most `size` bytes, what is buffered first; b"" only at the end of the stream."""
        if self._buffer:
            data = bytes(self._buffer[:size])
            del self._buffer[:size]
            return data
        buffer = bytearray(size)
        view, got = memoryview(buffer), 0
        while got < size and (count := self._recv_into(view[got:], size - got)):
            got += count
        return bytes(view[:got])

    def _fill(self, size: int) -> int:
        buffer = bytearray(size)
        count = self._recv_into(buffer, size)
        self._buffer += memoryview(buffer)[:count]
        return count


def request_bytes(method: str, target: str, host: str, headers: Mapping[str, str], body: bytes | None) -> bytes:
    """A request's bytes; a header name or value that could split the request is `ValueError` (as `http.client`)."""
    if not target or target.translate(_UNSAFE_TARGET) != target:
        raise ValueError(f"the request target {target!r} has a space or control character")
    lines = [f"{method} {target} HTTP/1.1", f"Host: {host}"]
    for name, value in headers.items():
        if not name or name.encode("latin-1").translate(None, _TOKEN) or any(c in value for c in "\r\n\0"):
            raise ValueError(f"invalid header {name!r}")
        lines.append(f"{name}: {value}")
    if body is not None or method in {"POST", "PUT", "PATCH"}:
        lines.append(f"Content-Length: {len(body or b'')}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + (body or b"")


def _text(raw: bytes, what: str) -> bytes:
    """A line without its CRLF (or LF); a missing LF, a bare CR or a control character is an error."""
    if not raw.endswith(b"\n"):
        raise ProtocolError(f"the {what} ended before its line did")
    line = raw[:-2] if raw.endswith(b"\r\n") else raw[:-1]
    if line.translate(None, _CONTROL) != line:
        raise ProtocolError(f"a control character (a bare CR?) in the {what}: {line[:80]!r}")
    return line


def _status_line(raw: bytes) -> tuple[int, int, str]:
    """HTTP version (10 or 11), status code and reason; anything else (`HTTP/1.1 200OK`, `HTTP/2 …`) is an error."""
    line = _text(raw, "status line")
    version, _, rest = line.partition(b" ")
    code, _, reason = rest.partition(b" ")
    if version not in {b"HTTP/1.1", b"HTTP/1.0"} or len(code) != 3 or not code.isdigit() or code < b"100":  # noqa: PLR2004
        raise ProtocolError(f"a malformed status line: {line[:80]!r}")
    return (11 if version == b"HTTP/1.1" else 10), int(code), reason.decode("latin-1")


def _field(line: bytes) -> tuple[str, str]:
    name, colon, value = line.partition(b":")
    if not colon or not name or name.translate(None, _TOKEN):
        raise ProtocolError(f"a malformed header line: {line[:80]!r}")
    return name.decode("ascii"), value.strip(b" \t").decode("latin-1")


def _header_block(wire: Wire, what: str = "headers") -> Headers:
    """Header lines up to the empty line, bounded in line length, count and total size; obs-fold joined.

    A continuation line counts as a line (as `http.client` counts it): joining it copies the field's value so far.
    """
    fields: list[tuple[str, str]] = []
    total = lines = 0
    while line := _text(wire.line(MAX_LINE), what):
        total, lines = total + len(line), lines + 1
        if total > MAX_HEAD_BYTES:
            raise ProtocolError(f"{what} larger than {MAX_HEAD_BYTES} bytes")
        if lines > MAX_HEADERS:
            raise ProtocolError(f"more than {MAX_HEADERS} header lines")
        if line[:1] in {b" ", b"\t"}:  # obs-fold: the previous field goes on
            if not fields:
                raise ProtocolError(f"{what} begin with a continuation line")
            name, value = fields[-1]
            more = line.strip(b" \t").decode("latin-1")
            fields[-1] = (name, f"{value} {more}" if value else more)
            continue
        fields.append(_field(line))
    return Headers(fields)


def _content_length(headers: Headers) -> int | None:
    values = {value.strip() for value in headers.get_all("Content-Length")}
    if not values:
        return None
    value = values.pop()
    if values or not value.isascii() or not value.isdigit() or len(value) > 18:  # noqa: PLR2004 - past 10^18 bytes
        raise ProtocolError(f"an invalid or conflicting Content-Length: {headers.get_all('Content-Length')}")
    return int(value)


class RawResponse:
    """A response head and its body, read on demand from the wire in its framing."""

    def __init__(self, wire: Wire, method: str, version: int, status: int, reason: str, headers: Headers) -> None:
        """Frame the body: none, `Content-Length` bytes, chunks, or up to the connection's close."""
        self.status, self.reason, self.headers = status, reason, headers
        self._wire = wire
        tokens = {t.strip().lower() for t in ",".join(headers.get_all("Connection")).split(",")}
        self.will_close = "close" in tokens or (version == 10 and "keep-alive" not in tokens)  # noqa: PLR2004
        self.length: int | None = 0  # body bytes still to come; None: chunked or up to the close
        self._chunked, self._chunk_left, self._closed = False, 0, False
        no_body = method == "HEAD" or status in _NO_BODY_STATUS or status < 200  # noqa: PLR2004
        if no_body or (method == "CONNECT" and 200 <= status < 300):  # noqa: PLR2004
            self._closed = True
            self.will_close = self.will_close or status == 101  # noqa: PLR2004 - another protocol follows
            return
        codings = headers.get_all("Transfer-Encoding")
        if codings:
            if len(codings) > 1 or codings[0].strip().lower() != "chunked":
                raise ProtocolError(f"an unsupported Transfer-Encoding: {codings}")
            self._chunked, self.length = True, None
            self.will_close = self.will_close or "Content-Length" in headers  # RFC 9112 §6.3: chunked wins
            return
        self.length = _content_length(headers)
        if self.length is None:
            self.will_close = True
        elif self.length == 0:
            self._closed = True

    def isclosed(self) -> bool:
        """Has the whole body been read (or was there none)?"""
        return self._closed

    def read(self, size: int) -> bytes:
        """At most `size` body bytes; b"" once the body is done. A body cut short is a `ProtocolError`."""
        if self._closed:
            return b""
        if self._chunked:
            return self._read_chunk(size)
        data = self._wire.read(size if self.length is None else min(size, self.length))
        if self.length is not None:
            if not data:
                raise ProtocolError(f"the body was cut short: {self.length} of its Content-Length bytes never came")
            self.length -= len(data)
        self._closed = not data or self.length == 0
        return data

    def _read_chunk(self, size: int) -> bytes:
        if not self._chunk_left:
            self._chunk_left = self._chunk_size()
            if not self._chunk_left:
                _header_block(self._wire, "trailers")  # read, bounded, dropped
                self._closed = True
                return b""
        data = self._wire.read(min(size, self._chunk_left))
        if not data:
            raise ProtocolError("the chunked body ended before its last chunk")
        self._chunk_left -= len(data)
        if not self._chunk_left and self._wire.line(2) not in {b"\r\n", b"\n"}:
            raise ProtocolError("a chunk longer than its size")
        return data

    def _chunk_size(self) -> int:
        line = _text(self._wire.line(MAX_CHUNK_LINE), "chunk-size line")
        digits = line.split(b";", 1)[0].rstrip(b" \t")
        if not 0 < len(digits) <= 16 or digits.translate(None, _HEX):  # noqa: PLR2004 - Go's "chunk length too large"
            raise ProtocolError(f"a malformed chunk size: {line[:80]!r}")
        return int(digits, 16)


def read_response(wire: Wire, method: str) -> RawResponse:
    """The next final response's head (1xx answers skipped, at most `MAX_INFORMATIONAL`); the body stays on the wire."""
    for _ in range(MAX_INFORMATIONAL + 1):
        first = wire.line(MAX_LINE)
        if not first:
            raise Disconnected("the server closed the connection without answering")
        version, status, reason = _status_line(first)
        headers = _header_block(wire)
        if not 100 <= status < 200 or status == 101:  # noqa: PLR2004 - 101 Switching Protocols ends the exchange
            return RawResponse(wire, method, version, status, reason, headers)
    raise ProtocolError(f"more than {MAX_INFORMATIONAL} informational (1xx) responses")
