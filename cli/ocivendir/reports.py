"""Owns: the results of the commands that report rather than fetch: `verify-relocation` and `cache ls/prune/verify`.

Apart from `results.py`, whose records every sync and pull defines at start-up: a class costs ~150K instructions to
create, and a warm sync needs none of these.
"""

from __future__ import annotations

from ocivendir.record import record

TYPE_CHECKING = False
if TYPE_CHECKING:
    from ocivendir.results import ImageStatusValue, RequestStats

__all__ = [
    "BundleReport",
    "CacheEntry",
    "CacheLsResult",
    "CachePruneResult",
    "CacheTotals",
    "CacheVerifyResult",
    "ImageReport",
    "VerifyRelocationResult",
]


@record
class ImageReport:
    """One image of a bundle and its status in the bundle repository."""

    image: str
    digest: str
    status: ImageStatusValue


@record
class BundleReport:
    """verify-relocation's answer for one bundle (and its nested bundles under -r)."""

    ref: str
    digest: str
    repository: str
    method: str
    verdict: str
    images: tuple[ImageReport, ...]
    nested: tuple[BundleReport, ...] = ()
    error: str | None = None
    signature: str | None = None  # with --policy: verified, unmatched, warned (a warn policy failed) or failed


@record
class VerifyRelocationResult:
    """The outcome of `verify-relocation`."""

    bundles: tuple[BundleReport, ...]
    requests: RequestStats
    warnings: tuple[str, ...]


@record
class CacheEntry:
    """One cached ref."""

    ref: str
    digest: str
    kind: str
    size: int
    created: float
    last_used: float
    verdict: str | None
    signature: str | None = None  # the signature verdict remembered for it (`--policy`), if any


@record
class CacheTotals:
    """Totals of `cache ls`: entries and unique bytes (a shared blob counted once)."""

    entries: int
    bytes: int


@record
class CacheLsResult:
    """The outcome of `cache ls`."""

    root: str
    entries: tuple[CacheEntry, ...]
    totals: CacheTotals


@record
class CachePruneResult:
    """The outcome of `cache prune`."""

    removed: tuple[CacheEntry, ...]
    skipped_in_use: tuple[str, ...]
    bytes_freed: int
    dry_run: bool


@record
class CacheVerifyResult:
    """The outcome of `cache verify`."""

    checked: int
    repairs: tuple[str, ...]
    consistent: bool
    repair: bool
