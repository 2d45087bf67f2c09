"""Owns: the `cache import` and `cache export` commands — archives in and out of the cache, with no registry."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

import click

from ocivendir.commands.options import global_options
from ocivendir.errors import UsageError

if TYPE_CHECKING:
    from ocivendir.cache.index import CacheIndex
    from ocivendir.cache.store import BlobStore
    from ocivendir.commands.runtime import Run
    from ocivendir.oci.reference import Repository

__all__ = ["cache_export", "cache_import"]


@contextmanager
def _cache(run: Run) -> Iterator[tuple[BlobStore, CacheIndex]]:
    """The cache's store and index under the shared root lock (as every run holds it); the index closed after."""
    from ocivendir.commands.runtime import open_cache  # noqa: PLC0415 - `--help` stays light
    from ocivendir.fs.locks import file_lock  # noqa: PLC0415

    opened = open_cache(run.settings, required=True)
    if opened is None:
        raise UsageError("the cache commands need a cache (remove --no-cache)")
    store, index = opened
    try:
        with file_lock(store.lock_path("root"), shared=True):
            yield store, index
    finally:
        index.close()


def _repository(text: str) -> Repository:
    from ocivendir.oci.reference import parse_reference  # noqa: PLC0415

    ref = parse_reference(text)
    if ref.digest is not None or ref.tag is not None:
        raise UsageError(f"--to-repo takes a repository, without a tag or digest: '{text}'")
    return ref.repository


@click.command("import")
@click.argument("source", metavar="FILE|DIR")
@click.option("--to-repo", "to_repo", required=True, metavar="REPO",
              help="Serve the content as this repository's, as `imgpkg copy --to-repo REPO` places it.")  # fmt: skip
@global_options
@click.pass_context
def cache_import(ctx: click.Context, source: str, to_repo: str) -> None:
    """Seed the cache from an imgpkg tarball (`imgpkg copy --to-tar`) or an OCI image layout (directory or tar).

    Every manifest and blob is verified (digest and size) before anything is admitted: an archive with one wrong byte
    admits nothing. The content is then served as REPO@sha256:… with no request, each image of a bundle under REPO
    too, so the bundle counts as relocated and its images.yml is rewritten to REPO on sync. Nested bundles and
    multi-platform indexes come along. Tags are not imported: an App that names a tag still needs its registry.

    \b
    Examples:
      ocivendir cache import bundle.tar --to-repo registry.internal/apps/bundle
      ocivendir cache import ./oci-layout --to-repo registry.internal/apps/image --json
    """
    from ocivendir.commands.runtime import Run  # noqa: PLC0415
    from ocivendir.engine.seed import import_archive  # noqa: PLC0415

    run = Run.start(ctx)
    repo = _repository(to_repo)
    with _cache(run) as (store, index):
        try:
            result = import_archive(source, repo, store, index, run.output.event)
        finally:
            run.output.finish_progress()
    output = run.output
    for item in result.imported:
        output.block(f"imported {item.ref} ({item.kind}, {item.bytes} bytes)\n")
    for item in result.already_present:
        output.block(f"already present {item.ref} ({item.kind})\n")
    for ref in result.relocated_bundles:
        output.block(f"relocated {ref}\n")
    output.block(f"{result.blobs_new} of {result.blobs} blobs new, {result.bytes_new} bytes\n")
    output.envelope("cache import", "ok", result)


@click.command("export")
@click.argument("refs", nargs=-1, required=True, metavar="REF...")
@click.option("--to-tar", "to_tar", required=True, metavar="FILE",
              help="Write imgpkg's tarball format (what `imgpkg copy --tar FILE --to-repo` reads).")  # fmt: skip
@global_options
@click.pass_context
def cache_export(ctx: click.Context, refs: tuple[str, ...], to_tar: str) -> None:
    """Write cached content as an imgpkg tarball, with no request: each REF (by digest) with everything it needs.

    A bundle brings the images its images.yml names and its nested bundles, found in the bundle's own repository or
    at their original references. Content the cache does not hold for that repository is an error, and no file is
    left behind.

    \b
    Examples:
      ocivendir cache export registry.internal/apps/bundle@sha256:<hex> --to-tar bundle.tar
    """
    from ocivendir.commands.runtime import Run  # noqa: PLC0415
    from ocivendir.engine.export import export_tar  # noqa: PLC0415
    from ocivendir.oci.reference import parse_reference  # noqa: PLC0415

    run = Run.start(ctx)
    parsed = [parse_reference(ref) for ref in refs]
    for text, ref in zip(refs, parsed, strict=True):
        if ref.digest is None:
            raise UsageError(f"cache export takes digest references (repo@sha256:…): '{text}'")
    with _cache(run) as (store, index):
        try:
            result = export_tar(parsed, to_tar, store, index, run.output.event)
        finally:
            run.output.finish_progress()
    output = run.output
    for item in result.exported:
        output.block(f"exported {item.ref} ({item.kind}, {item.bytes} bytes)\n")
    output.block(f"{result.blobs} blobs, {result.bytes} bytes written to {result.output}\n")
    output.envelope("cache export", "ok", result)
