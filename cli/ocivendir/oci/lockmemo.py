"""Owns: what a process that serves calls remembers of bundles' `.imgpkg/images.yml` — parsed, and rewritten.

Every warm sync of a relocated bundle reads its images.yml (go-yaml's strict decode) and writes it again naming the
bundle's repository (go-yaml's encode, read back). The bytes are the same call after call, so the parsed lock is
remembered by the sha256 of the file's bytes and handed out with a copy of its annotations, and the rewrite by the
sha256 of what it depends on: the repository and every entry's image and annotations, in order. At most SIZE
entries each, least recently used dropped first; failures are never remembered.
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from dataclasses import replace

from ocivendir.kept import recall, remember, through
from ocivendir.oci.imageslock import ImagesLock, parse_images_lock
from ocivendir.oci.relocation import rewrite

TYPE_CHECKING = False
if TYPE_CHECKING:
    from ocivendir.oci.reference import Repository

__all__ = ["SIZE", "images_lock", "rewritten"]

SIZE = 16
_parsed: OrderedDict[bytes, ImagesLock] = OrderedDict()  # per-process: keyed by sha256 of the images.yml bytes
# the key: sha256 of the repository and every entry's image and annotations
_rewritten: OrderedDict[bytes, bytes] = OrderedDict()  # per-process: keyed by sha256 of repository and entries


def _sha(parts: list[str]) -> bytes:
    sha = hashlib.sha256()
    for part in parts:
        data = part.encode("utf-8", "surrogatepass")
        sha.update(len(data).to_bytes(8, "big"))
        sha.update(data)
    return sha.digest()


def images_lock(raw: bytes) -> ImagesLock:
    """`parse_images_lock(raw)`, remembered by the bytes' digest; a copy of its own for every caller."""
    key = hashlib.sha256(raw).digest()
    known = recall(_parsed, key)
    if known is not None:
        return _copied(known)
    lock = parse_images_lock(raw)
    remember(_parsed, key, _copied(lock), SIZE)
    return lock


def _copied(lock: ImagesLock) -> ImagesLock:
    """The lock with a copy of each entry's annotations (the only mutable part of its frozen dataclasses)."""
    return ImagesLock(images=tuple(e if e.annotations is None else replace(e, annotations=dict(e.annotations))
                                   for e in lock.images))  # fmt: skip


def rewritten(lock: ImagesLock, repo: Repository) -> bytes:
    """`rewrite(lock, repo)`, remembered by the digest of the repository and the entries it names."""
    parts = [str(repo)]
    for entry in lock.images:
        notes = entry.annotations
        parts += [entry.image, "-" if notes is None else str(len(notes))]
        parts += [text for item in (notes or {}).items() for text in item]
    return through(_rewritten, _sha(parts), lambda: rewrite(lock, repo), SIZE)
