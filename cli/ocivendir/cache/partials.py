"""Owns: which partial downloads in the cache's `tmp/` are stale, and removing them under their blob's lock.

A partial (`tmp/<hex>.partial`, `cache/store.py`) holds the bytes a broken-off download received, so the next pull of
that blob resumes from them. It is worth keeping only for a while: it is stale once its blob is in the cache (a run
killed after publishing it), when it is not a regular file, when nothing has written to it for `STALE_AFTER`
(`cache prune --older-than` chooses another age; `--all` any age), or when it is dated in the future (a clock that
ran ahead: its age cannot be told). Partials count against the cache's size budget: a prune to a size removes them all
first (`cache/prune.py`). Each is removed only with its blob's lock taken
without waiting, so a download in progress never loses its file.
"""

from __future__ import annotations

import os
import stat
import time

from ocivendir.cache.store import PARTIAL_SUFFIX, BlobStore
from ocivendir.fs.locks import LockBusy, file_lock
from ocivendir.fs.remove import remove_tree
from ocivendir.oci.reference import Digest

__all__ = ["STALE_AFTER", "is_partial", "partial_bytes", "stale_partials", "sweep"]

STALE_AFTER = 7 * 86400.0  # a week: a flaky link's pulls are retried well within it
_HEX_CHARS = frozenset("0123456789abcdef")


def is_partial(name: str) -> bool:
    """Whether a name in `tmp/` is a partial download's (`<64 hex>.partial`)."""
    hex_part = name.removesuffix(PARTIAL_SUFFIX)
    return name.endswith(PARTIAL_SUFFIX) and len(hex_part) == 64 and set(hex_part) <= _HEX_CHARS  # noqa: PLR2004


def partial_bytes(store: BlobStore) -> int:
    """The bytes the partial downloads in `tmp/` hold (regular files only)."""
    try:
        names = os.listdir(store.tmp)
    except FileNotFoundError:
        return 0
    total = 0
    for name in filter(is_partial, names):
        try:
            info = os.lstat(f"{store.tmp}/{name}")
        except FileNotFoundError:
            continue
        total += info.st_size if stat.S_ISREG(info.st_mode) else 0
    return total


def stale_partials(store: BlobStore, older_than: float | None = STALE_AFTER) -> list[tuple[str, str, int]]:
    """(path, why, bytes) of every stale partial; `older_than=None`: every partial, whatever its age."""
    now = time.time()
    try:
        names = sorted(os.listdir(store.tmp))
    except FileNotFoundError:
        return []
    found = []
    for name in filter(is_partial, names):
        path = f"{store.tmp}/{name}"
        try:
            info = os.lstat(path)
        except FileNotFoundError:
            continue
        age = now - info.st_mtime
        if not stat.S_ISREG(info.st_mode):
            why = "not a regular file"
        elif store.has(Digest(name.removesuffix(PARTIAL_SUFFIX))):
            why = "its blob is cached"
        elif age < 0:  # written while the clock ran ahead: its age says nothing, so it is not kept for it
            why = f"dated {-age / 86400:.1f} days in the future"
        elif older_than is None or age > older_than:
            why = f"not written for {age / 86400:.1f} days"
        else:
            continue
        found.append((path, why, info.st_size))
    return found


def sweep(store: BlobStore, older_than: float | None = STALE_AFTER, *, dry_run: bool = False) -> tuple[list[str], int]:
    """Remove the stale partials whose blob no one is downloading; what was (or would be) removed, and its bytes."""
    lines, freed = [], 0
    for path, why, size in stale_partials(store, older_than):
        hex_part = os.path.basename(path).removesuffix(PARTIAL_SUFFIX)
        if dry_run:
            lines.append(f"would remove partial download {path} ({why})")
            freed += size
            continue
        try:
            with file_lock(store.lock_path(f"blob-{hex_part}"), timeout=0):
                remove_tree(path)  # never follows a link
        except LockBusy:
            continue  # being downloaded (or resumed) right now
        lines.append(f"removed partial download {path} ({why})")
        freed += size
    return lines, freed
