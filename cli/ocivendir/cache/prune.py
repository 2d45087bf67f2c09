"""Owns: keeping the cache bounded — listing and LRU pruning under entry locks (verify/repair is cache/repair.py).

A ref in use by a running pull or sync holds a shared entry lock; prune takes each candidate's lock exclusively
without waiting, and skips (and reports) the ones it cannot get. A blob goes only when no remaining ref needs it.
Stale partial downloads in `tmp/` go too (`cache/partials.py`): unwritten for `--older-than` (a week by default),
any age under `--all`.

What the size budget counts is every byte the cache holds: the recorded blobs, the partial downloads and, when the
prune has the cache to itself (no run in flight), the blob files no entry records (a fetch that failed after
downloading, a killed prune). A prune to a size removes partials and such unreferenced blobs first, then entries in
least-recently-used order; `--older-than` and `--all` reach unreferenced blobs by their file's age too. They are
verified content, so `cache verify` leaves them to the prune.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import stat
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

from ocivendir.cache.index import CacheIndex, RefRow
from ocivendir.cache.partials import STALE_AFTER, partial_bytes, sweep
from ocivendir.cache.store import BlobStore
from ocivendir.fs.locks import LockBusy, file_lock
from ocivendir.oci.reference import Digest
from ocivendir.reports import CacheEntry, CacheLsResult, CachePruneResult, CacheTotals

__all__ = ["HYSTERESIS", "PrunePlan", "list_entries", "prune", "prune_to_budget"]

HYSTERESIS = 0.9
_HEX = frozenset("0123456789abcdef")
_Loose = list[tuple[Digest, os.stat_result]]


def _entry(row: RefRow, size: int, verdict: bool | None, signature: str | None = None) -> CacheEntry:
    shown = None if verdict is None else ("relocated" if verdict else "not-relocated")
    return CacheEntry(ref=row.ref, digest=str(row.manifest_digest), kind=row.kind, size=size, created=row.created,
                      last_used=row.last_used, verdict=shown, signature=signature)  # fmt: skip


def list_entries(store: BlobStore, index: CacheIndex, *, sort: str = "last-used",
                 kinds: Iterable[str] = ()) -> CacheLsResult:  # fmt: skip
    """`cache ls`: one entry per ref, most recently used (or largest) first, with unique-byte totals."""
    wanted = set(kinds)
    signed = index.signature_verdicts()
    entries = [_entry(row, size, verdict, signed.get(row.ref)) for row, size, verdict in index.listing()
               if not wanted or row.kind in wanted]  # fmt: skip
    if sort == "size":
        entries.sort(key=lambda e: (-e.size, e.ref))
    return CacheLsResult(
        root=str(store.root),
        entries=tuple(entries),
        totals=CacheTotals(entries=len(entries), bytes=index.unique_bytes()),
    )


@dataclass(frozen=True, kw_only=True)
class PrunePlan:
    """What to prune: refs unused for `older_than` seconds, then LRU down to `max_size` bytes; or everything."""

    older_than: float | None = None
    max_size: int | None = None
    everything: bool = False
    dry_run: bool = False
    keep: frozenset[str] = frozenset()
    alone: bool = False  # the caller holds the root lock exclusively: no run is in flight, unreferenced blobs may go


class _Usage:
    """Which blobs each ref needs, and how many refs need each blob: freed bytes without a query per ref."""

    def __init__(self, index: CacheIndex, listed: list[tuple[RefRow, int, bool | None]]) -> None:
        edges, self.sizes = index.graph()
        self.needs = {row.ref: edges.get(str(row.manifest_digest), set()) for row, _, _ in listed}
        self.count: dict[str, int] = {}
        for blobs in self.needs.values():
            for digest in blobs:
                self.count[digest] = self.count.get(digest, 0) + 1
        self.total = sum(self.sizes.values())

    def remove(self, ref: str) -> int:
        """Forget a ref; return the bytes that frees."""
        freed = 0
        for digest in self.needs.pop(ref, set()):
            self.count[digest] -= 1
            if self.count[digest] == 0:
                freed += self.sizes.get(digest, 0)
        self.total -= freed
        return freed


def _candidates(index: CacheIndex, plan: PrunePlan) -> tuple[list[tuple[RefRow, int, bool | None]], int]:
    """The refs to remove, least recently used first, and the bytes that frees."""
    now = index.now
    # a last use dated in the future (the clock ran ahead) says nothing of recent use: it counts as the oldest
    listed = sorted(index.listing(), key=lambda item: (_last_use(item[0], now), item[0].ref))
    usage = _Usage(index, listed)
    chosen: list[tuple[RefRow, int, bool | None]] = []
    freed = 0
    cutoff = now - plan.older_than if plan.older_than is not None else None
    for item in listed:
        ref = item[0].ref
        if ref in plan.keep:
            continue
        old = cutoff is not None and _last_use(item[0], now) < cutoff
        over = plan.max_size is not None and usage.total > plan.max_size
        if plan.everything or old or over:
            chosen.append(item)
            freed += usage.remove(ref)
    return chosen, freed


def _last_use(row: RefRow, now: float) -> float:
    """When a ref was last used, for LRU order and age: one dated in the future counts as never used."""
    return row.last_used if row.last_used <= now else float("-inf")


@contextlib.contextmanager
def _exclusive(store: BlobStore, ref: str) -> Iterator[bool]:
    """Try the ref's entry lock exclusively without waiting; yield whether it was taken."""
    lock = store.lock_path(f"entry-{hashlib.sha256(ref.encode()).hexdigest()}")
    try:
        with file_lock(lock, timeout=0):
            yield True
    except LockBusy:
        yield False


