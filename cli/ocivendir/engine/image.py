"""Owns: fetching one image or bundle (resolve, manifest, config, classification) and extracting its layers."""

from __future__ import annotations

import os
from dataclasses import dataclass

from ocivendir.engine.content import Content
from ocivendir.errors import DigestMismatch, IndexNotSupported, UnsupportedMediaType
from ocivendir.fs import replay
from ocivendir.fs.extract import ExtractStats, TreePolicy, apply_layer
from ocivendir.fs.limits import Tally, check_declared
from ocivendir.fs.remove import remove_tree
from ocivendir.oci.manifest import (
    LAYER_GZIP,
    LAYER_ZSTD,
    MAGIC_BYTES,
    Descriptor,
    ImageConfig,
    Index,
    Manifest,
    layer_compression,
    sniff_compression,
)
from ocivendir.oci.reference import Digest, Reference, Repository
from ocivendir.results import LogEvent

TYPE_CHECKING = False
if TYPE_CHECKING:
    from ocivendir.engine.stream import ChunkPipe
    from ocivendir.fs.tarread import Readable


__all__ = ["INDEX_HINT", "FetchedImage", "extract_layers", "fetch_image", "layer_stream"]

INDEX_HINT = "provide a specific digest to the image instead"


@dataclass(frozen=True, kw_only=True)
class FetchedImage:
    """An image whose manifest and config are verified and cached."""

    repo: Repository
    digest: Digest
    raw: bytes
    manifest: Manifest
    config: ImageConfig

    @property
    def ref(self) -> str:
        """Fully qualified `registry/repo@sha256:<hex>`."""
        return str(self.repo.at(self.digest))

    @property
    def kind(self) -> str:
        """`bundle` or `image`."""
        return "bundle" if self.config.is_bundle else "image"


def fetch_image(content: Content, ref: Reference, *, index_message: str | None = None) -> FetchedImage:
    """Resolve and read an image's manifest and config; an index is refused (with `index_message` if given)."""
    digest = content.resolve(ref)
    content.hold(str(ref.repository.at(digest)))  # before any of its blobs is read: prune then leaves the entry alone
    raw, manifest = content.manifest(ref.repository, digest)
    if isinstance(manifest, Index):
        if index_message:
            raise IndexNotSupported(index_message)
        raise IndexNotSupported("Unable to pull non-images, such as image indexes.", hint=INDEX_HINT)
    config = content.config(ref.repository, manifest)
    return FetchedImage(repo=ref.repository, digest=digest, raw=raw, manifest=manifest, config=config)


class _Peeked:
    """A reader whose first bytes have been looked at (the compression magic), handed back before the rest."""

    def __init__(self, stream: Readable) -> None:
        self._stream = stream
        head = b""
        while len(head) < MAGIC_BYTES:
            more = stream.read(MAGIC_BYTES - len(head))
            if not more:
                break
            head += more
        self.head = self._pending = head

    def read(self, size: int = -1, /) -> bytes:
        """Up to `size` bytes: the peeked ones first."""
        if not self._pending:
            return self._stream.read(size)
        if size < 0:
            data, self._pending = self._pending + self._stream.read(), b""
            return data
        data, self._pending = self._pending[:size], self._pending[size:]
        return data


def layer_stream(stream: Readable, media_type: str, what: str) -> Readable:
    """The tar stream of a layer: gunzipped, zstd-decoded, or as it is, by its magic bytes (as imgpkg decides).

    The media type must still be a layer type. Readers are duck-typed file objects.
    """
    layer_compression(media_type)
    peeked = _Peeked(stream)
    compression = sniff_compression(peeked.head)
    if compression == LAYER_GZIP:
        from ocivendir.fs.gunzip import GunzipReader  # noqa: PLC0415 - zlib-ng loads `gzip`: only for a gzip layer

        return GunzipReader(peeked, what)
    if compression == LAYER_ZSTD:
        import importlib  # noqa: PLC0415 - only for zstd layers

        try:
            zstandard = importlib.import_module("zstandard")
        except ImportError:
            raise UnsupportedMediaType(
                f"unsupported layer media type '{media_type}': no zstd decoder installed",
                hint="pip install zstandard",
            ) from None
        reader: Readable = zstandard.ZstdDecompressor().stream_reader(peeked)
        return reader
    return peeked


