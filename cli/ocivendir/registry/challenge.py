"""Owns: reading a `WWW-Authenticate` challenge — its scheme and its auth-params (RFC 7235 §2.1).

`Bearer realm="https://auth.example.com/token",service="registry",scope="repository:a/b:pull,push"` becomes the
scheme `bearer` and `{"realm": …, "service": …, "scope": …}`. The list and its quoted strings are read by requests'
header utilities (quoted values keep their commas, `\\` escapes are undone); names are case-insensitive and the
first of a repeated one counts. oras-py's parser does not serve (docs/dependencies.md: a regex that loses unquoted
values and the scheme).
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
    from requests.utils import parse_list_header, unquote_header_value  # noqa: PLC0415 - a 401 came through requests

    scheme, _, rest = header.strip().partition(" ")
    params: dict[str, str] = {}
    for item in parse_list_header(rest):  # type: ignore[no-untyped-call] # typeshed leaves it unannotated
        name, equals, value = item.partition("=")
        value = value.strip()
        if value.startswith('"') and not value.endswith('"'):
            value += '"'  # a quoted value the header ended inside: what it holds so far
        if equals and name.strip():
            params.setdefault(name.strip().lower(), unquote_header_value(value))
    return Challenge(scheme.lower(), params)
