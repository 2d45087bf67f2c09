"""Owns: the `cache` commands — ls, prune and verify — as thin adapters over cache/prune.py."""

from __future__ import annotations

import contextlib
import datetime as dt
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

import click

from ocivendir.commands.options import global_options
from ocivendir.errors import CacheError, CacheUnwritable, UsageError

if TYPE_CHECKING:
    from ocivendir.cache.index import CacheIndex
    from ocivendir.cache.store import BlobStore
    from ocivendir.commands.runtime import Run
    from ocivendir.reports import CacheVerifyResult

__all__ = ["cache"]


def _human(size: int) -> str:
    value = float(size)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if value < 1024 or unit == "TiB":  # noqa: PLR2004
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{size} B"  # pragma: no cover


def _when(timestamp: float) -> str:
    return dt.datetime.fromtimestamp(timestamp, tz=dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@contextmanager
def _opened(ctx: click.Context, run: Run | None = None, *,
            exclusive: bool | None = False) -> Iterator[tuple[Run, BlobStore, CacheIndex, bool]]:  # fmt: skip
    from ocivendir.commands.runtime import Run, open_cache  # noqa: PLC0415 - `--help` stays light

    run = run or Run.start(ctx)
    opened = open_cache(run.settings, required=True)
    if opened is None:
        raise UsageError("the cache commands need a cache (remove --no-cache)")
    store, index = opened
    with _held(store, index, exclusive=exclusive) as alone:
        yield run, store, index, alone


@contextmanager
def _held(store: BlobStore, index: CacheIndex, *, exclusive: bool | None = False) -> Iterator[bool]:
    """The root lock while a cache command works; yields whether it is held exclusively. The index is closed after.

    A file of the cache it cannot remove or rewrite (a read-only mount) is a CacheUnwritable, with the hint.

    Shared (as every run holds it); exclusive, waiting up to 30 s for running pulls and syncs (`True`); or exclusive
    only if it is free at once, else shared (`None`).
    """
    from ocivendir.fs.locks import LockBusy, file_lock  # noqa: PLC0415

    root = store.lock_path("root")
    try:
        with contextlib.ExitStack() as stack:
            alone = exclusive is not False
            if alone:
                try:
                    stack.enter_context(file_lock(root, timeout=30 if exclusive else 0))
                except LockBusy:
                    if exclusive:
                        raise CacheError(f"Cannot repair the cache in '{store.root}': it is in use by a running pull "
                                         "or sync", hint="try again when they have finished") from None  # fmt: skip
                    alone = False
            if not alone:
                stack.enter_context(file_lock(root, shared=True))
            yield alone
    except OSError as exc:  # removing or rewriting a file of a cache that cannot be written (read-only, full)
        from ocivendir.cache.unwritable import unwritable  # noqa: PLC0415

        inside = isinstance(exc.filename, str) and exc.filename.startswith(f"{store.root}/")
        error = unwritable(exc, f"Cannot change the cache in '{store.root}'", store.root) if inside else None
        if error is None:
            raise
        raise error from None
    finally:
        index.close()


@click.group()
def cache() -> None:
    """Inspect and manage the content-addressed cache (an OCI image layout plus an SQLite index)."""


@cache.command("ls")
@click.option("--sort", type=click.Choice(["last-used", "size"]), default="last-used", show_default=True,
              help="Order of the rows (descending).")  # fmt: skip
@click.option("--kind", "kinds", multiple=True, type=click.Choice(["image", "bundle", "locations", "signature"]),
              help="Only entries of this kind (repeatable).")  # fmt: skip
@global_options
@click.pass_context
def ls(ctx: click.Context, sort: str, kinds: tuple[str, ...]) -> None:
    """List cached refs: ref, digest, kind, size, created, last used, relocation and signature verdicts; then totals.

    It reads the index only, never the blob tree.

    \b
    Examples:
      ocivendir cache ls
      ocivendir cache ls --sort size --kind bundle --json
    """
    from ocivendir.cache.prune import list_entries  # noqa: PLC0415

    with _opened(ctx) as (run, store, index, _):
        result = list_entries(store, index, sort=sort, kinds=kinds)
    output = run.output
    rows = [[e.ref, e.digest[7:19], e.kind, _human(e.size), _when(e.created), _when(e.last_used), e.verdict or "-",
             e.signature or "-"] for e in result.entries]  # fmt: skip
    output.table(["REF", "DIGEST", "KIND", "SIZE", "CREATED", "LAST USED", "VERDICT", "SIGNATURE"], rows)
    output.block(f"{result.totals.entries} entries, {_human(result.totals.bytes)} on disk in {result.root}\n")
    output.envelope("cache ls", "ok", result)


@cache.command()
@click.option("--older-than", metavar="DURATION", help="Remove entries not used for this long (e.g. 7d).")
@click.option("--max-size", metavar="SIZE", help="Then evict least recently used entries down to this size.")
@click.option("--all", "everything", is_flag=True, help="Remove every entry not in use by a running sync or pull.")
@click.option("--dry-run", is_flag=True, help="Print what would be removed; change nothing.")
@global_options
@click.pass_context
def prune(ctx: click.Context, older_than: str | None, max_size: str | None, everything: bool, dry_run: bool) -> None:
    """Remove cached entries; shared blobs go only when no remaining entry needs them.

    With neither --older-than nor --max-size, prunes down to the configured budget (--cache-max-size). Entries in use
    by a running sync or pull are skipped and reported. Partial downloads kept for resuming go too once stale: not
    written for a week (or for --older-than; any age under --all), or their blob is cached. Partial downloads and,
    when no sync or pull is running, blobs no entry needs (a fetch that failed after downloading) count against the
    size: a prune to a size removes them before any entry.

    \b
    Examples:
      ocivendir cache prune --older-than 7d
      ocivendir cache prune --max-size 2GiB --dry-run
      ocivendir cache prune --all
    """
    from ocivendir.cache.prune import PrunePlan  # noqa: PLC0415
    from ocivendir.cache.prune import prune as run_prune  # noqa: PLC0415
    from ocivendir.settings import parse_duration, parse_size  # noqa: PLC0415

    if everything and (older_than or max_size):
        raise UsageError("--all excludes --older-than and --max-size")
    with _opened(ctx, exclusive=None) as (run, store, index, alone):
        budget = run.settings.cache_max_size
        plan = PrunePlan(
            older_than=parse_duration(older_than, "--older-than") if older_than else None,
            max_size=parse_size(max_size, "--max-size") if max_size else (None if older_than else budget),
            everything=everything,
            dry_run=dry_run,
            alone=alone,
        )
        result = run_prune(store, index, plan)
    output = run.output
    verb = "would remove" if dry_run else "removed"
    for entry in result.removed:
        output.block(f"{verb} {entry.ref} ({_human(entry.size)})\n")
    for ref in result.skipped_in_use:
        output.block(f"skipped {ref}: in use\n")
    for line in (*result.partials, *result.unreferenced):
        output.block(f"{line}\n")
    output.block(f"{len(result.removed)} entries, {_human(result.bytes_freed)} {'to free' if dry_run else 'freed'}\n")
    output.envelope("cache prune", "ok", result)


@cache.command("verify")
@click.option("--repair", is_flag=True,
              help="Fix what is found: remove corrupt blobs with the entries that need them, and rebuild an "
                   "unusable index.db from the blobs.")  # fmt: skip
@global_options
@click.pass_context
def verify_cache(ctx: click.Context, repair: bool) -> int:
    """Re-hash every blob and report what is wrong; with --repair, fix it (removed content is refetched on next use).

    Without --repair nothing changes. When no pull or sync is running (always with --repair, which waits up to 30 s for
    them), the directory is checked too: junk and damaged orphan files, stale temp and lock files, a broken index.json
    or oci-layout, a directory where a blob or lock file belongs, anything in the read memo (memo/, index.gen) that is
    not one of its tokens or shards. An index.db that cannot be read (garbage, a directory in
    its place) is rebuilt from the blobs by --repair: refs come back from index.json when their manifest and blobs
    re-hash correctly. Blobs that verify but no entry needs are reported as unreferenced, not as problems, and kept:
    cache prune reclaims them. Exit 0 when the cache is consistent at the end, else 1.

    \b
    Examples:
      ocivendir cache verify
      ocivendir cache verify --repair --json
    """
    from ocivendir.cache.repair import verify  # noqa: PLC0415
    from ocivendir.commands.runtime import Run  # noqa: PLC0415

    run = Run.start(ctx)
    try:
        with _opened(ctx, run, exclusive=True if repair else None) as (_, store, index, alone):
            result = verify(store, index, repair=repair, exclusive=alone)
    except CacheError as exc:
        if not repair or run.settings.cache_dir is None or isinstance(exc, CacheUnwritable):
            raise  # a cache that cannot be written is not damaged: rebuilding would only lose its verdicts and grants
        result = _rebuild_and_verify(run.settings.cache_dir)
    output = run.output
    for line in (*result.repairs, *result.unreferenced):
        output.block(line + "\n")
    loose = f", {len(result.unreferenced)} unreferenced blobs (for cache prune)" if result.unreferenced else ""
    output.block(f"{result.checked} blobs checked, {len(result.repairs)} problems{loose}\n")
    output.envelope("cache verify", "ok" if result.consistent else "error", result)
    return 0 if result.consistent else 1


def _rebuild_and_verify(root: str) -> CacheVerifyResult:
    """--repair on a cache whose index cannot be read: rebuild it from the blobs, then verify as usual."""
    from dataclasses import replace  # noqa: PLC0415

    from ocivendir.cache.repair import rebuild, verify  # noqa: PLC0415
    from ocivendir.cache.store import BlobStore  # noqa: PLC0415

    store = BlobStore(root)
    index, notes = rebuild(store)
    with _held(store, index, exclusive=True):
        result = verify(store, index, repair=True, exclusive=True)
    return replace(result, repairs=(*notes, *result.repairs))
