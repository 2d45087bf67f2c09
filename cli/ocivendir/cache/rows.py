"""Owns: the rows of the cache index as values, and checking every value read back from `index.db` before use.

The index is data, never code or routing: anyone who can write the cache directory can write `index.db`, so a row
is decoded strictly (types, digests, references, media types, finite times, verdict JSON) and a row that does not
decode is treated as absent — the content is refetched or re-checked and the row rewritten — with a debug line.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ocivendir import diag, jsondoc
from ocivendir.errors import BadReference
from ocivendir.oci.reference import Digest, parse_digest, parse_reference

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import TypeVar

    _T = TypeVar("_T")
    _A = TypeVar("_A")

__all__ = [
    "KINDS",
    "SCHEMES",
    "BadRow",
    "BlobRow",
    "RefRow",
    "Verdict",
    "blob_media_type",
    "blob_row",
    "decoded",
    "digest_ref",
    "digest_value",
    "media_type",
    "ref_row",
    "scheme_value",
    "size_value",
    "time_value",
    "verdict_row",
]

_log = diag.logger("ocivendir.cache")

KINDS = frozenset({"image", "bundle", "locations", "signature"})
SCHEMES = frozenset({"https", "http"})
_METHODS = frozenset({"locations", "probes", "import"})  # import: `cache import` stands where a copy would
# RFC 6838 type/subtype names (restricted-name characters), with an optional +suffix
_ALNUM = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
_MEDIA_CHARS = _ALNUM + "!#$&^_.+-"  # RFC 6838 restricted names: 1-127 of these, starting alphanumeric
_MEDIA_PART = 127
_MAX_SIZE = 1 << 62
_MAX_MISSING = 100_000
_MAX_TEXT = 255


class BadRow(ValueError):
    """A value read back from the index that does not have the shape ocivendir writes."""


@dataclass(frozen=True, kw_only=True)
class RefRow:
    """A cached ref: a fully qualified `registry/repo@sha256:<hex>` and what it is."""

    ref: str
    manifest_digest: Digest
    kind: str
    media_type: str
    size: int
    created: float
    last_used: float


@dataclass(frozen=True, kw_only=True)
class BlobRow:
    """A cached blob."""

    digest: Digest
    size: int
    media_type: str


@dataclass(frozen=True, kw_only=True)
class Verdict:
    """A recorded relocation verdict for a fully qualified bundle ref."""

    bundle_ref: str
    relocated: bool
    method: str
    missing: tuple[str, ...]
    checked_at: float
    locations_digest: Digest | None = None


def _text(value: object, what: str) -> str:
    if not isinstance(value, str):
        raise BadRow(f"{what} is not text")
    return value


def digest_value(value: object) -> Digest:
    """A `sha256:<hex>` digest column."""
    try:
        return parse_digest(_text(value, "digest"))
    except BadReference as exc:
        raise BadRow(exc.message) from None


def digest_ref(value: object) -> str:
    """A fully qualified `registry/repo@sha256:<hex>` column, in its canonical spelling."""
    text = _text(value, "ref")
    try:
        parsed = parse_reference(text)
    except BadReference as exc:
        raise BadRow(exc.message) from None
    if parsed.digest is None or str(parsed) != text:
        raise BadRow(f"ref {text!r} is not a canonical digest reference")
    return text


def _media_part(part: str) -> bool:
    return 0 < len(part) <= _MEDIA_PART and part[0] in _ALNUM and not part.strip(_MEDIA_CHARS)


def media_type(value: object, *, empty_ok: bool = False) -> str:
    """A manifest's media type column (`type/subtype`): index.json lists it as the descriptor's type."""
    text = _text(value, "media type")
    kind, slash, subtype = text.partition("/")
    if not (empty_ok and text == "") and not (slash and _media_part(kind) and _media_part(subtype)):
        raise BadRow(f"media type {text[:80]!r} is malformed")
    return text


def blob_media_type(value: object) -> str:
    """A blob's media type column: whatever its manifest said, as bounded printable text (only reported)."""
    text = _text(value, "media type")
    if len(text) > _MAX_TEXT or not text.isprintable():
        raise BadRow("blob media type is not printable text")
    return text


def size_value(value: object) -> int:
    """A byte count column: a non-negative integer."""
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= _MAX_SIZE:
        raise BadRow(f"size {value!r} is not a byte count")
    return value


def time_value(value: object) -> float:
    """A timestamp column: a finite, non-negative number."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or value < 0:
        raise BadRow(f"time {value!r} is not a timestamp")
    return float(value)


def ref_row(row: tuple[object, ...]) -> RefRow:
    """A `refs` row: ref, manifest_digest, kind, media_type, size, created, last_used."""
    kind = _text(row[2], "kind")
    if kind not in KINDS:
        raise BadRow(f"kind {kind[:40]!r} is unknown")
    return RefRow(ref=digest_ref(row[0]), manifest_digest=digest_value(row[1]), kind=kind,
                  media_type=media_type(row[3], empty_ok=True), size=size_value(row[4]),
                  created=time_value(row[5]), last_used=time_value(row[6]))  # fmt: skip


def blob_row(row: tuple[object, ...]) -> BlobRow:
    """A `blobs` row: digest, size, media_type."""
    return BlobRow(digest=digest_value(row[0]), size=size_value(row[1]), media_type=blob_media_type(row[2]))


def verdict_row(bundle_ref: str, row: tuple[object, ...]) -> Verdict:
    """A `verdicts` row: relocated, method, missing_json, checked_at, locations_digest."""
    relocated, method, missing_json, checked_at, locations = row
    if relocated not in (0, 1) or isinstance(relocated, float):
        raise BadRow(f"relocated {relocated!r} is not 0 or 1")
    if method not in _METHODS:
        raise BadRow(f"method {method!r} is unknown")
    try:
        missing = jsondoc.loads(_text(missing_json, "missing images"))
    except ValueError:  # too deep is invalid JSON (jsondoc)
        raise BadRow("missing images are not JSON") from None
    if not isinstance(missing, list) or len(missing) > _MAX_MISSING or not all(isinstance(m, str) for m in missing):
        raise BadRow("missing images are not a list of references")
    return Verdict(bundle_ref=bundle_ref, relocated=bool(relocated), method=str(method), missing=tuple(missing),
                   checked_at=time_value(checked_at),
                   locations_digest=None if locations is None else digest_value(locations))  # fmt: skip


def scheme_value(value: object) -> str:
    """A `schemes` column: `https` or `http`, never anything that could reroute a URL."""
    if value not in SCHEMES:
        raise BadRow(f"scheme {str(value)[:80]!r} is neither https nor http")
    return str(value)


def decoded(what: str, key: object, decode: Callable[[_A], _T], value: _A) -> _T | None:
    """`decode(value)` for one row; a row that does not decode counts as absent, with a debug line saying why."""
    try:
        return decode(value)
    except (BadRow, ValueError, TypeError, IndexError) as exc:
        _log.debug("cache index: ignoring the %s row for %r: %s", what, key, exc)
        return None
