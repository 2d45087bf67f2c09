"""Owns: go-containerregistry's text for a registry's error answer (`transport.Error.Error()`), for imgpkg mode.

`<METHOD> <url>: ` then the answer: one distribution error as `CODE: message[; detail]`, several as
`multiple errors returned: a; b`, none as `unexpected status code <n> <Go's status text>[: <body>]` (a HEAD's empty
body says so, as ggcr does). Go's `%v` renders the detail.

The body is decoded as ggcr's `makeError` decodes it, `json.Unmarshal` into its `Error` struct, whatever its shape:
a body that is not JSON at all (NaN, trailing bytes, a byte-order mark) gives no errors; keys match fields ignoring
case (`gofold.py`), and a repeated key decodes again into what the one before left (an `errors` list reuses its
entries); a value of the wrong type leaves its field as it was (`{"errors": [1]}` is one empty diagnostic, `: `); null
clears a list or a detail and leaves a string; numbers are float64 (`1e+06`), and one past float64 is no value.
A body nested past the interpreter's stack (Go decodes 10,000 levels) is shown as text. Two bounds ggcr does not
have: a body over `MAX_ERROR_JSON` bytes is not decoded (30 MiB of `{},` took 1.7 GB and 11 s of CPU; a registry's
error document is a few hundred bytes) but shown as text, and the text is cut at `MAX_TEXT` characters (ggcr would
print a 30 MiB page whole).
"""

from __future__ import annotations

import contextlib

from ocivendir import jsondoc
from ocivendir.gofold import go_fold
from ocivendir.goyaml.gofloat import format_float
from ocivendir.registry.connections import BodyBroken

TYPE_CHECKING = False
if TYPE_CHECKING:
    from ocivendir.registry.transport import Response

__all__ = ["MAX_ERROR_JSON", "MAX_TEXT", "transport_text"]

MAX_TEXT = 64 << 10  # characters of an error's text kept; ggcr has no bound (a body may be 32 MiB here)
MAX_ERROR_JSON = 64 << 10  # bytes of an error body decoded as JSON at most; a larger one is shown as text
# Go's net/http StatusText (Go 1.22); Python's HTTPStatus phrases differ (414, 418) and change between versions
_STATUS_TEXT = {
    100: "Continue", 101: "Switching Protocols", 102: "Processing", 103: "Early Hints", 200: "OK", 201: "Created",
    202: "Accepted", 203: "Non-Authoritative Information", 204: "No Content", 205: "Reset Content",
    206: "Partial Content", 207: "Multi-Status", 208: "Already Reported", 226: "IM Used", 300: "Multiple Choices",
    301: "Moved Permanently", 302: "Found", 303: "See Other", 304: "Not Modified", 305: "Use Proxy",
    307: "Temporary Redirect", 308: "Permanent Redirect", 400: "Bad Request", 401: "Unauthorized",
    402: "Payment Required", 403: "Forbidden", 404: "Not Found", 405: "Method Not Allowed", 406: "Not Acceptable",
    407: "Proxy Authentication Required", 408: "Request Timeout", 409: "Conflict", 410: "Gone",
    411: "Length Required", 412: "Precondition Failed", 413: "Request Entity Too Large", 414: "Request URI Too Long",
    415: "Unsupported Media Type", 416: "Requested Range Not Satisfiable", 417: "Expectation Failed",
    418: "I'm a teapot", 421: "Misdirected Request", 422: "Unprocessable Entity", 423: "Locked",
    424: "Failed Dependency", 425: "Too Early", 426: "Upgrade Required", 428: "Precondition Required",
    429: "Too Many Requests", 431: "Request Header Fields Too Large", 451: "Unavailable For Legal Reasons",
    500: "Internal Server Error", 501: "Not Implemented", 502: "Bad Gateway", 503: "Service Unavailable",
    504: "Gateway Timeout", 505: "HTTP Version Not Supported", 506: "Variant Also Negotiates",
    507: "Insufficient Storage", 508: "Loop Detected", 510: "Not Extended", 511: "Network Authentication Required",
}  # fmt: skip
_UNREPRESENTABLE = object()  # a number past float64: Go saves an error and stores nothing


class _Object(list[tuple[str, object]]):
    """A JSON object as its key-value pairs, in order, repeats kept (Go decodes each in turn)."""


