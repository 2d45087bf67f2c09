"""Owns: reading an image archive into a staging directory — imgpkg's `--to-tar` tarball or an OCI image layout.

Nothing here touches the cache's blobs or index. Every blob the archive carries is staged by `cache/staging.py`, which
keeps it only under the digest it really has (beside the cache's blobs, on the same file system). Manifests and image
configs are verified the same way, whether they come inline (imgpkg's `manifest.json` holds them as strings) or as
blobs (an OCI layout). What the archive names is then walked from its top-level entries: each manifest's blobs must be
staged with exactly the size the manifest gives, else the read fails naming the first one that is not.

Formats, as imgpkg v0.43 writes and reads them (`pkg/imgpkg/imagetar`, `pkg/imgpkg/imagedesc`):
- imgpkg tarball: a plain tar; `manifest.json` (a JSON list of `{"Image": …}` / `{"ImageIndex": …}` descriptors with
  the raw manifest and config inline) and one member `sha256-<hex>.tar.gz` per layer, mode 0644;
- OCI image layout: `oci-layout`, `index.json` and `blobs/sha256/<hex>`, as a directory or a tar of one.

Bounds: members, descriptors and index depth are counted; `manifest.json`/`index.json` and each manifest or config
are read whole only up to a limit; a member path that is absolute or climbs out (`..`), and a link, fail the read.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field, replace

from ocivendir import jsondoc
from ocivendir.cache.staging import MAX_DOCUMENT, ArchiveInvalid, Stager, chunks, read_small, read_tar, take_file
from ocivendir.errors import CacheError, DigestMismatch, OcivendirError, UnsupportedMediaType
from ocivendir.fs.limits import DEFAULT_MAX_ENTRIES
from ocivendir.fs.remove import remove_tree
from ocivendir.oci.manifest import (
    MAX_CONFIG_BYTES,
    Descriptor,
    Index,
    Manifest,
    parse_config,
    parse_manifest,
    sha256_digest,
)
from ocivendir.oci.reference import Digest, parse_digest

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

__all__ = [
    "IMGPKG_TAR",
    "MAX_MANIFEST",
    "OCI_LAYOUT",
    "ROOT_BUNDLE_LABEL",
    "Archive",
    "Node",
    "read_archive",
]

IMGPKG_TAR = "imgpkg-tar"
OCI_LAYOUT = "oci-layout"
ROOT_BUNDLE_LABEL = "dev.carvel.imgpkg.copy.root-bundle"
MAX_MANIFEST = 4 << 20  # as the registry client reads a manifest
MAX_DESCRIPTORS = DEFAULT_MAX_ENTRIES
MAX_DEPTH = 8  # indexes inside indexes


@dataclass(frozen=True, kw_only=True)
class Node:
    """One manifest of the archive, verified: an image (its config and layers) or an index (its children)."""

    digest: Digest
    raw: bytes
    parsed: Manifest | Index
    is_bundle: bool = False
    children: tuple[Node, ...] = ()
    tag: str = ""
    orig_ref: str = ""
    root: bool = False  # imgpkg's root bundle (`dev.carvel.imgpkg.copy.root-bundle`)

    def walk(self) -> Iterator[Node]:
        """This node, then every manifest under it."""
        yield self
        for child in self.children:
            yield from child.walk()


@dataclass
class Archive:
    """What an archive holds: its top-level manifests, and every blob staged under `stage` by its hex digest."""

    format: str
    stage: str
    tops: list[Node] = field(default_factory=list)
    staged: dict[Digest, int] = field(default_factory=dict)  # digest → size, verified
    bytes_read: int = 0

    def path(self, digest: Digest) -> str:
        """Where a staged blob is."""
        return os.path.join(self.stage, digest.hex)

    def nodes(self) -> Iterator[Node]:
        """Every manifest, each once, tops first."""
        seen: set[Digest] = set()
        for top in self.tops:
            for node in top.walk():
                if node.digest not in seen:
                    seen.add(node.digest)
                    yield node

    def blobs(self) -> dict[Digest, Descriptor]:
        """Every config and layer the manifests name, each once."""
        found: dict[Digest, Descriptor] = {}
        for node in self.nodes():
            if isinstance(node.parsed, Manifest):
                for blob in node.parsed.blobs:
                    found.setdefault(blob.digest, blob)
        return found


class _Walker:
    """Builds the verified manifest tree from the top-level descriptors, with the count and depth bounds."""

    def __init__(self, where: str, staged: dict[Digest, int], blob_bytes: Callable[[Digest, int, int], bytes]) -> None:
        self.where = where
        self.staged = staged
        self.blob_bytes = blob_bytes  # (digest, size, limit) → bytes of a staged blob
        self.count = 0

    def counted(self) -> None:
        self.count += 1
        if self.count > MAX_DESCRIPTORS:
            raise ArchiveInvalid(f"{self.where}: more than {MAX_DESCRIPTORS} descriptors")

    def need(self, blob: Descriptor, what: str) -> None:
        """A blob a manifest names must be staged with the size the manifest gives."""
        self.counted()
        size = self.staged.get(blob.digest)
        if size is None:
            raise ArchiveInvalid(f"{self.where}: {what} names blob {blob.digest}, which the archive does not hold")
        if size != blob.size:
            raise DigestMismatch(f"{self.where}: {what} gives blob {blob.digest} {blob.size} bytes; the archive "
                                 f"holds {size}")  # fmt: skip

    def manifest(self, raw: bytes, digest: Digest, what: str) -> Manifest | Index:
        if len(raw) > MAX_MANIFEST:
            raise ArchiveInvalid(f"{self.where}: {what} is larger than {MAX_MANIFEST} bytes")
        if sha256_digest(raw) != digest:
            raise DigestMismatch(f"{self.where}: {what} does not match its digest {digest}; nothing imported")
        try:
            return parse_manifest(raw)
        except (UnsupportedMediaType, OcivendirError) as exc:
            raise ArchiveInvalid(f"{self.where}: {what}: {exc.message}") from None

    def bundle_label(self, config: bytes) -> bool:
        """Whether a verified config carries imgpkg's bundle label (an artifact's config that is none: not a bundle)."""
        try:
            return parse_config(config).is_bundle
        except OcivendirError:
            return False

    def layout_node(self, blob: Descriptor, depth: int) -> Node:
        """A manifest of an OCI layout (a blob), and everything under it."""
        what = f"manifest {blob.digest}"
        self.need(blob, what)
        if depth > MAX_DEPTH:
            raise ArchiveInvalid(f"{self.where}: indexes nested deeper than {MAX_DEPTH}")
        raw = self.blob_bytes(blob.digest, blob.size, MAX_MANIFEST)
        parsed = self.manifest(raw, blob.digest, what)
        if isinstance(parsed, Index):
            children = tuple(self.layout_node(child, depth + 1) for child in parsed.manifests)
            return Node(digest=blob.digest, raw=raw, parsed=parsed, children=children)
        for layer in parsed.blobs:
            self.need(layer, what)
        config = self.blob_bytes(parsed.config.digest, parsed.config.size, MAX_CONFIG_BYTES)
        return Node(digest=blob.digest, raw=raw, parsed=parsed, is_bundle=self.bundle_label(config))


def _text(doc: dict[str, object], key: str, what: str) -> str:
    value = doc.get(key)
    if value is None:
        return ""
    if not isinstance(value, str):
        raise ArchiveInvalid(f"{what}: '{key}' is not a string")
    return value


def _object(value: object, what: str) -> dict[str, object]:
    if not isinstance(value, dict):
        raise ArchiveInvalid(f"{what}: expected an object")
    return value


def _digest(text: str, what: str) -> Digest:
    try:
        return parse_digest(text)
    except OcivendirError as exc:
        raise ArchiveInvalid(f"{what}: {exc.message}") from None


class _ImgpkgReader:
    """imgpkg's `manifest.json`: manifests and configs inline, layers as members."""

    def __init__(self, walker: _Walker, configs: dict[Digest, bytes]) -> None:
        self.walker = walker
        self.configs = configs  # inline configs, verified: staged as blobs at the end

    def image(self, doc: dict[str, object], top: dict[str, object] | None) -> Node:
        where = self.walker.where
        manifest = _object(doc.get("Manifest"), f"{where}: image descriptor 'Manifest'")
        config = _object(doc.get("Config"), f"{where}: image descriptor 'Config'")
        digest = _digest(_text(manifest, "Digest", where), f"{where}: image descriptor")
        what = f"manifest {digest}"
        raw = _text(manifest, "Raw", where).encode()
        parsed = self.walker.manifest(raw, digest, what)
        if not isinstance(parsed, Manifest):
            raise ArchiveInvalid(f"{where}: {what} is an index where an image is described")
        config_raw = _text(config, "Raw", where).encode()
        if sha256_digest(config_raw) != parsed.config.digest or len(config_raw) != parsed.config.size:
            raise DigestMismatch(f"{where}: the config of {what} does not match {parsed.config.digest}; "
                                 "nothing imported")  # fmt: skip
        if len(config_raw) > MAX_CONFIG_BYTES:
            raise ArchiveInvalid(f"{where}: the config of {what} is larger than {MAX_CONFIG_BYTES} bytes")
        self.configs[parsed.config.digest] = config_raw
        self.walker.counted()
        for layer in parsed.layers:
            self.walker.need(layer, what)
        node = Node(digest=digest, raw=raw, parsed=parsed, is_bundle=self.walker.bundle_label(config_raw))
        return _with_top(node, top, where)

    def index(self, doc: dict[str, object], top: dict[str, object] | None, depth: int) -> Node:
        where = self.walker.where
        if depth > MAX_DEPTH:
            raise ArchiveInvalid(f"{where}: indexes nested deeper than {MAX_DEPTH}")
        digest = _digest(_text(doc, "Digest", where), f"{where}: index descriptor")
        what = f"index {digest}"
        raw = _text(doc, "Raw", where).encode()
        parsed = self.walker.manifest(raw, digest, what)
        if not isinstance(parsed, Index):
            raise ArchiveInvalid(f"{where}: {what} is an image where an index is described")
        described: dict[Digest, Node] = {}
        for item in _list(doc.get("Images"), where):
            node = self.image(_object(item, f"{where}: {what}"), None)
            described[node.digest] = node
        for item in _list(doc.get("Indexes"), where):
            node = self.index(_object(item, f"{where}: {what}"), None, depth + 1)
            described[node.digest] = node
        children = []
        for entry in parsed.manifests:
            self.walker.counted()
            child = described.get(entry.digest)
            if child is None or len(child.raw) != entry.size:
                raise ArchiveInvalid(f"{where}: {what} names manifest {entry.digest}, which the archive does not hold "
                           "(with that size)")  # fmt: skip
            children.append(child)
        return _with_top(Node(digest=digest, raw=raw, parsed=parsed, children=tuple(children)), top, where)

    def read(self, document: bytes) -> list[Node]:
        where = self.walker.where
        try:
            entries = jsondoc.loads(document)
        except ValueError as exc:
            raise ArchiveInvalid(f"{where}: manifest.json is not valid JSON: {exc}") from None
        tops = []
        for item in _list(entries, where):
            entry = _object(item, f"{where}: manifest.json entry")
            if entry.get("Image") is not None:
                image = _object(entry["Image"], f"{where}: manifest.json entry")
                tops.append(self.image(image, image))
            elif entry.get("ImageIndex") is not None:
                index = _object(entry["ImageIndex"], f"{where}: manifest.json entry")
                tops.append(self.index(index, index, 0))
            else:
                raise ArchiveInvalid(f"{where}: a manifest.json entry is neither an image nor an index")
        return tops