def _recorded(index: CacheIndex, digest: Digest) -> Callable[[], bool]:
    return lambda: index.blob(digest) is not None


def _needed(index: CacheIndex, digest: Digest) -> Callable[[], bool]:
    return lambda: index.needed(digest)


def _unreferenced(store: BlobStore, index: CacheIndex) -> _Loose:
    """The blob files no entry records (regular files named by a digest), with their stat."""
    recorded = set(index.graph()[1])
    found = []
    for name in sorted(os.listdir(store.blobs)):
        if len(name) != 64 or f"sha256:{name}" in recorded or not set(name) <= _HEX:  # noqa: PLR2004
            continue
        with contextlib.suppress(FileNotFoundError):
            info = os.lstat(f"{store.blobs}/{name}")
            if stat.S_ISREG(info.st_mode):
                found.append((Digest(name), info))
    return found


def _sweep_unreferenced(store: BlobStore, index: CacheIndex, plan: PrunePlan, loose: _Loose,
                        *, over: bool) -> tuple[list[str], int]:  # fmt: skip
    """Remove the unreferenced blobs this prune reaches: all when over the size or under --all, else by age."""
    lines, freed = [], 0
    now = index.now
    for digest, info in loose:
        age = now - info.st_mtime
        old = plan.older_than is not None and not 0 <= age <= plan.older_than
        if not (plan.everything or over or old):
            continue
        path = store.path(digest)
        if not plan.dry_run:
            store.delete(digest, keep=_recorded(index, digest))  # recorded meanwhile: kept
        lines.append(f"{'would remove' if plan.dry_run else 'removed'} unreferenced blob {path} (no entry needs it)")
        freed += info.st_size
    return lines, freed


def prune(store: BlobStore, index: CacheIndex, plan: PrunePlan) -> CachePruneResult:
    """Remove the planned refs not in use, then the blobs nothing needs any more."""
    removed: list[CacheEntry] = []
    skipped: list[str] = []
    freed = 0
    loose = _unreferenced(store, index) if plan.alone else []
    held = index.unique_bytes() + partial_bytes(store) + sum(info.st_size for _, info in loose)
    over = plan.max_size is not None and held > plan.max_size
    partials, swept = sweep(store, None if over else _partial_age(plan), dry_run=plan.dry_run)
    unreferenced, loose_bytes = _sweep_unreferenced(store, index, plan, loose, over=over)
    swept += loose_bytes
    candidates, planned = _candidates(index, plan)
    if plan.dry_run:
        freed = planned + swept
        return CachePruneResult(removed=tuple(_entry(*c) for c in candidates), skipped_in_use=(), bytes_freed=freed,
                                dry_run=True, partials=tuple(partials), unreferenced=tuple(unreferenced))  # fmt: skip
    for row, size, verdict in candidates:
        with _exclusive(store, row.ref) as taken:
            if not taken:
                skipped.append(row.ref)
                continue
            for digest in index.remove_refs([row.ref]):
                blob = store.path(digest)
                with contextlib.suppress(FileNotFoundError):
                    freed += os.stat(blob).st_size
                # a run may have fetched it again since its rows went: that run's possession record keeps it
                store.delete(digest, keep=_needed(index, digest))
            removed.append(_entry(row, size, verdict))
    if removed:
        store.write_index_json(index.layout_entries)
    return CachePruneResult(removed=tuple(removed), skipped_in_use=tuple(skipped), bytes_freed=freed + swept,
                            dry_run=False, partials=tuple(partials), unreferenced=tuple(unreferenced))  # fmt: skip


def _partial_age(plan: PrunePlan) -> float | None:
    """How long a partial download may go unwritten before this prune removes it (None: any age, under --all)."""
    if plan.everything:
        return None
    return plan.older_than if plan.older_than is not None else STALE_AFTER


def prune_to_budget(store: BlobStore, index: CacheIndex, budget: int, keep: Iterable[str]) -> CachePruneResult | None:
    """The automatic prune: once over the budget (partial downloads count), down to 90 % of it (not every run)."""
    if index.unique_bytes() + partial_bytes(store) <= budget:
        return None
    return prune(store, index, PrunePlan(max_size=int(budget * HYSTERESIS), keep=frozenset(keep)))