class _Diagnostic:
    """ggcr's `Diagnostic`: `Code`, `Message` (strings) and `Detail` (any; None is Go's nil)."""

    __slots__ = ("code", "detail", "message")

    def __init__(self) -> None:
        self.code, self.message = "", ""
        self.detail: object = None

    def decode(self, pairs: _Object) -> None:
        """Decode an object into this diagnostic as Go's json.Unmarshal does, over whatever it holds already."""
        for key, value in pairs:
            field = go_fold(key)
            if field in {"code", "message"} and isinstance(value, str):
                setattr(self, field, _text(value))
            elif field == "detail" and value is not _UNREPRESENTABLE:
                self.detail = _interface(value)

    def __str__(self) -> str:
        """`Diagnostic.String()`: `code: message`, then `; detail` unless the detail is nil."""
        text = f"{self.code}: {self.message}"
        return text if self.detail is None else f"{text}; {_go_value(self.detail)}"


def _number(literal: str) -> object:
    """A JSON number as Go decodes it into an interface: a float64, or nothing when float64 cannot hold it."""
    value = float(literal)
    return _UNREPRESENTABLE if value in {float("inf"), float("-inf")} else value


def _not_json(literal: str) -> object:
    raise ValueError(literal)  # NaN, Infinity: Python's json reads them, Go's does not


def _text(value: str) -> str:
    """A decoded JSON string as Go holds it: an unpaired surrogate escape (`\\ud800`) is U+FFFD."""
    if value.isascii():
        return value
    return "".join("\ufffd" if "\ud800" <= c <= "\udfff" else c for c in value)


def _interface(value: object) -> object:
    """A JSON value decoded into Go's `any`: objects are maps (a repeated key: the last), arrays are slices."""
    if isinstance(value, _Object):
        return {_text(k): _interface(v) for k, v in value}
    if isinstance(value, list):
        return [_interface(v) for v in value]
    if isinstance(value, str):
        return _text(value)
    return None if value is _UNREPRESENTABLE else value


def _errors(body: bytes) -> list[_Diagnostic]:
    """The `Errors` field json.Unmarshal leaves in ggcr's `Error` for this body (empty when it is not JSON)."""
    if len(body) > MAX_ERROR_JSON:
        return []
    try:
        document = jsondoc.loads(body.decode("utf-8", "replace"), object_pairs_hook=_Object,
                                 parse_number=_number, parse_constant=_not_json)  # fmt: skip
    except ValueError:
        return []
    errors: list[_Diagnostic] = []
    for key, value in document if isinstance(document, _Object) else ():
        if go_fold(key) != "errors":
            continue
        if value is None:
            errors = []
        elif isinstance(value, list) and not isinstance(value, _Object):
            reused = errors
            errors = []
            for index, item in enumerate(value):  # Go decodes into the entries a repeated key left, then truncates
                entry = reused[index] if index < len(reused) else _Diagnostic()
                if isinstance(item, _Object):
                    entry.decode(item)
                errors.append(entry)
    return errors


def _go_value(value: object) -> str:
    """Go's `%v` of a decoded JSON value (maps print their keys sorted, lists space-separated)."""
    if isinstance(value, dict):
        return "map[" + " ".join(f"{k}:{_go_value(v)}" for k, v in sorted(value.items())) + "]"
    if isinstance(value, list):
        return "[" + " ".join(_go_value(v) for v in value) + "]"
    if value is None:
        return "<nil>"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return format_float(value)  # Go's %v of a float64
    return str(value)


def _answer(method: str, status: int, body: bytes) -> str:
    with contextlib.suppress(RecursionError):  # a detail nested past this interpreter's stack: the body as text
        errors = _errors(body)
        if len(errors) == 1:
            return str(errors[0])
        if errors:
            return "multiple errors returned: " + "; ".join(map(str, errors))
    prefix = f"unexpected status code {status} {_STATUS_TEXT.get(status, '')}"
    if body:
        return f"{prefix}: {body.decode('utf-8', 'replace')}"
    if method == "HEAD":
        return f"{prefix} (HEAD responses have no body, use GET for details)"
    return prefix


def transport_text(response: Response) -> str:
    """The text of ggcr's `transport.Error` for an error answer (its body already read or readable)."""
    method = str(response.request.method or "")
    body = b""
    with contextlib.suppress(RuntimeError, ValueError, AttributeError, OSError, BodyBroken):
        body = response.content or b""
    text = f"{method} {response.url}: {_answer(method, response.status_code, body)}"
    return text if len(text) <= MAX_TEXT else f"{text[:MAX_TEXT]}… ({len(text)} characters in all)"
