"""Owns: the frozen results engines return, the events they emit while working, and their JSON form."""

from __future__ import annotations

import os
from dataclasses import dataclass, field, fields, is_dataclass

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Mapping
    from typing import Any, Final, Literal

    ImageStatusValue = Literal["present", "missing", "denied", "error", "unchecked"]

__all__ = [
    "RESULT_SCHEMA_VERSION",
    "Event",
    "EventSink",
    "ImageStatus",
    "ImageStatusValue",
    "LogEvent",
    "ProgressEvent",
    "PullResult",
    "RelocationOutcome",
    "RequestStats",
    "SyncResult",
    "WarningEvent",
    "to_dict",
]

RESULT_SCHEMA_VERSION = 1


@dataclass(frozen=True, kw_only=True)
class RequestStats:
    """HTTP requests one run sent (design §4.1: token fetches and 401 challenges count, and are also `auth`)."""

    total: int = 0
    auth: int = 0
    connect_errors: int = 0
    by_method: Mapping[str, int] = field(default_factory=dict)
    by_status: Mapping[str, int] = field(default_factory=dict)
    bytes_received: int = 0
    by_endpoint: Mapping[str, int] = field(default_factory=dict)
    served_by: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True, kw_only=True)
class LogEvent:
    """A progress line (vendir's and imgpkg's texts in plain mode)."""

    message: str
    indent: int = 0


@dataclass(frozen=True, kw_only=True)
class ProgressEvent:
    """Bytes done for one blob download, for the live view."""

    key: str
    label: str
    done: int
    total: int


@dataclass(frozen=True, kw_only=True)
class WarningEvent:
    """A degraded outcome the user must hear about (design §4.7)."""

    message: str


Event = LogEvent | ProgressEvent | WarningEvent
if TYPE_CHECKING:
    EventSink = Callable[[Event], None]


class ImageStatus:
    """Where one image of a bundle's lock stands in the bundle's repository (plain str constants: enum costs imports).

    Values are typed `ImageStatusValue`; compare them with `is` or `==`.
    """

    PRESENT: Final = "present"
    MISSING: Final = "missing"
    DENIED: Final = "denied"
    ERROR: Final = "error"
    UNCHECKED: Final = "unchecked"


@dataclass(frozen=True, kw_only=True)
class RelocationOutcome:
    """What pull decided about one bundle's images.yml."""

    bundle_repo: str
    relocated: bool
    method: str
    rewritten: bool
    from_cache: bool
    missing: tuple[str, ...] = ()
    denied: tuple[str, ...] = ()


@dataclass(frozen=True, kw_only=True)
class PullResult:
    """The outcome of one `pull`."""

    ref: str
    digest: str
    kind: str
    output: str
    layers: int
    bytes_fetched: int
    cache_hits: int
    skipped_entries: int
    relocation: RelocationOutcome | None
    nested: tuple[str, ...]
    requests: RequestStats
    warnings: tuple[str, ...]


@dataclass(frozen=True, kw_only=True)
class SyncResult:
    """The outcome of one `sync`: the lock it produced (as printed) and what it fetched or skipped."""

    lock: str
    fetched: int
    skipped: int
    requests: RequestStats
    warnings: tuple[str, ...]


def _plain(value: Any) -> Any:  # noqa: ANN401 - converts any result field to JSON types
    if is_dataclass(value) and not isinstance(value, type):
        return {f.name: _plain(getattr(value, f.name)) for f in fields(value)}
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if isinstance(value, os.PathLike):
        return os.fspath(value)
    return value


def to_dict(result: object) -> dict[str, Any]:
    """Turn a result record into plain JSON-ready data."""
    data = _plain(result)
    if not isinstance(data, dict):
        msg = f"not a result record: {type(result).__name__}"
        raise TypeError(msg)
    return data
