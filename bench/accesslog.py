"""Owns: what the registry served, counted from its own access log (requests and response bytes), between marks.

The client's own counters are never used: the figures are what the registry saw, for every tool alike.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from tests.support.registry import SENTINEL, Registry

from bench.measure import Run

# combined log format: "GET /v2/... HTTP/1.1" 200 1234 "referer" "user agent"
_LINE = re.compile(r'"(GET|HEAD|POST|PUT|PATCH|DELETE) (\S+) HTTP/[0-9.]+" (\d{3}) (\d+|-)')


@dataclass(frozen=True)
class Traffic:
    """Requests and response body bytes the registry logged, with the requests by method."""

    requests: int
    bytes: int
    by_method: dict[str, int]
    paths: tuple[str, ...]
    gets: tuple[str, ...] = ()  # the paths of the GET requests

    def under(self, prefixes: Iterable[str]) -> int:
        """How many of the requests were for paths under any of `prefixes` (such as `/v2/<repo>/`)."""
        wanted = tuple(prefixes)
        return sum(1 for path in self.paths if path.startswith(wanted))

    def as_dict(self) -> dict[str, object]:
        """The JSON form."""
        return {"requests": self.requests, "bytes": self.bytes, "by_method": dict(sorted(self.by_method.items()))}


class AccessLog:
    """A registry's access log file, read whole; marks are line counts once the log has settled."""

    def __init__(self, registry: Registry) -> None:
        """Read `registry`'s access log (it appends one line after each response)."""
        self.registry = registry
        self.path = registry.log_path

    def lines(self) -> list[tuple[str, str, int]]:
        """Every logged request so far: (method, path, bytes), the test harness's sentinels left out."""
        text = self.path.read_text(errors="replace") if self.path.exists() else ""
        found = [(m[1], m[2], 0 if m[4] == "-" else int(m[4])) for m in _LINE.finditer(text)]
        return [line for line in found if not line[1].startswith(SENTINEL)]

    def settled(self) -> list[tuple[str, str, int]]:
        """The log once it has stopped growing (a line is written just after its response is sent)."""
        self.registry.settled_requests()
        return self.lines()

    def mark(self) -> int:
        """A position to count from."""
        return len(self.settled())

    def since(self, mark: int) -> Traffic:
        """What was served after `mark`."""
        lines = self.settled()[mark:]
        methods: dict[str, int] = {}
        for method, _, _ in lines:
            methods[method] = methods.get(method, 0) + 1
        return Traffic(len(lines), sum(size for _, _, size in lines), methods, tuple(path for _, path, _ in lines),
                       tuple(path for method, path, _ in lines if method == "GET"))  # fmt: skip


def counting(log: AccessLog, once: Callable[[], Run], traffic: list[Traffic]) -> Callable[[], Run]:
    """`once`, with what the registry served during each call appended to `traffic`."""

    def counted() -> Run:
        mark = log.mark()
        done = once()
        traffic.append(log.since(mark))
        return done

    return counted