def _list(value: object, where: str) -> list[object]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise ArchiveInvalid(f"{where}: expected a list in manifest.json")
    return value


def _with_top(node: Node, top: dict[str, object] | None, where: str) -> Node:
    """A top-level descriptor's node with imgpkg's tag, OrigRef and root-bundle label."""
    if top is None:
        return node
    labels = top.get("Labels")
    root = isinstance(labels, dict) and ROOT_BUNDLE_LABEL in labels
    return replace(node, tag=_text(top, "Tag", where), orig_ref=_text(top, "OrigRef", where), root=root)


def _layout_tops(document: bytes, walker: _Walker) -> list[Node]:
    try:
        doc = jsondoc.loads(document)
    except ValueError as exc:
        raise ArchiveInvalid(f"{walker.where}: index.json is not valid JSON: {exc}") from None
    try:
        parsed = parse_manifest(document, "application/vnd.oci.image.index.v1+json")
    except OcivendirError as exc:
        raise ArchiveInvalid(f"{walker.where}: index.json: {exc.message}") from None
    if not isinstance(parsed, Index) or not isinstance(doc, dict):
        raise ArchiveInvalid(f"{walker.where}: index.json is not an image index")
    return [
        replace(walker.layout_node(entry, 0), tag=entry.annotations.get("org.opencontainers.image.ref.name", ""))
        for entry in parsed.manifests
    ]


