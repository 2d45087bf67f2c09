"""Owns: reading a `WWW-Authenticate` challenge — its scheme and its auth-params (RFC 7235 §2.1).

`Bearer realm="https://auth.example.com/token",service="registry",scope="repository:a/b:pull,push"` becomes the
scheme `bearer` and `{"realm": …, "service": …, "scope": …}`. Quoted values keep their commas and `\\` escapes are
undone; parameter names are case-insensitive. It replaces oras-py's parser (a regex that lost unquoted values),
so an auth challenge costs no third-party import.
"""

from __future__ import annotations

__all__ = ["Challenge", "parse_challenge"]


class Challenge:
    """A challenge's scheme (lower case, empty when the header was empty) and its parameters."""

    __slots__ = ("params", "scheme")

    def __init__(self, scheme: str, params: dict[str, str]) -> None:
        """Hold the parsed parts."""
        self.scheme = scheme
        self.params = params

    @property
    def realm(self) -> str:
        """The token endpoint of a Bearer challenge ('' when absent)."""
        return self.params.get("realm", "")

    @property
    def service(self) -> str:
        """The `service` parameter ('' when absent)."""
        return self.params.get("service", "")


def parse_challenge(header: str) -> Challenge:
    """The first challenge of a `WWW-Authenticate` value."""
    text = header.strip()
    scheme, _, rest = text.partition(" ")
    params: dict[str, str] = {}
    at = 0
    while at < len(rest):
        name, at = _until(rest, at, "=,")
        if at < len(rest) and rest[at] == "=":
            value, at = _value(rest, at + 1)
            if name:
                params.setdefault(name.lower(), value)
        at += 1  # past the comma
    return Challenge(scheme.lower(), params)


def _until(text: str, at: int, stops: str) -> tuple[str, int]:
    """The trimmed run of `text` from `at` up to the first of `stops` (or the end), and where it stopped."""
    end = at
    while end < len(text) and text[end] not in stops:
        end += 1
    return text[at:end].strip(), end


def _value(text: str, at: int) -> tuple[str, int]:
    """A token or quoted-string value starting at `at` (leading blanks skipped); returns it and the next comma."""
    while at < len(text) and text[at] in " \t":
        at += 1
    if at >= len(text) or text[at] != '"':
        return _until(text, at, ",")
    chars: list[str] = []
    at += 1
    while at < len(text) and text[at] != '"':
        if text[at] == "\\" and at + 1 < len(text):
            at += 1
        chars.append(text[at])
        at += 1
    _, at = _until(text, at + 1, ",")  # anything between the closing quote and the comma is dropped
    return "".join(chars), at
