"""Owns: `cache import` — admitting a verified archive into the cache as if a repository had served it.

`cache/archive.py` reads and verifies the whole archive into a stage first; only then is anything admitted, so an
archive with one wrong byte admits nothing. Each staged blob is admitted under its digest's lock (the stage is renamed
into place: no second copy), then the index records, in one pass: every manifest as a ref `REPO@digest`, `REPO`'s
possession of every manifest and blob (the only content a shared cache serves for `REPO`), an anonymous grant on each
manifest (the operator's import stands where a push to `REPO` would), and for each bundle whose `images.yml` names
only manifests the archive holds, a positive relocation verdict in `REPO` — `imgpkg copy --to-repo REPO` places every
image of a bundle there, so the bundle is fully relocated and `images.yml` is rewritten to `REPO` on sync.
"""

from __future__ import annotations

import os

from ocivendir.cache.archive import Archive, Node, read_archive
from ocivendir.cache.grants import ANONYMOUS_PRINCIPAL
from ocivendir.cache.index import BlobRow, CacheIndex
from ocivendir.cache.store import BlobStore
from ocivendir.engine.image import layer_stream
from ocivendir.errors import ImagesLockError, OcivendirError, UsageError
from ocivendir.fs.locks import LockBusy, file_lock
from ocivendir.fs.remove import remove_file, remove_tree
from ocivendir.fs.tarread import TarFormatError, TarReader
from ocivendir.oci.imageslock import MAX_IMAGES_LOCK_BYTES, parse_images_lock
from ocivendir.oci.manifest import Manifest
from ocivendir.reports import ArchiveItem, CacheImportResult
from ocivendir.results import ProgressEvent, WarningEvent

TYPE_CHECKING = False
if TYPE_CHECKING:
    from ocivendir.oci.reference import Digest, Repository
    from ocivendir.results import EventSink

__all__ = ["STAGE_PREFIX", "import_archive"]

STAGE_PREFIX = "import-"  # tmp/import-<hex>: an import's stage; locks/import-<hex>: held while it runs
_METHOD = "import"


def _kind(node: Node) -> str:
    if node.children:
        return "index"
    return "bundle" if node.is_bundle else "image"


def _size(node: Node) -> int:
    """Bytes of a manifest and everything under it (each blob once)."""
    seen: dict[Digest, int] = {}
    for member in node.walk():
        seen[member.digest] = len(member.raw)
        if isinstance(member.parsed, Manifest):
            seen.update({blob.digest: blob.size for blob in member.parsed.blobs})
    return sum(seen.values())


def _images_lock_digests(archive: Archive, node: Node) -> set[Digest] | None:
    """The digests a staged bundle's `.imgpkg/images.yml` names (the last layer's wins); None if it cannot be read."""
    assert isinstance(node.parsed, Manifest)  # noqa: S101 - a bundle is an image
    found: bytes | None = None
    for layer in node.parsed.layers:
        try:
            with open(archive.path(layer.digest), "rb") as handle:
                reader = TarReader(layer_stream(handle, layer.media_type, f"layer {layer.digest}"))
                for member in reader:
                    name = member.name.replace("\\", "/").removeprefix("./")
                    if name == ".imgpkg/images.yml" and member.isreg() and member.size <= MAX_IMAGES_LOCK_BYTES:
                        found = b"".join(iter(reader.read, b""))
        except (OSError, TarFormatError, OcivendirError):
            return None
    if found is None:
        return None
    try:
        lock = parse_images_lock(found)
    except ImagesLockError:
        return None
    return {entry.reference.digest for entry in lock.images if entry.reference.digest is not None}


def _commit(store: BlobStore, archive: Archive, events: EventSink) -> set[Digest]:
    """Admit every staged blob under its digest's lock; return those that were not in the store before."""
    new: set[Digest] = set()
    total = sum(archive.staged.values())
    done = 0
    for digest, size in sorted(archive.staged.items()):
        done += size
        events(ProgressEvent(key="admit", label="admitting", done=done, total=total))
        staged = archive.path(digest)

        def fill(tmp: str, staged: str = staged) -> None:
            os.replace(staged, tmp)  # the verified bytes themselves, renamed (the stage is on the cache's disk)

        if store.admit(digest, size, fill):
            new.add(digest)
    return new


