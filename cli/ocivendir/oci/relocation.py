"""Owns: imgpkg's relocation rules, pure.

Which references to probe, the verdict from their statuses, and the byte-exact `images.yml` rewrite. Presence checks
are done elsewhere and passed in.
"""

from __future__ import annotations

from dataclasses import dataclass

from ocivendir.errors import ImagesLockError
from ocivendir.goyaml import emit
from ocivendir.oci.imageslock import API_VERSION, ImagesLock
from ocivendir.oci.reference import Digest, Reference, Repository
from ocivendir.results import ImageStatus

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping
    from typing import Final, Literal

    from ocivendir.results import ImageStatusValue

    RelocationVerdictValue = Literal["relocated", "not-relocated", "undetermined"]

__all__ = ["Probe", "RelocationVerdict", "RelocationVerdictValue", "evaluate", "locations_ref", "plan", "rewrite"]


class RelocationVerdict:
    """The answer to "is this bundle fully relocated?" (plain str constants typed `RelocationVerdictValue`)."""

    RELOCATED: Final = "relocated"
    NOT_RELOCATED: Final = "not-relocated"
    UNDETERMINED: Final = "undetermined"


@dataclass(frozen=True, kw_only=True)
class Probe:
    """One image to look for: as written in the lock, and where it would be in the bundle repository."""

    image: str
    digest: Digest
    candidate: Reference


def locations_ref(bundle_repo: Repository, bundle_digest: Digest) -> Reference:
    """The tag `imgpkg copy` gives the locations image: `<repo>:sha256-<hex>.image-locations.imgpkg`."""
    return bundle_repo.tagged(f"{bundle_digest.tag_form}.image-locations.imgpkg")


def plan(lock: ImagesLock, bundle_repo: Repository, first: Iterable[str] = ()) -> tuple[Probe, ...]:
    """One probe per distinct digest, in file order, with the images named in `first` (a recorded miss) first."""
    probes: dict[Digest, Probe] = {}
    for entry in lock.images:
        digest = entry.reference.digest
        if digest is None or digest in probes:
            continue
        probes[digest] = Probe(image=entry.image, digest=digest, candidate=bundle_repo.at(digest))
    priority = set(first)
    ordered = sorted(probes.values(), key=lambda p: 0 if str(p.candidate) in priority or p.image in priority else 1)
    return tuple(ordered)


def evaluate(statuses: Mapping[Digest, ImageStatusValue]) -> RelocationVerdictValue:
    """Not relocated if any image is missing or denied; else undetermined if any errored; else relocated."""
    values = set(statuses.values())
    if values & {ImageStatus.MISSING, ImageStatus.DENIED}:
        return RelocationVerdict.NOT_RELOCATED
    if ImageStatus.ERROR in values:
        return RelocationVerdict.UNDETERMINED
    return RelocationVerdict.RELOCATED


def rewrite(lock: ImagesLock, bundle_repo: Repository) -> bytes:
    """Imgpkg's all-or-nothing rewrite: every image becomes `<bundle repo>@<digest>`; `---` then sorted keys.

    The bytes are read back before they are returned: a rewrite that would read as other images or annotations
    (go-yaml cannot write every annotation so that it reads back) is an ImagesLockError, and nothing is written.
    """
    images: list[dict[str, object]] = []
    for entry in lock.images:
        item: dict[str, object] = {"image": f"{bundle_repo}@{entry.reference.digest}"}
        if entry.annotations:
            item["annotations"] = dict(entry.annotations)
        images.append(item)
    doc: dict[str, object] = {"apiVersion": API_VERSION, "kind": "ImagesLock"}
    if images:
        doc["images"] = images
    try:
        return b"---\n" + emit.dump_checked(doc)
    except emit.EmitError as exc:
        raise ImagesLockError(f"Rewriting images lock for {bundle_repo}: {exc}") from None
