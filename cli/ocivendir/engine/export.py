"""Owns: `cache export` — writing cached content as imgpkg's `--to-tar` tarball, with no request.

The tarball is imgpkg v0.43's format (`pkg/imgpkg/imagetar`): a plain tar whose first member, `manifest.json`, is a
JSON list of image and index descriptors sorted as imgpkg sorts them (an image by `<manifest digest>/<config
digest>`, an index by its digest), each with its raw manifest and config inline, its references, imgpkg's `OrigRef`
(the reference a bundle's images.yml gives it) and, for the one root bundle, the label
`dev.carvel.imgpkg.copy.root-bundle`; then one member `sha256-<hex>.tar.gz` (mode 0644) per layer, by digest, each
once. `imgpkg copy --tar FILE --to-repo REPO` reads it, pushes every image to REPO by digest and writes the locations
images, so the digests are the cached ones.

Only content the cache holds for a repository is exported: a manifest or blob that repository served (or an import
recorded) and that re-hashes correctly as it is written. The tarball is written beside its destination and renamed
into place when complete: a failure leaves no file.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import tarfile
from contextlib import ExitStack
from dataclasses import dataclass, field

from ocivendir.cache.archive import ROOT_BUNDLE_LABEL
from ocivendir.cache.index import CacheIndex
from ocivendir.cache.store import BlobStore
from ocivendir.engine.image import layer_stream
from ocivendir.errors import CacheError, DigestMismatch, ImagesLockError, OcivendirError, UsageError
from ocivendir.fs.locks import LockBusy, file_lock
from ocivendir.fs.remove import remove_file
from ocivendir.fs.tarread import TarFormatError, TarReader
from ocivendir.oci.imageslock import MAX_IMAGES_LOCK_BYTES, parse_images_lock
from ocivendir.oci.manifest import Descriptor, Index, Manifest, parse_config, parse_manifest
from ocivendir.reports import ArchiveItem, CacheExportResult
from ocivendir.results import ProgressEvent

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import IO, Any

    from ocivendir.oci.reference import Digest, Reference, Repository
    from ocivendir.results import EventSink

__all__ = ["export_tar"]

_CHUNK = 1 << 20


@dataclass
class _Plan:
    """What the tarball will hold: descriptors by digest, and the layers to write."""

    descriptors: dict[Digest, dict[str, Any]] = field(default_factory=dict)
    sort_keys: dict[Digest, str] = field(default_factory=dict)
    layers: dict[Digest, Descriptor] = field(default_factory=dict)
    sizes: dict[Digest, int] = field(default_factory=dict)  # every blob and manifest, for the byte counts


class _Exporter:
    def __init__(self, store: BlobStore, index: CacheIndex, held: ExitStack) -> None:
        self.store = store
        self.index = index
        self.plan = _Plan()
        self.held = held  # shared entry locks on every ref exported: prune leaves them alone until the file is written

    def _hold(self, ref: str) -> None:
        lock = self.store.lock_path(f"entry-{hashlib.sha256(ref.encode()).hexdigest()}")
        with contextlib.suppress(LockBusy):  # a prune holding it now: its blobs are then checked as they are read
            self.held.enter_context(file_lock(lock, shared=True, timeout=30))

    def _held(self, repo: Repository, digest: Digest) -> bool:
        return bool(self.index.held(str(repo), (digest,))) and self.store.has(digest)

    def _missing(self, ref: str) -> CacheError:
        return CacheError(f"Exporting '{ref}': the cache does not hold it", hint="pull or import it first; nothing "
                          "was written")  # fmt: skip

    def _read(self, digest: Digest, size: int | None, what: str) -> bytes:
        try:
            return self.store.read_verified(digest, size, what)
        except DigestMismatch as exc:
            raise CacheError(f"{exc.message}; nothing was written",
                             hint="run 'ocivendir cache verify --repair', then pull it again") from None  # fmt: skip

    def manifest(self, repo: Repository, digest: Digest) -> tuple[bytes, Manifest | Index]:
        ref = str(repo.at(digest))
        self._hold(ref)
        if not self._held(repo, digest):
            raise self._missing(ref)
        raw = self._read(digest, None, f"Exporting '{ref}'")
        try:
            return raw, parse_manifest(raw)
        except OcivendirError as exc:
            raise CacheError(f"Exporting '{ref}': {exc.message}") from None

    def image(self, repo: Repository, digest: Digest, raw: bytes, manifest: Manifest) -> tuple[dict[str, Any], bool]:
        ref = str(repo.at(digest))
        for blob in manifest.blobs:
            if not (self.store.has(blob.digest, blob.size) and self.index.held(str(repo), (blob.digest,))):
                raise self._missing(f"{ref}: blob {blob.digest}")
            self.plan.sizes[blob.digest] = blob.size
        self.plan.sizes[digest] = len(raw)
        config = self._read(manifest.config.digest, manifest.config.size, f"Exporting '{ref}'")
        diff_ids = _diff_ids(config)
        layers = []
        for number, layer in enumerate(manifest.layers):
            self.plan.layers[layer.digest] = layer
            diff_id = diff_ids[number] if number < len(diff_ids) else ""
            layers.append({"MediaType": layer.media_type, "Digest": str(layer.digest), "DiffID": diff_id,
                           "Size": layer.size})  # fmt: skip
        described = {
            "Refs": [ref],
            "Layers": layers,
            "Config": {"Digest": str(manifest.config.digest), "Raw": _text(config, ref)},
            "Manifest": {"MediaType": manifest.media_type, "Digest": str(digest), "Raw": _text(raw, ref)},
            "Tag": "",
            "OrigRef": "",
            "Labels": None,
        }
        self.plan.sort_keys[digest] = f"{digest}/{manifest.config.digest}"
        try:
            bundle = parse_config(config).is_bundle
        except OcivendirError:
            bundle = False
        return described, bundle

    def index_of(self, repo: Repository, digest: Digest, raw: bytes, index: Index, depth: int) -> dict[str, Any]:
        ref = str(repo.at(digest))
        if depth > 8:  # noqa: PLR2004 - as import bounds it
            raise CacheError(f"Exporting '{ref}': indexes nested deeper than 8")
        images, indexes = [], []
        for child in index.manifests:
            child_raw, parsed = self.manifest(repo, child.digest)
            if isinstance(parsed, Index):
                indexes.append(self.index_of(repo, child.digest, child_raw, parsed, depth + 1))
            else:
                images.append(self.image(repo, child.digest, child_raw, parsed)[0])
        self.plan.sizes[digest] = len(raw)
        self.plan.sort_keys[digest] = str(digest)
        return {"Refs": [ref], "Images": images or None, "Indexes": indexes or None, "MediaType": index.media_type,
                "Digest": str(digest), "Raw": _text(raw, ref), "Tag": "", "OrigRef": "", "Labels": None}  # fmt: skip

    def add(self, repo: Repository, digest: Digest, origin: str, *, root: bool) -> tuple[str, bool]:
        """Describe one top-level manifest (and, for a bundle, everything its images.yml names); its kind."""
        if digest in self.plan.descriptors:
            return "bundle" if self.plan.descriptors[digest].get("bundle") else "image", False
        raw, parsed = self.manifest(repo, digest)
        if isinstance(parsed, Index):
            described = self.index_of(repo, digest, raw, parsed, 0)
            described["OrigRef"] = origin
            self.plan.descriptors[digest] = {"ImageIndex": described, "Image": None}
            return "index", False
        described, bundle = self.image(repo, digest, raw, parsed)
        described["OrigRef"] = origin
        if root and bundle:
            described["Labels"] = {ROOT_BUNDLE_LABEL: ""}
        self.plan.descriptors[digest] = {"ImageIndex": None, "Image": described, "bundle": bundle}
        if bundle:
            for entry in self.lock_entries(repo, digest, parsed):
                target = entry.reference
                where = repo if self._held(repo, target.digest) else target.repository
                self.add(where, target.digest, entry.image, root=False)
        return "bundle" if bundle else "image", bundle

    def lock_entries(self, repo: Repository, digest: Digest, manifest: Manifest) -> list[Any]:
        found: bytes | None = None
        ref = str(repo.at(digest))
        for layer in manifest.layers:
            try:
                with self.store.open_verified(layer.digest, layer.size, f"Exporting '{ref}'") as handle:
                    reader = TarReader(layer_stream(handle, layer.media_type, f"layer {layer.digest}"))
                    for member in reader:
                        name = member.name.replace("\\", "/").removeprefix("./")
                        if name == ".imgpkg/images.yml" and member.isreg() and member.size <= MAX_IMAGES_LOCK_BYTES:
                            found = b"".join(iter(reader.read, b""))
            except (TarFormatError, DigestMismatch) as exc:
                raise CacheError(f"Exporting '{ref}': cannot read its layer {layer.digest}: {exc}") from None
        if found is None:
            raise CacheError(f"Exporting '{ref}': the bundle has no .imgpkg/images.yml")
        try:
            return [e for e in parse_images_lock(found).images if e.reference.digest is not None]
        except ImagesLockError as exc:
            raise CacheError(f"Exporting '{ref}': {exc.message}") from None


def _diff_ids(config: bytes) -> list[str]:
    try:
        doc = json.loads(config)
        ids = doc["rootfs"]["diff_ids"]
    except (ValueError, KeyError, TypeError):
        return []
    return [str(i) for i in ids] if isinstance(ids, list) else []


def _text(raw: bytes, ref: str) -> str:
    """Raw bytes as the Go string imgpkg's descriptors hold: they must be UTF-8 to survive the round trip."""
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        raise CacheError(f"Exporting '{ref}': a manifest or config that is not UTF-8 cannot be carried in imgpkg's "
                         "tarball") from None  # fmt: skip


