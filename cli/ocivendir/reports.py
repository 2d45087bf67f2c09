"""Owns: the results of the commands that report rather than fetch: `verify-relocation` and `cache ls/prune/verify`.

Apart from `results.py`, whose records every sync and pull defines at start-up: a class costs ~150K instructions to
create, and a warm sync needs none of these.
"""

from __future__ import annotations

from dataclasses import dataclass

TYPE_CHECKING = False
if TYPE_CHECKING:
    from ocivendir.results import ImageStatusValue, RequestStats

__all__ = [
    "ArchiveItem",
    "BundleReport",
    "CacheEntry",
    "CacheExportResult",
    "CacheImportResult",
    "CacheLsResult",
    "CachePruneResult",
    "CacheTotals",
    "CacheVerifyResult",
    "ImageReport",
    "VerifyRelocationResult",
]


@dataclass(frozen=True, kw_only=True)
class ImageReport:
    """One image of a bundle and its status in the bundle repository."""

    image: str
    digest: str
    status: ImageStatusValue


@dataclass(frozen=True, kw_only=True)
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


@dataclass(frozen=True, kw_only=True)
class VerifyRelocationResult:
    """The outcome of `verify-relocation`."""

    bundles: tuple[BundleReport, ...]
    requests: RequestStats
    warnings: tuple[str, ...]


@dataclass(frozen=True, kw_only=True)
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


@dataclass(frozen=True, kw_only=True)
class CacheTotals:
    """Totals of `cache ls`: entries and unique bytes (a shared blob counted once)."""

    entries: int
    bytes: int


@dataclass(frozen=True, kw_only=True)
class CacheLsResult:
    """The outcome of `cache ls`."""

    root: str
    entries: tuple[CacheEntry, ...]
    totals: CacheTotals


@dataclass(frozen=True, kw_only=True)
class CachePruneResult:
    """The outcome of `cache prune`."""

    removed: tuple[CacheEntry, ...]
    skipped_in_use: tuple[str, ...]
    bytes_freed: int
    dry_run: bool
    partials: tuple[str, ...] = ()  # stale partial downloads removed from tmp/ (their bytes are in bytes_freed)
    unreferenced: tuple[str, ...] = ()  # verified blobs no entry needs, removed (their bytes are in bytes_freed)


@dataclass(frozen=True, kw_only=True)
class CacheVerifyResult:
    """The outcome of `cache verify`."""

    checked: int
    repairs: tuple[str, ...]
    consistent: bool
    repair: bool
    unreferenced: tuple[str, ...] = ()  # blobs that verify but no entry needs: no damage, `cache prune` reclaims them


@dataclass(frozen=True, kw_only=True)
class ArchiveItem:
    """One top-level manifest of an archive imported or exported: where it is served, its digest and bytes."""

    ref: str
    digest: str
    kind: str  # bundle, image or index
    bytes: int  # the manifest and everything under it, each blob once (export: not counted for an earlier REF)
    origin: str = ""  # imgpkg's OrigRef: the reference a bundle's images.yml gives it
    tag: str = ""


@dataclass(frozen=True, kw_only=True)
class CacheImportResult:
    """The outcome of `cache import`."""

    source: str
    format: str  # imgpkg-tar or oci-layout
    repository: str
    imported: tuple[ArchiveItem, ...]
    already_present: tuple[ArchiveItem, ...]
    relocated_bundles: tuple[str, ...]
    blobs: int
    blobs_new: int
    bytes_new: int
    bytes_read: int
    warnings: tuple[str, ...] = ()


@dataclass(frozen=True, kw_only=True)
class CacheExportResult:
    """The outcome of `cache export`."""

    output: str
    exported: tuple[ArchiveItem, ...]
    blobs: int
    bytes: int