def read_archive(
    path: str,
    stage: str,
    *,
    progress: Callable[[int], None] = lambda _done: None,
) -> Archive:
    """Read `path` (an imgpkg tarball, an OCI layout tar, or an OCI layout directory) into `stage` and verify it.

    `stage` is created (and must not exist). On any failure it is removed and a CacheError, DigestMismatch or
    UnsafeArchive naming the archive is raised.
    """
    where = f"Importing '{path}'"
    os.mkdir(stage, 0o700)
    try:
        return _read(path, stage, where, progress)
    except ArchiveInvalid as exc:
        remove_tree(stage)
        raise CacheError(exc.message, hint="the archive is damaged or not one imgpkg or an OCI layout wrote; nothing "
                         "was imported") from None  # fmt: skip
    except BaseException:
        remove_tree(stage)
        raise


def _documents(path: str, stager: Stager) -> tuple[str, dict[str, bytes]]:
    """The archive's format and documents; a tar's blobs are staged on the way."""
    if os.path.isdir(path):
        return OCI_LAYOUT, {"index.json": read_small(os.path.join(path, "index.json"), MAX_DOCUMENT, stager.where)}
    documents = read_tar(path, stager, DEFAULT_MAX_ENTRIES)
    if "manifest.json" in documents and "oci-layout" not in documents:  # `docker save` writes both: a layout
        return IMGPKG_TAR, documents
    if "index.json" in documents:
        return OCI_LAYOUT, documents
    raise ArchiveInvalid(
        f"{stager.where}: neither an imgpkg tarball (manifest.json) nor an OCI image layout (index.json)"
    )