def _add_member(archive: tarfile.TarFile, name: str, size: int, data: IO[bytes]) -> None:
    info = tarfile.TarInfo(name)
    info.size = size
    info.mode = 0o644
    archive.addfile(info, data)


def export_tar(
    refs: list[Reference], output: str, store: BlobStore, index: CacheIndex, events: EventSink
) -> CacheExportResult:
    """Describe every ref from the cache, then write the tarball (beside `output`, renamed when complete)."""
    with ExitStack() as held:
        return _export(refs, output, store, _Exporter(store, index, held), events)


def _export(
    refs: list[Reference], output: str, store: BlobStore, exporter: _Exporter, events: EventSink
) -> CacheExportResult:
    items = []
    roots = 0
    for ref in refs:
        digest = ref.digest
        if digest is None:  # pragma: no cover - the command refuses tags
            raise UsageError(f"cache export takes digest references: '{ref}'")
        known = set(exporter.plan.sizes)
        kind, bundle = exporter.add(ref.repository, digest, str(ref), root=roots == 0)
        added = sum(size for d, size in exporter.plan.sizes.items() if d not in known)
        roots += bundle
        if roots > 1:
            raise UsageError("an imgpkg tarball holds one root bundle: export each bundle to its own file")
        items.append((ref, digest, kind, added))
    plan = exporter.plan
    document = [plan.descriptors[d] for d in sorted(plan.descriptors, key=lambda d: plan.sort_keys[d])]
    for entry in document:
        entry.pop("bundle", None)
    manifest_json = json.dumps(document, separators=(",", ":")).encode()
    total = sum(layer.size for layer in plan.layers.values())
    target = os.path.abspath(output)
    tmp = os.path.join(os.path.dirname(target), f".{os.path.basename(target)}-{os.urandom(6).hex()}")
    done = 0
    try:
        with open(tmp, "xb") as handle, tarfile.open(fileobj=handle, mode="w", format=tarfile.USTAR_FORMAT) as tar:
            import io  # noqa: PLC0415

            _add_member(tar, "manifest.json", len(manifest_json), io.BytesIO(manifest_json))
            for digest in sorted(plan.layers):
                layer = plan.layers[digest]
                with store.open_verified(digest, layer.size, f"Exporting layer {digest}") as stream:
                    _add_member(tar, f"{digest.tag_form}.tar.gz", layer.size, stream)  # type: ignore[arg-type]
                done += layer.size
                events(ProgressEvent(key="export", label="writing", done=done, total=total))
        os.replace(tmp, target)
    except DigestMismatch as exc:
        raise CacheError(f"{exc.message}; nothing was written",
                         hint="run 'ocivendir cache verify --repair', then pull it again") from None  # fmt: skip
    except OSError as exc:
        raise CacheError(f"Writing '{output}': {exc.strerror or exc}") from None
    finally:
        remove_file(tmp)
    exported = tuple(
        ArchiveItem(ref=str(ref.repository.at(digest)), digest=str(digest), kind=kind, bytes=added)
        for ref, digest, kind, added in items
    )
    return CacheExportResult(output=target, exported=exported, blobs=len(plan.sizes), bytes=sum(plan.sizes.values()))
