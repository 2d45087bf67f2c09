"""Owns: `cache verify` — re-hashing every blob, and (with repair) making the index agree with the blobs again.

The blobs are the truth. A corrupt or truncated blob goes with the refs that need them; an unusable `index.db` is
rebuilt from the blobs: every manifest blob gives its edges, and a ref comes back from an `index.json` annotation only
when that descriptor's digest is the ref's own digest and the manifest and all its blobs re-hash correctly.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Iterator
from pathlib import Path

from ocivendir.cache import opened
from ocivendir.cache.index import CacheIndex
from ocivendir.cache.rows import BadRow, BlobRow, decoded, digest_ref, digest_value
from ocivendir.cache.store import BlobStore
from ocivendir.cache.tidy import tidy
from ocivendir.errors import CacheError, OcivendirError
from ocivendir.fs.locks import LockBusy, file_lock
from ocivendir.fs.paths import pure
from ocivendir.fs.swap import remove_tree
from ocivendir.oci.manifest import Manifest, parse_config, parse_manifest
from ocivendir.oci.reference import Digest, parse_reference
from ocivendir.reports import CacheVerifyResult

__all__ = ["INDEX_FILES", "rebuild", "rebuild_index", "remove_index_files", "verify"]

INDEX_FILES = ("index.db", "index.db-wal", "index.db-shm", "index.db-journal")
_MAX_MANIFEST = 4 * 1024 * 1024
_REF_NAME = "org.opencontainers.image.ref.name"


def verify(store: BlobStore, index: CacheIndex, *, repair: bool = False, exclusive: bool = False) -> CacheVerifyResult:
    """Re-hash every recorded blob; with `repair`, remove the bad ones with the refs that need them.

    With `exclusive` (the caller holds the root lock exclusively: no pull or sync is running), the directory is also
    checked for junk, damaged orphans, stale temp and lock files and a broken layout (`cache/tidy.py`); verified blobs
    no entry records are reported as unreferenced, not as problems, and kept for `cache prune`.
    """
    repairs: list[str] = []
    checked = 0
    for blob in list(index.iter_blobs()):
        checked += 1
        problem = store.problem(blob.digest, blob.size)
        if problem is None:
            continue
        if not repair:
            repairs.append(f"would remove blob {blob.digest}: {problem}")
            continue
        if os.path.isdir(store.path(blob.digest)):
            remove_tree(store.path(blob.digest))
        store.delete(blob.digest)
        refs = index.forget_blob(blob.digest)
        repairs.append(f"removed blob {blob.digest}: {problem}" + (f"; dropped {', '.join(refs)}" if refs else ""))
    if repairs and repair:
        store.write_index_json(index.layout_entries)
    unreferenced: list[str] = []
    if exclusive:
        found, unreferenced = tidy(store, index, repair=repair)
        repairs += found
    return CacheVerifyResult(checked=checked, repairs=tuple(repairs), consistent=repair or not repairs, repair=repair,
                             unreferenced=tuple(unreferenced))  # fmt: skip


def remove_index_files(root: str | os.PathLike[str]) -> None:
    """Remove an unusable `index.db` (and its WAL and journal files), whatever is in their place."""
    opened.discard(pure(os.path.join(root, "index.db")))
    for name in INDEX_FILES:
        remove_tree(os.path.join(root, name))


def _good_blobs(store: BlobStore) -> Iterator[tuple[Digest, int]]:
    """Every blob file whose name is a digest and whose bytes hash to it."""
    for path in sorted(Path(store.blobs).iterdir()):
        digest = decoded("blob file", path.name, digest_value, f"sha256:{path.name}")
        if digest is not None and store.problem(digest, None) is None:
            yield digest, path.stat().st_size


def _manifest(store: BlobStore, digest: Digest, size: int) -> Manifest | None:
    if size > _MAX_MANIFEST:
        return None
    with contextlib.suppress(OcivendirError, ValueError, UnicodeDecodeError):
        parsed = parse_manifest(Path(store.path(digest)).read_bytes())
        return parsed if isinstance(parsed, Manifest) else None
    return None


def _named_refs(store: BlobStore) -> Iterator[tuple[str, Digest]]:
    """The refs index.json names, kept only when each names its own descriptor's digest."""
    try:
        doc = json.loads(Path(store.root, "index.json").read_bytes())
        descriptors = doc["manifests"]
    except (OSError, ValueError, TypeError, KeyError):
        return
    for entry in descriptors if isinstance(descriptors, list) else ():
        with contextlib.suppress(BadRow, OcivendirError, TypeError, AttributeError, KeyError):
            ref = digest_ref(entry["annotations"][_REF_NAME])
            digest = parse_reference(ref).digest
            if digest is not None and str(digest) == entry["digest"]:
                yield ref, digest


def _kind(store: BlobStore, manifest: Manifest) -> str:
    with contextlib.suppress(OcivendirError, OSError, ValueError):
        if parse_config(Path(store.path(manifest.config.digest)).read_bytes()).is_bundle:
            return "bundle"
    return "image"


def rebuild_index(store: BlobStore, index: CacheIndex) -> list[str]:
    """Fill an empty index from the blobs on disk (and the refs index.json names); return what was done."""
    present = dict(_good_blobs(store))
    restored: list[str] = []
    for ref, digest in _named_refs(store):
        manifest = _manifest(store, digest, present.get(digest, _MAX_MANIFEST + 1))
        if manifest is None or any(present.get(b.digest) != b.size for b in manifest.blobs):
            continue
        rows = [BlobRow(digest=b.digest, size=b.size, media_type=b.media_type) for b in manifest.blobs]
        top = BlobRow(digest=digest, size=present[digest], media_type=manifest.media_type)
        index.record_ref(ref, top, _kind(store, manifest), rows)
        restored.append(ref)
    store.write_index_json(index.layout_entries)
    return [f"rebuilt index.db from {len(present)} blobs: {len(restored)} refs restored"]


def rebuild(store: BlobStore, *, wait: float = 30.0) -> tuple[CacheIndex, list[str]]:
    """Replace an unusable `index.db` with one rebuilt from the blobs, holding the cache's root lock exclusively.

    Every run holds the root lock shared, so nothing reads the index while it is replaced; a cache still in use after
    `wait` seconds is a CacheError.
    """
    store.ensure_layout()
    try:
        with file_lock(store.lock_path("root"), timeout=wait):
            remove_index_files(store.root)
            index = CacheIndex(os.path.join(store.root, "index.db"))
            return index, rebuild_index(store, index)
    except LockBusy:
        raise CacheError(
            f"Cannot rebuild the cache index in '{store.root}': the cache is in use by a running pull or sync",
            hint="try again when they have finished",
        ) from None