def _read(path: str, stage: str, where: str, progress: Callable[[int], None]) -> Archive:
    stager = Stager(stage, where, progress)
    fmt, documents = _documents(path, stager)

    def staged_bytes(digest: Digest, size: int, limit: int) -> bytes:
        if size > limit:
            raise ArchiveInvalid(f"{where}: blob {digest} is larger than {limit} bytes")
        if os.path.isdir(path) and digest not in stager.staged:
            take_file(path, digest, size, stager)
        data = read_small(os.path.join(stage, digest.hex), limit, where)
        if sha256_digest(data) != digest:
            raise DigestMismatch(f"{where}: blob {digest} changed while it was read; nothing imported")
        return data

    walker = _Walker(where, stager.staged, staged_bytes)
    if fmt == IMGPKG_TAR:
        tops = _imgpkg_tops(documents["manifest.json"], walker, stager)
    else:
        if os.path.isdir(path):
            _stage_layout_dir(path, stager, documents["index.json"], walker)
        tops = _layout_tops(documents["index.json"], walker)
    archive = Archive(format=fmt, stage=stage, tops=tops, staged=dict(stager.staged), bytes_read=stager.done)
    needed = {node.digest for node in archive.nodes()} | set(archive.blobs())
    for digest in set(archive.staged) - needed:  # members nothing names: not imported
        del archive.staged[digest]
        os.unlink(archive.path(digest))
    return archive


def _imgpkg_tops(document: bytes, walker: _Walker, stager: Stager) -> list[Node]:
    """Imgpkg's descriptors, verified; their inline manifests and configs staged as blobs."""
    configs: dict[Digest, bytes] = {}
    tops = _ImgpkgReader(walker, configs).read(document)
    for digest, data in configs.items():
        if digest not in stager.staged:
            stager.take(digest, len(data), chunks(data), f"config {digest}")
    for node in (n for top in tops for n in top.walk()):
        if node.digest not in stager.staged:
            stager.take(node.digest, len(node.raw), chunks(node.raw), f"manifest {node.digest}")
    return tops


def _stage_layout_dir(path: str, stager: Stager, index: bytes, walker: _Walker) -> None:
    """An OCI layout directory: stage each blob the walk will need, found through index.json and the manifests."""
    # The walk itself stages manifests and configs on demand (staged_bytes); layers are staged here first.
    todo: list[tuple[Descriptor, int]] = []
    try:
        parsed = parse_manifest(index, "application/vnd.oci.image.index.v1+json")
    except OcivendirError as exc:
        raise ArchiveInvalid(f"{walker.where}: index.json: {exc.message}") from None
    if isinstance(parsed, Index):
        todo.extend((entry, 0) for entry in parsed.manifests)
    while todo:
        entry, depth = todo.pop()
        if depth > MAX_DEPTH:
            raise ArchiveInvalid(f"{walker.where}: indexes nested deeper than {MAX_DEPTH}")
        walker.counted()
        if entry.digest not in stager.staged:
            take_file(path, entry.digest, entry.size, stager)
        if entry.size > MAX_MANIFEST:
            raise ArchiveInvalid(f"{walker.where}: manifest {entry.digest} is larger than {MAX_MANIFEST} bytes")
        raw = read_small(os.path.join(stager.stage, entry.digest.hex), MAX_MANIFEST, walker.where)
        manifest = walker.manifest(raw, entry.digest, f"manifest {entry.digest}")
        if isinstance(manifest, Index):
            todo.extend((child, depth + 1) for child in manifest.manifests)
            continue
        for blob in manifest.blobs:
            walker.counted()
            if blob.digest not in stager.staged:
                take_file(path, blob.digest, blob.size, stager)
