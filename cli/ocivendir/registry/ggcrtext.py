"""Owns: go-containerregistry's text for a registry's error answer (`transport.Error.Error()`), for imgpkg mode.

`<METHOD> <url>: ` then the answer: one distribution error as `CODE: message[; detail]`, several as
`multiple errors returned: a; b`, none as `unexpected status code <n> <reason>[: <body>]` (a HEAD's empty body says
so, as ggcr does). Go's `%v` renders the detail.
"""

from __future__ import annotations

import contextlib

from ocivendir import jsondoc
from ocivendir.registry.connections import BodyBroken

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from ocivendir.registry.transport import Response

__all__ = ["transport_text"]


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
    return str(value)


def _diagnostic(entry: dict[str, object]) -> str:
    text = f"{entry.get('code', '')}: {entry.get('message', '')}"
    if entry.get("detail") is not None:
        text += f"; {_go_value(entry['detail'])}"
    return text


def _answer(method: str, status: int, body: bytes) -> str:
    with contextlib.suppress(ValueError, AttributeError, TypeError):
        document: Any = jsondoc.loads(body)
        errors = document["errors"]
        if errors and all(isinstance(e, dict) for e in errors):
            if len(errors) == 1:
                return _diagnostic(errors[0])
            return "multiple errors returned: " + "; ".join(_diagnostic(e) for e in errors)
    from http import HTTPStatus  # noqa: PLC0415 - an enum of 60 members: only for an error's text

    reason = ""
    with contextlib.suppress(ValueError):
        reason = HTTPStatus(status).phrase
    prefix = f"unexpected status code {status} {reason}".rstrip()
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
    return f"{method} {response.url}: {_answer(method, response.status_code, body)}"
