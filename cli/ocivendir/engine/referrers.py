"""Owns: finding and fetching the Sigstore bundles attached to an image as OCI 1.1 referrers.

The referrers are asked of the registry's referrers API (`GET /v2/<name>/referrers/<digest>`, an image index); a
registry without it answers 404, and then the referrers tag schema is read instead: the index tagged
`sha256-<hex>` in the image's repository (Distribution 2.8 has no API, so there the tag is what cosign writes). Of the
index's manifests, those whose `artifactType` is a Sigstore bundle's are fetched through `Content` (verified by
digest, cached, possessed and recorded as kind `signature`, like cosign's classic signatures), each one's bundle
layer read whole. At most `MAX_SIGNATURES` bundles of at most `MAX_PAYLOAD` bytes each are read: a hostile registry
cannot make a run fetch more.
"""

from __future__ import annotations

from dataclasses import dataclass

from ocivendir.errors import NotFound, OcivendirError
from ocivendir.oci.manifest import Manifest, served_digest
from ocivendir.sign.bundle import BUNDLE_TYPES
from ocivendir.sign.cosign import MAX_PAYLOAD, MAX_SIGNATURES

TYPE_CHECKING = False
if TYPE_CHECKING:
    from ocivendir.engine.content import Content, Subject
    from ocivendir.oci.reference import Digest

__all__ = ["Bundles", "bundle_digests", "read_bundles"]


@dataclass(frozen=True, kw_only=True)
class Bundles:
    """The raw JSON of the Sigstore bundles found for an image, or why none could be read."""

    found: tuple[bytes, ...] = ()
    problem: str = ""


def bundle_digests(index: bytes, where: str) -> list[Digest]:
    """The manifests of a referrers index whose `artifactType` is a Sigstore bundle's (ValueError when malformed)."""
    from ocivendir import jsondoc  # noqa: PLC0415 - only here (json imports re); a deep document is invalid JSON

    try:
        doc = jsondoc.loads(index)
    except ValueError:
        raise ValueError(f"{where} is not JSON") from None
    manifests = doc.get("manifests") if isinstance(doc, dict) else None
    if not isinstance(manifests, list):
        raise ValueError(f"{where} is not an image index")  # noqa: TRY004 - a malformed answer, not a caller's type
    return [
        served_digest(item["digest"], where)
        for item in manifests
        if isinstance(item, dict) and item.get("artifactType") in BUNDLE_TYPES and isinstance(item.get("digest"), str)
    ]


def _index(content: Content, image: Subject) -> tuple[bytes, str] | None:
    """The referrers index and where it came from: the API, else the tag schema; None when neither has one."""
    if not content.offline:
        raw = content.client().referrers(image.repo, image.digest)
        if raw is not None:
            return raw, f"the referrers of '{image.repo.at(image.digest)}'"
    tag = image.repo.tagged(image.digest.tag_form)
    try:
        digest = content.resolve(tag)
    except NotFound:
        return None
    return content.manifest_bytes(image.repo, digest), f"the referrers index '{tag}'"  # parsed by bundle_digests


def read_bundles(content: Content, image: Subject) -> Bundles:
    """The Sigstore bundles attached to an image (none when it has no referrers)."""
    try:
        located = _index(content, image)
        if located is None:
            return Bundles(problem="no Sigstore bundle (no referrers API answer, no referrers tag)")
        raw, where = located
        digests = bundle_digests(raw, where)[:MAX_SIGNATURES]
        found: list[bytes] = []
        for digest in digests:
            manifest_raw, manifest = content.manifest(image.repo, digest)
            if not isinstance(manifest, Manifest):
                continue
            layers = [layer for layer in manifest.layers if layer.media_type in BUNDLE_TYPES]
            if any(blob.size > MAX_PAYLOAD for blob in manifest.blobs) or not layers:
                continue
            if len(found) + len(layers) > MAX_SIGNATURES:  # bundles, not manifests: each may list many layers
                break
            content.ensure_blobs(image.repo, manifest.blobs)
            found += [content.store.read_verified(layer.digest, layer.size, f"Sigstore bundle of '{image.ref}'")
                      for layer in layers]  # fmt: skip
            content.record(image.repo, digest, manifest_raw, manifest, "signature")
    except (OcivendirError, ValueError) as exc:
        return Bundles(problem=f"its Sigstore bundles could not be read: {exc}")
    if not found:
        return Bundles(problem=f"no Sigstore bundle among {where}")
    return Bundles(found=tuple(found))