def _apply(content: Content, layer: Descriptor, dest: str, policy: TreePolicy, stats: ExtractStats,
           what: str) -> None:  # fmt: skip
    """Apply a cached layer: from what this process kept of it (`fs/replay.py`), else read and verified from disk."""
    key, blob = str(layer.digest), content.store.path(layer.digest)
    kept = replay.recall(key, blob)
    if kept is not None:
        apply_layer(kept, dest, policy=policy, stats=stats, what=what)
        return
    with content.store.open_verified(layer.digest, layer.size, what) as reader:
        stream = layer_stream(reader, layer.media_type, what)
        archive = replay.Recording(stream) if layer.size <= replay.MAX_LAYER else None
        apply_layer(stream if archive is None else archive, dest, policy=policy, stats=stats, what=what)
    if archive is not None:  # the whole blob verified: what it gave may be replayed
        replay.remember(key, blob, archive.kept())


def _clear(directory: str) -> None:
    for name in os.listdir(directory):
        remove_tree(os.path.join(directory, name))


class _Restream(Exception):
    """A layer's download started over after its tee had applied some of the bytes before: `dest` must be rebuilt.

    What the tee wrote from those bytes (a cut-off attempt's, kept bytes that did not match, a registry that ignored
    a Range) may hold entries the verified layer lacks, which applying the layer on top would leave in place.
    """


def _streamed(content: Content, image: FetchedImage, layer: Descriptor, dest: str, policy: TreePolicy,
              stats: ExtractStats, what: str) -> bool:  # fmt: skip
    """Fetch a missing layer while applying it; False when the caller must apply it from the store.

    `_Restream` when the tee applied bytes that the download then started over from (nothing of them is verified).
    """
    if content.offline or content.cached(image.repo, layer):
        return False
    from ocivendir.engine.stream import TeeExtractor  # noqa: PLC0415 - only a download tees (a warm run never does)

    def apply(pipe: ChunkPipe) -> None:
        stream = layer_stream(pipe, layer.media_type, what)
        apply_layer(stream, dest, policy=policy, stats=stats, what=what)

    tee = TeeExtractor(apply, dest)
    try:
        fetched = content.fetch_blob(image.repo, layer, tee.feed)
    except BaseException:
        try:
            tee.finish(complete=False)
        except Exception:  # noqa: BLE001, S110 - the failure being handled is the one re-raised below
            pass
        raise
    if tee.finish(complete=fetched):
        return True
    if tee.fed:
        raise _Restream
    return False


def extract_layers(content: Content, image: FetchedImage, dest: str | os.PathLike[str], *, policy: TreePolicy,
                   indent: int = 0, signed: bool = True) -> ExtractStats:  # fmt: skip
    """Apply every layer first to last into `dest` (made by this run), streaming uncached ones as they download.

    A layer being streamed is not verified until its download ends, so until then it may only add to, replace in or
    delete from `dest`, within `policy.limits`: on a digest mismatch, or a download that started over after some of
    its bytes were applied, `dest` is emptied and every layer applied again from verified blobs (or the caller
    discards its stage). A blob that fails its check in the cache is fetched again once. With `--policy`, the image
    must first pass its signature policies (`signed=False`: the caller reports them itself).
    """
    if signed and content.signatures is not None:  # before a byte is written: `--policy` may refuse the image
        content.signatures.check(content, image)
    dest = os.fspath(dest)
    for layer in image.manifest.layers:
        layer_compression(layer.media_type)
    check_declared([layer.size for layer in image.manifest.layers], policy.limits, f"image '{image.ref}'")
    mismatches, stream = 0, True
    while True:
        try:
            return _apply_all(content, image, dest, policy, indent, stream=stream)
        except _Restream:
            stream = False  # every layer from verified blobs now: nothing is applied before it is verified
        except DigestMismatch as exc:
            if mismatches:
                raise
            mismatches += 1
            content.warn(f"{exc}; fetching it again")
            if content.index is not None:
                content.index.forget_blob(_failed_digest(image, exc))
        _clear(dest)
        content.ensure_blobs(image.repo, image.manifest.layers)


def _apply_all(content: Content, image: FetchedImage, dest: str, policy: TreePolicy, indent: int, *,
               stream: bool) -> ExtractStats:  # fmt: skip
    """One pass over the layers, first to last; with `stream`, uncached ones are applied as they download."""
    stats = ExtractStats(tally=Tally(policy.limits))
    total = len(image.manifest.layers)
    for position, layer in enumerate(image.manifest.layers, start=1):
        content.events(LogEvent(message=f"Extracting layer '{layer.digest}' ({position}/{total})", indent=indent))
        what = f"layer '{layer.digest}' of '{image.ref}'"
        if not (stream and _streamed(content, image, layer, dest, policy, stats, what)):
            content.ensure_blobs(image.repo, (layer,))
            _apply(content, layer, dest, policy, stats, what)
    return stats


def _failed_digest(image: FetchedImage, exc: DigestMismatch) -> Digest:
    for layer in image.manifest.layers:
        if str(layer.digest) in str(exc):
            return layer.digest
    return image.digest
