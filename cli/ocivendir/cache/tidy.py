"""Owns: finding — and with repair, removing — what does not belong in the cache directory.

Junk under `blobs/` (and blob files no entry records whose bytes do not hash to their name), stale temp files (a
partial download only when `cache/partials.py` finds it stale: a recent one is kept for the next pull to resume),
stray entries under `locks/`, a broken `oci-layout` or `index.json`, and a directory where a blob or a lock file
belongs. A target's lock file is what a pull or sync killed mid-run leaves (the next run of that target takes it
again): no damage, so it is not reported, and `--repair` removes it. It runs only while the caller holds the cache's
root lock exclusively, so no running pull or sync is writing. Unknown entries at the top of the cache directory are
left alone: the directory may have been named by mistake. A blob file no entry records but whose bytes verify (a
fetch that failed after downloading, a killed prune) is no damage: it is reported as unreferenced and left to
`cache prune`, which reclaims it (`cache/prune.py`).
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

from ocivendir.cache.index import CacheIndex
from ocivendir.cache.memo import GENERATION, MEMO_DIR
from ocivendir.cache.partials import is_partial, stale_partials
from ocivendir.cache.store import LAYOUT_MARKER, BlobStore
from ocivendir.fs.swap import atomic_write, remove_tree
from ocivendir.oci.reference import Digest

__all__ = ["tidy"]

_HEX = re.compile(r"[0-9a-f]{64}")
_MEMO_FILE = re.compile(r"[0-9a-f]{64}\.(json|gen)")
_MEMO_TEMP = re.compile(r"\.[0-9a-f]{64}\.(json|gen)\.ocivendir-tmp-[0-9a-f]+")
_LOCK = re.compile(r"root|index-json|grants-key|(blob|entry|target)-[0-9a-f]{64}")


def _remove(path: Path, why: str, *, repair: bool) -> str:
    if repair:
        remove_tree(path)
        return f"removed {path}: {why}"
    return f"would remove {path}: {why}"


def _blob_files(store: BlobStore, index: CacheIndex, *, repair: bool) -> tuple[list[str], list[str]]:
    """What is wrong under `blobs/`, and the verified blobs no entry records (fine: `cache prune` reclaims them)."""
    recorded = {blob.digest.hex for blob in index.iter_blobs()}
    unreferenced = []
    found = [
        _remove(path, "not a blob directory", repair=repair)
        for path in sorted(Path(store.blobs).parent.iterdir())
        if path.name != "sha256"
    ]
    for path in sorted(Path(store.blobs).iterdir()):
        if not _HEX.fullmatch(path.name):
            found.append(_remove(path, "junk (not named by a digest)", repair=repair))
        elif path.is_symlink() or not path.is_file():
            found.append(_remove(path, "not a regular file where a blob belongs", repair=repair))
        elif path.name in recorded:
            continue
        elif (problem := store.problem(Digest(path.name), None)) is None:
            unreferenced.append(f"unreferenced blob {path}: verified, no entry needs it (cache prune reclaims it)")
        else:
            found.append(_remove(path, f"orphan blob (no cached entry needs it), {problem}", repair=repair))
    return found, unreferenced


def _scratch(store: BlobStore, *, repair: bool) -> list[str]:
    stale = {path: why for path, why, _ in stale_partials(store)}
    found = [
        _remove(path, f"stale partial download ({stale[str(path)]})" if str(path) in stale else "stale temp file",
                repair=repair)
        for path in sorted(Path(store.tmp).iterdir())
        if not is_partial(path.name) or str(path) in stale  # a recent partial is a download to resume: kept
    ]  # fmt: skip
    found += _memo(Path(store.root), repair=repair)
    for path in sorted(Path(store.locks).iterdir()):
        if path.is_symlink() or not path.is_file():
            found.append(_remove(path, "not a regular file where a lock file belongs", repair=repair))
        elif not _LOCK.fullmatch(path.name):
            found.append(_remove(path, "stale lock file", repair=repair))
        elif path.name.startswith("target-") and repair:  # a killed pull's or sync's: no damage, its next run's
            found.append(_remove(path, "lock file left by a pull or sync that was killed", repair=repair))
    return found


def _memo(root: Path, *, repair: bool) -> list[str]:
    """The read memo's files: temp files a crash left, and anything that is not a token or a shard where they live."""
    temps = sorted(root.glob(f".{GENERATION}.ocivendir-tmp-*"))  # atomic_write's temp siblings
    found = [_remove(path, "stale temp file", repair=repair) for path in temps]
    generation, memo = root / GENERATION, root / MEMO_DIR
    if generation.is_symlink() or (generation.exists() and not generation.is_file()):
        found.append(_remove(generation, "not a regular file where the index's generation belongs", repair=repair))
    if memo.is_symlink() or (memo.exists() and not memo.is_dir()):
        return [*found, _remove(memo, "not a directory where the read memo belongs", repair=repair)]
    for path in sorted(memo.iterdir()) if memo.is_dir() else ():
        if _MEMO_TEMP.fullmatch(path.name):
            found.append(_remove(path, "stale temp file", repair=repair))
        elif path.is_symlink() or not path.is_file() or not _MEMO_FILE.fullmatch(path.name):
            found.append(_remove(path, "not a file of the read memo", repair=repair))
    return found


def _layout(store: BlobStore, index: CacheIndex, *, repair: bool) -> list[str]:
    found = []
    marker = Path(store.root, "oci-layout")
    if not marker.is_file() or marker.read_bytes() != LAYOUT_MARKER:
        found.append(f"{'rewrote' if repair else 'would rewrite'} {marker}: broken")
        if repair:
            remove_tree(marker)
            atomic_write(marker, LAYOUT_MARKER, mode=0o644)
    listed = Path(store.root, "index.json")
    wanted = sorted((e.ref, str(e.digest)) for e in index.layout_entries())
    try:
        doc = json.loads(listed.read_bytes())
        names = sorted((m["annotations"]["org.opencontainers.image.ref.name"], m["digest"]) for m in doc["manifests"])
    except (OSError, ValueError, TypeError, KeyError):
        names = None
    if names != wanted:
        found.append(f"{'rewrote' if repair else 'would rewrite'} {listed}: broken or out of date")
        if repair:
            remove_tree(listed)
            store.write_index_json(index.layout_entries)
    return found


def tidy(store: BlobStore, index: CacheIndex, *, repair: bool) -> tuple[list[str], list[str]]:
    """Report (and with `repair`, fix) everything in the cache directory that is not cached content or its index.

    Also the verified blobs no entry records, which are kept.
    """
    found = [
        _remove(directory, "not a directory", repair=repair)
        for directory in (Path(store.blobs), Path(store.tmp), Path(store.locks))
        if directory.exists() and not directory.is_dir()
    ]
    if repair:
        store.ensure_layout()
    if not all(os.path.isdir(d) for d in (store.blobs, store.tmp, store.locks)):
        return found, []
    blobs, unreferenced = _blob_files(store, index, repair=repair)
    return found + blobs + _scratch(store, repair=repair) + _layout(store, index, repair=repair), unreferenced
