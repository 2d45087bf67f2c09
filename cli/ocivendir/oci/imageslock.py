"""Owns: imgpkg's ImagesLock, BundleLock and ImageLocations formats — strict parsing with imgpkg's messages."""

from __future__ import annotations

from dataclasses import dataclass

from ocivendir.errors import BadReference, ImagesLockError
from ocivendir.goyaml.load import field
from ocivendir.oci.reference import Reference, parse_reference
from ocivendir.oci.strictyaml import StrictYAMLError, check_fields, go_string, load_document

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

__all__ = [
    "API_VERSION",
    "MAX_IMAGES_LOCK_BYTES",
    "BundleLock",
    "ImageEntry",
    "ImageLocation",
    "ImagesLock",
    "parse_bundle_lock",
    "parse_image_locations",
    "parse_images_lock",
]

API_VERSION = "imgpkg.carvel.dev/v1alpha1"
_TOP_FIELDS = frozenset({"apiVersion", "kind", "images"})
_IMAGE_FIELDS = frozenset({"image", "annotations"})


@dataclass(frozen=True, kw_only=True)
class ImageEntry:
    """One `images[]` entry: the reference as written, its parsed digest form, and its annotations."""

    image: str
    reference: Reference
    annotations: dict[str, str] | None


MAX_IMAGES_LOCK_BYTES = 4 << 20  # some 16,000 images: a larger `.imgpkg/images.yml` is refused, not read into memory


@dataclass(frozen=True, kw_only=True)
class ImagesLock:
    """A parsed `.imgpkg/images.yml`."""

    images: tuple[ImageEntry, ...]


@dataclass(frozen=True, kw_only=True)
class BundleLock:
    """A parsed BundleLock (`pull --lock`)."""

    image: Reference
    tag: str | None


@dataclass(frozen=True, kw_only=True)
class ImageLocation:
    """One entry of a locations image: the original reference and whether it is a bundle."""

    image: str
    is_bundle: bool


def _digest_reference(text: str, prefix: str) -> Reference:
    try:
        ref = parse_reference(text)
    except BadReference:
        ref = None
    if ref is None or ref.digest is None:
        raise ImagesLockError(f"{prefix}: Expected ref to be in digest form, got '{text}'")
    return ref


def _validate_header(doc: dict[str, Any], kind: str, prefix: str) -> None:
    if go_string(doc.get("apiVersion"), "apiVersion") != API_VERSION:
        raise ImagesLockError(f"{prefix}: Validating apiVersion: Unknown version (known: {API_VERSION})")
    if go_string(doc.get("kind"), "kind") != kind:
        raise ImagesLockError(f"{prefix}: Validating kind: Unknown kind (known: {kind})")


def _load(raw: bytes, what: str) -> dict[str, Any]:
    try:
        doc = load_document(raw)
    except StrictYAMLError as exc:
        raise ImagesLockError(f"Unmarshaling {what}: {exc}") from None
    if doc is None:
        return {}
    if not isinstance(doc, dict):
        raise ImagesLockError(f"Unmarshaling {what}: error unmarshaling JSON: expected an object")
    return doc


def _object(raw: Any, field: str) -> dict[str, Any]:  # noqa: ANN401 - YAML data
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise StrictYAMLError(f"error unmarshaling JSON: while decoding JSON: json: cannot unmarshal into {field}")
    return raw


def _annotations(raw: Any) -> dict[str, str] | None:  # noqa: ANN401 - YAML data
    if raw is None:
        return None
    if not isinstance(raw, dict):
        raise StrictYAMLError("error unmarshaling JSON: while decoding JSON: json: cannot unmarshal into annotations")
    return {str(k): go_string(v, "annotations") for k, v in raw.items()}


def _entries(doc: dict[str, Any]) -> list[tuple[str, dict[str, str] | None]]:
    images = doc.get("images") or []
    if not isinstance(images, list):
        raise StrictYAMLError("error unmarshaling JSON: while decoding JSON: json: cannot unmarshal into images")
    entries = []
    for item in images:
        entry = item if isinstance(item, dict) else {}
        check_fields(entry, _IMAGE_FIELDS)
        entries.append((go_string(entry.get("image"), "image"), _annotations(entry.get("annotations"))))
    return entries


def parse_images_lock(raw: bytes) -> ImagesLock:
    """Parse `images.yml` exactly as imgpkg accepts it (imgpkg-bundles spec §2.2)."""
    doc = _load(raw, "images lock")
    try:
        check_fields(doc, _TOP_FIELDS)
        entries = _entries(doc)
    except StrictYAMLError as exc:
        raise ImagesLockError(f"Unmarshaling images lock: {exc}") from None
    _validate_header(doc, "ImagesLock", "Validating images lock")
    images = tuple(
        ImageEntry(image=image, reference=_digest_reference(image, "Validating images lock"), annotations=notes)
        for image, notes in entries
    )
    return ImagesLock(images=images)


def parse_bundle_lock(raw: bytes) -> BundleLock:
    """Parse a BundleLock (`kind: BundleLock`, `bundle.image` a digest reference)."""
    doc = _load(raw, "bundle lock")
    try:
        check_fields(doc, frozenset({"apiVersion", "kind", "bundle"}))
        bundle = _object(doc.get("bundle"), "bundle")
        check_fields(bundle, frozenset({"image", "tag"}))
        image = go_string(bundle.get("image"), "image")
        tag = go_string(bundle.get("tag"), "tag") or None
    except StrictYAMLError as exc:
        raise ImagesLockError(f"Unmarshaling bundle lock: {exc}") from None
    _validate_header(doc, "BundleLock", "Validating bundle lock")
    return BundleLock(image=_digest_reference(image, "Validating bundle lock"), tag=tag)


def parse_image_locations(raw: bytes) -> tuple[ImageLocation, ...]:
    """Parse a locations image's `image-locations.yml` as imgpkg's yaml.Unmarshal does.

    Unknown fields are allowed; field names match as Go's encoding/json matches them (ignoring case, the greatest
    matching key winning), so `images` spelt with a long s (U+017F) reads as imgpkg reads it.
    """
    doc = _load(raw, "image locations")
    header = {"apiVersion": field(doc, "apiVersion"), "kind": field(doc, "kind")}
    _validate_header(header, "ImageLocations", "Validating image locations")
    images = field(doc, "images") or []
    if not isinstance(images, list):
        raise ImagesLockError("Unmarshaling image locations: images is not a list")
    return tuple(
        ImageLocation(image=go_string(field(i, "image"), "image"), is_bundle=field(i, "isBundle") is True)
        for i in images
        if isinstance(i, dict)
    )