def _record(index: CacheIndex, repo: Repository, archive: Archive) -> None:
    """Refs, possession and anonymous grants for every manifest under `repo`."""
    every: list[Digest] = list(archive.staged)
    index.possess(str(repo), every)
    for node in archive.nodes():
        if isinstance(node.parsed, Manifest):
            rows = [BlobRow(digest=b.digest, size=b.size, media_type=b.media_type) for b in node.parsed.blobs]
        else:
            rows = [BlobRow(digest=c.digest, size=c.size, media_type=c.media_type) for c in node.parsed.manifests]
        top = BlobRow(digest=node.digest, size=len(node.raw), media_type=node.parsed.media_type)
        index.record_ref(str(repo.at(node.digest)), top, "image" if node.children else _kind(node), rows)
        index.grant(node.digest, str(repo), ANONYMOUS_PRINCIPAL)


def import_archive(
    path: str, repo: Repository, store: BlobStore, index: CacheIndex, events: EventSink
) -> CacheImportResult:
    """Verify `path` whole, then admit it into the cache as served by `repo`; on any failure nothing is admitted."""
    _sweep(store)
    name = f"{STAGE_PREFIX}{os.urandom(6).hex()}"
    with file_lock(store.lock_path(name)):
        try:
            return _import(path, repo, store, index, events, os.path.join(store.tmp, name))
        finally:
            remove_file(store.lock_path(name))


def _sweep(store: BlobStore) -> None:
    """Remove the stages of imports that were killed: a stage whose lock nobody holds."""
    try:
        names = [n for n in os.listdir(store.tmp) if n.startswith(STAGE_PREFIX)]
    except OSError:
        return
    for name in names:
        try:
            with file_lock(store.lock_path(name), timeout=0):
                remove_tree(os.path.join(store.tmp, name))
            remove_file(store.lock_path(name))
        except LockBusy:
            continue  # an import running now


def _import(
    path: str, repo: Repository, store: BlobStore, index: CacheIndex, events: EventSink, stage: str
) -> CacheImportResult:
    total = _archive_size(path)

    def progress(done: int) -> None:
        events(ProgressEvent(key="import", label="verifying", done=done, total=total))

    archive = read_archive(path, stage, progress=progress)
    try:
        known = {node.digest for node in archive.nodes() if index.ref(str(repo.at(node.digest))) is not None}
        held = index.held(str(repo), archive.staged)
        before = {d for d in archive.staged if store.has(d, archive.staged[d]) and d in held}
        manifests = {node.digest for node in archive.nodes()}
        verdicts = []
        for node in archive.nodes():
            if node.is_bundle:
                named = _images_lock_digests(archive, node)
                verdicts.append((node, named is not None and named <= manifests))
        new = _commit(store, archive, events)
        _record(index, repo, archive)
        relocated, warnings = [], []
        for node, complete in verdicts:
            ref = str(repo.at(node.digest))
            if complete:
                index.put_verdict(ref, relocated=True, method=_METHOD, missing=())
                relocated.append(ref)
            else:
                warnings.append(f"bundle {ref}: its images.yml names content the archive does not hold (or cannot be "
                                "read): not recorded as relocated, so a sync checks it at the registry")  # fmt: skip
                events(WarningEvent(message=warnings[-1]))
        store.write_index_json(index.layout_entries)
    finally:
        remove_tree(stage)
    imported: list[ArchiveItem] = []
    already: list[ArchiveItem] = []
    for node in archive.tops:
        item = ArchiveItem(ref=str(repo.at(node.digest)), digest=str(node.digest), kind=_kind(node),
                           bytes=_size(node), origin=node.orig_ref, tag=node.tag)  # fmt: skip
        subtree = {m.digest for m in node.walk()} | {
            b.digest for m in node.walk() if isinstance(m.parsed, Manifest) for b in m.parsed.blobs
        }
        (already if subtree <= before and node.digest in known else imported).append(item)
    return CacheImportResult(
        source=path,
        format=archive.format,
        repository=str(repo),
        imported=tuple(imported),
        already_present=tuple(already),
        relocated_bundles=tuple(relocated),
        blobs=len(archive.staged),
        blobs_new=len(new),
        bytes_new=sum(archive.staged[d] for d in new),
        bytes_read=archive.bytes_read,
        warnings=tuple(warnings),
    )


def _archive_size(path: str) -> int:
    """The bytes the progress bar counts to: a tar's size, or what a layout directory's blobs/sha256/ holds."""
    if not os.path.isdir(path):
        try:
            return os.path.getsize(path)
        except OSError as exc:  # the operator's own path: a usage error, as pull's --lock
            raise UsageError(f"Importing '{path}': {exc.strerror or exc}") from None
    try:
        with os.scandir(os.path.join(path, "blobs", "sha256")) as entries:
            return sum(e.stat(follow_symlinks=False).st_size for e in entries if e.is_file(follow_symlinks=False))
    except OSError:
        return 0  # the reader says what is wrong with the layout
