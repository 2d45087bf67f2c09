"""Test support: build images and imgpkg bundles in memory and push them to the test registry.

Including the state `imgpkg copy --to-repo` leaves (images by digest in the bundle repo, `.imgpkg` tags, a locations
image).
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import os
import tarfile
import urllib.parse
import urllib.request
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from tests.support.registry import Registry

DOCKER_MANIFEST = "application/vnd.docker.distribution.manifest.v2+json"
DOCKER_CONFIG = "application/vnd.docker.container.image.v1+json"
DOCKER_LAYER = "application/vnd.docker.image.rootfs.diff.tar.gzip"
OCI_INDEX = "application/vnd.oci.image.index.v1+json"
BUNDLE_LABEL = "dev.carvel.imgpkg.bundle"


def sha(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


@dataclass(frozen=True)
class Entry:
    """A tar member to build: a file (data, mode), a directory, a link, a device, or a raw member name."""

    name: str
    data: bytes = b""
    mode: int = 0o600
    kind: str = "file"  # file, dir, symlink, hardlink, fifo, sparse
    target: str = ""
    declared: int = 0  # for kind="sparse": the expanded size the GNU sparse header declares


def checksummed(block: bytearray) -> bytes:
    """A header block with its checksum field set to match what it now holds."""
    block[148:156] = b" " * 8
    block[148:156] = b"%06o\0 " % sum(block[:512])
    return bytes(block)


def sparse_header(name: str, declared: int) -> bytes:
    """A GNU sparse member header declaring `declared` bytes with no data (what `tar --sparse` makes of a hole)."""
    info = tarfile.TarInfo(name)
    info.type = tarfile.GNUTYPE_SPARSE
    block = bytearray(info.tobuf(tarfile.GNU_FORMAT))
    block[483:495] = b"%011o\0" % declared  # the real (expanded) size field of the GNU sparse header
    return checksummed(block)


def raw_header(name: str, *, kind: bytes = b"0", size: int = 0, patch: Mapping[int, bytes] | None = None) -> bytes:
    """One ustar header block with fields overwritten raw at their offsets, then checksummed (for hostile archives).

    124 is the size field (12 bytes), 136 the mtime (12), 100 the mode (8), 0 the name (100), 156 the type.
    """
    info = tarfile.TarInfo(name)
    info.type, info.size = kind, size
    block = bytearray(info.tobuf(tarfile.USTAR_FORMAT))
    for offset, raw in (patch or {}).items():
        block[offset : offset + len(raw)] = raw
    return checksummed(block)


def padded(data: bytes) -> bytes:
    """Data followed by the zeros that fill its last tar block."""
    return data + bytes(-len(data) % 512)


def pax_record(keyword: str, value: bytes | str) -> bytes:
    """One well-framed pax record `<length> <keyword>=<value>\\n`."""
    body = b" " + keyword.encode() + b"=" + (value.encode() if isinstance(value, str) else value) + b"\n"
    length = len(body) + 1
    while len(str(length)) + len(body) != length:
        length += 1
    return str(length).encode() + body


def pax_header(records: bytes, kind: bytes = b"x") -> bytes:
    """A pax extended (`x`) or global (`g`) header holding `records` as they are, padded."""
    return raw_header("././@PaxHeader", kind=kind, size=len(records)) + padded(records)


def base256(value: int, width: int = 12) -> bytes:
    """A GNU base-256 number field (0x80 then big-endian for values >= 0, 0xff and two's complement below)."""
    if value >= 0:
        return b"\x80" + value.to_bytes(width - 1, "big")
    return b"\xff" + (value + (1 << 8 * (width - 1))).to_bytes(width - 1, "big")


def pax_chain(count: int, comment: bytes = b"x") -> bytes:
    """`count` pax extended headers in a row, then `f.txt`: an uncompressed tar that tarfile reads by recursing."""
    record = b" comment=" + comment + b"\n"
    length = len(record) + len(str(len(record)))
    record = str(length + (len(str(length)) - len(str(len(record))))).encode() + record
    header = tarfile.TarInfo("././@PaxHeader")
    header.type, header.size = tarfile.XHDTYPE, len(record)
    padded = record + bytes(-len(record) % 512)
    member = tarfile.TarInfo("f.txt")
    member.size = 2
    tail = member.tobuf(tarfile.USTAR_FORMAT) + b"hi" + bytes(510) + bytes(1024)
    return (header.tobuf(tarfile.USTAR_FORMAT) + padded) * count + tail


def deep_directory(root: Path, depth: int) -> None:
    """`root/d/d/…/d/f.txt`, `depth` levels (far past PATH_MAX), the deepest one read-only; made with relative opens."""
    root.mkdir()
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for _ in range(depth):
            os.mkdir("d", dir_fd=fd)
            child = os.open("d", os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
            os.close(fd)
            fd = child
        os.close(os.open("f.txt", os.O_WRONLY | os.O_CREAT, 0o600, dir_fd=fd))
        os.fchmod(fd, 0o500)
    finally:
        os.close(fd)


def tar_bytes(entries: Iterable[Entry]) -> bytes:
    buffer = io.BytesIO()
    entries = list(entries)
    long_names = any(len(e.name.encode()) > 99 or len(e.target.encode()) > 99 for e in entries)
    with tarfile.open(fileobj=buffer, mode="w",
                      format=tarfile.PAX_FORMAT if long_names else tarfile.USTAR_FORMAT) as archive:  # fmt: skip
        for entry in entries:
            if entry.kind == "sparse":
                block = sparse_header(entry.name, entry.declared)
                archive.fileobj.write(block)
                archive.offset += len(block)
                continue
            info = tarfile.TarInfo(entry.name)
            info.mode = entry.mode
            info.mtime = 0
            if entry.kind == "dir":
                info.type = tarfile.DIRTYPE
                archive.addfile(info)
            elif entry.kind == "symlink":
                info.type, info.linkname = tarfile.SYMTYPE, entry.target
                archive.addfile(info)
            elif entry.kind == "hardlink":
                info.type, info.linkname = tarfile.LNKTYPE, entry.target
                archive.addfile(info)
            elif entry.kind == "fifo":
                info.type = tarfile.FIFOTYPE
                archive.addfile(info)
            else:
                info.size = len(entry.data)
                archive.addfile(info, io.BytesIO(entry.data))
    return buffer.getvalue()


def files_layer(files: Mapping[str, bytes | str], mode: int = 0o600) -> list[Entry]:
    """Entries for a tree of files (directories added as imgpkg does, the root as '.')."""
    entries = [Entry(".", kind="dir", mode=0o700)]
    dirs: set[str] = set()
    for name in sorted(files):
        parts = name.split("/")[:-1]
        for depth in range(1, len(parts) + 1):
            directory = "/".join(parts[:depth])
            if directory not in dirs:
                dirs.add(directory)
                entries.append(Entry(directory, kind="dir", mode=0o700))
        data = files[name]
        entries.append(Entry(name, data.encode() if isinstance(data, str) else data, mode=mode))
    return entries


@dataclass
class Image:
    """An image in memory: config, layers (compressed) and the manifest that names them."""

    config: bytes
    layers: list[bytes]
    layer_types: list[str] = field(default_factory=list)
    manifest: bytes = b""

    def __post_init__(self) -> None:
        if not self.layer_types:
            self.layer_types = [DOCKER_LAYER] * len(self.layers)
        if not self.manifest:
            doc = {
                "schemaVersion": 2,
                "mediaType": DOCKER_MANIFEST,
                "config": {"mediaType": DOCKER_CONFIG, "size": len(self.config), "digest": sha(self.config)},
                "layers": [
                    {"mediaType": t, "size": len(layer), "digest": sha(layer)}
                    for layer, t in zip(self.layers, self.layer_types, strict=True)
                ],
            }
            self.manifest = json.dumps(doc, separators=(",", ":")).encode()

    @property
    def digest(self) -> str:
        return sha(self.manifest)

    @property
    def hex(self) -> str:
        return self.digest.split(":", 1)[1]

    @property
    def blobs(self) -> list[bytes]:
        return [self.config, *self.layers]


def config_bytes(*, bundle: bool, layers: list[bytes], label_value: str = "true") -> bytes:
    diff_ids = [sha(gzip.decompress(layer)) for layer in layers]
    doc: dict[str, object] = {
        "architecture": "",
        "created": "0001-01-01T00:00:00Z",
        "history": [{"author": "imgpkg", "created": "0001-01-01T00:00:00Z", "created_by": "imgpkg"}],
        "os": "",
        "rootfs": {"type": "layers", "diff_ids": diff_ids},
        "config": {"Labels": {BUNDLE_LABEL: label_value}} if bundle else {},
    }
    return json.dumps(doc, separators=(",", ":")).encode()


def make_image(files: Mapping[str, bytes | str] | None = None, *, entries: list[Entry] | None = None,
               extra_layers: list[list[Entry]] | None = None, bundle: bool = False) -> Image:  # fmt: skip
    layer_entries = [entries if entries is not None else files_layer(files or {})]
    layer_entries += extra_layers or []
    layers = [gzip.compress(tar_bytes(e), compresslevel=1, mtime=0) for e in layer_entries]
    return Image(config=config_bytes(bundle=bundle, layers=layers), layers=layers)


def images_yml(refs: Iterable[str], annotations: Mapping[str, str] | None = None) -> str:
    lines = ["---", "apiVersion: imgpkg.carvel.dev/v1alpha1", "kind: ImagesLock", "images:"]
    for ref in refs:
        lines.append(f"- image: {ref}")
        if annotations:
            lines.append("  annotations:")
            lines += [f"    {k}: {v}" for k, v in annotations.items()]
    return "\n".join(lines) + "\n"


def make_bundle(files: Mapping[str, bytes | str], image_refs: Iterable[str],
                annotations: Mapping[str, str] | None = None) -> Image:  # fmt: skip
    tree = dict(files)
    tree[".imgpkg/images.yml"] = images_yml(image_refs, annotations)
    return make_image(tree, bundle=True)


class Pusher:
    """A small test-only uploader (monolithic blob uploads, cross-repo mounts, manifests by tag or digest)."""

    def __init__(self, registry: Registry) -> None:
        self.registry = registry

    def _open(self, method: str, path: str, data: bytes | None = None,
              headers: Mapping[str, str] | None = None) -> tuple[int, Mapping[str, str], bytes]:  # fmt: skip
        url = path if path.startswith("http") else f"{self.registry.url}{path}"
        request = urllib.request.Request(url, data=data, method=method)
        for key, value in {**self.registry.auth_header(), **(headers or {})}.items():
            request.add_header(key, value)
        try:
            with urllib.request.urlopen(request, timeout=30, context=self.registry.ssl_context()) as response:
                return response.status, dict(response.headers), response.read()
        except urllib.error.HTTPError as exc:
            return exc.code, dict(exc.headers), exc.read()

    def blob(self, repo: str, data: bytes) -> str:
        digest = sha(data)
        status, _, _ = self._open("HEAD", f"/v2/{repo}/blobs/{digest}")
        if status == 200:
            return digest
        status, headers, body = self._open("POST", f"/v2/{repo}/blobs/uploads/", b"")
        assert status == 202, (status, body)
        location = headers["Location"]
        joiner = "&" if "?" in location else "?"
        target = f"{location}{joiner}digest={urllib.parse.quote(digest)}"
        status, _, body = self._open("PUT", target, data, {"Content-Type": "application/octet-stream"})
        assert status == 201, (status, body)
        return digest

    def mount(self, repo: str, digest: str, source: str) -> None:
        query = urllib.parse.urlencode({"mount": digest, "from": source})
        status, _, body = self._open("POST", f"/v2/{repo}/blobs/uploads/?{query}", b"")
        assert status == 201, (status, body)

    def manifest(self, repo: str, reference: str, data: bytes, media_type: str = DOCKER_MANIFEST) -> str:
        status, _, body = self._open("PUT", f"/v2/{repo}/manifests/{reference}", data, {"Content-Type": media_type})
        assert status == 201, (status, body)
        return sha(data)

    def image(self, repo: str, image: Image, tag: str | None = None) -> str:
        for blob in image.blobs:
            self.blob(repo, blob)
        self.manifest(repo, tag or image.digest, image.manifest)
        if tag:
            self.manifest(repo, f"sha256-{image.hex}.imgpkg", image.manifest)
        return f"{self.registry.host}/{repo}@{image.digest}"

    def index(self, repo: str, images: list[Image], tag: str) -> str:
        doc = {
            "schemaVersion": 2,
            "mediaType": OCI_INDEX,
            "manifests": [
                {"mediaType": DOCKER_MANIFEST, "size": len(i.manifest), "digest": i.digest,
                 "platform": {"architecture": "amd64", "os": "linux"}} for i in images
            ],
        }  # fmt: skip
        for image in images:
            self.image(repo, image)
        raw = json.dumps(doc).encode()
        self.manifest(repo, tag, raw, OCI_INDEX)
        return f"{self.registry.host}/{repo}@{sha(raw)}"

    def delete_manifest(self, repo: str, digest: str) -> None:
        status, _, body = self._open("DELETE", f"/v2/{repo}/manifests/{digest}")
        assert status == 202, (status, body)

    def copy_image(self, source_repo: str, image: Image, dest_repo: str) -> None:
        """What imgpkg copy does per image: mount blobs, push the manifest under sha256-<hex>.imgpkg."""
        for blob in image.blobs:
            self.mount(dest_repo, sha(blob), source_repo)
        self.manifest(dest_repo, f"sha256-{image.hex}.imgpkg", image.manifest)

    def locations_image(self, dest_repo: str, bundle: Image, originals: Mapping[str, bool]) -> Image:
        """The locations image imgpkg copy writes for a bundle (plain image, one layer, image-locations.yml)."""
        lines = ["---", "apiVersion: imgpkg.carvel.dev/v1alpha1"]
        if originals:
            lines.append("images:")
            for ref in sorted(originals):
                lines += [f"- image: {ref}", f"  isBundle: {'true' if originals[ref] else 'false'}"]
        else:
            lines.append("images: null")
        lines.append("kind: ImageLocations")
        locations = make_image({"image-locations.yml": "\n".join(lines) + "\n"})
        for blob in locations.blobs:
            self.blob(dest_repo, blob)
        self.manifest(dest_repo, f"sha256-{bundle.hex}.image-locations.imgpkg", locations.manifest)
        self.manifest(dest_repo, f"sha256-{locations.hex}.imgpkg", locations.manifest)
        return locations


@dataclass
class Published:
    """A bundle and its images as pushed: original refs, and where things live."""

    bundle: Image
    bundle_repo: str
    images: dict[str, Image]  # original ref -> image
    image_repos: dict[str, str]  # original ref -> repo path
    bundles: frozenset[str] = frozenset()  # the original refs among `images` that are bundles themselves

    def ref(self, registry: Registry, repo: str | None = None) -> str:
        return f"{registry.host}/{repo or self.bundle_repo}@{self.bundle.digest}"


def publish_bundle(pusher: Pusher, prefix: str, *, images: int = 1, files: Mapping[str, str] | None = None,
                   tag: str = "v1", annotations: Mapping[str, str] | None = None) -> Published:  # fmt: skip
    """Push `images` plain images to `<prefix>/img<i>` and a bundle naming them to `<prefix>/bundle`."""
    host = pusher.registry.host
    built: dict[str, Image] = {}
    repos: dict[str, str] = {}
    for number in range(images):
        image = make_image({f"img{number}.txt": f"image {number} of {prefix}\n"})
        repo = f"{prefix}/img{number}"
        ref = pusher.image(repo, image)
        assert ref == f"{host}/{repo}@{image.digest}"
        built[ref], repos[ref] = image, repo
    bundle = make_bundle(files or {"config/app.yml": "app: demo\n", "README.md": "sample bundle\n"}, list(built),
                         annotations)  # fmt: skip
    pusher.image(f"{prefix}/bundle", bundle, tag)
    return Published(bundle=bundle, bundle_repo=f"{prefix}/bundle", images=built, image_repos=repos)


def publish_outer_bundle(pusher: Pusher, prefix: str, inner: Published, images: int = 1) -> Published:
    """A bundle naming another bundle (nested) and plain images, as kbld and imgpkg leave it."""
    plain = publish_bundle(pusher, f"{prefix}/side", images=images)
    inner_ref = f"{pusher.registry.host}/{inner.bundle_repo}@{inner.bundle.digest}"
    members = {inner_ref: inner.bundle, **plain.images}
    repos = {inner_ref: inner.bundle_repo, **plain.image_repos}
    outer = make_bundle({"outer.yml": "outer: true\n"}, list(members))
    pusher.image(f"{prefix}/outer", outer, "v1")
    return Published(bundle=outer, bundle_repo=f"{prefix}/outer", images=members, image_repos=repos,
                     bundles=frozenset({inner_ref}))  # fmt: skip


def relocate_tree(pusher: Pusher, outer: Published, inner: Published, dest_repo: str) -> None:
    """`imgpkg copy -b <outer>` of a bundle with a nested one: everything in one repository, a locations image each."""
    relocate(pusher, inner, dest_repo, tag=None)
    relocate(pusher, outer, dest_repo)


def relocate(pusher: Pusher, published: Published, dest_repo: str, *, with_locations: bool = True,
             skip: Iterable[str] = (), tag: str | None = "v1") -> None:  # fmt: skip
    """Reproduce `imgpkg copy -b <bundle> --to-repo <dest>`; `skip` leaves images out (a partial copy)."""
    skipped = set(skip)
    for ref, image in published.images.items():
        if ref not in skipped:
            pusher.copy_image(published.image_repos[ref], image, dest_repo)
    pusher.copy_image(published.bundle_repo, published.bundle, dest_repo)
    if tag:
        pusher.manifest(dest_repo, tag, published.bundle.manifest)
    if with_locations:
        pusher.locations_image(dest_repo, published.bundle, {ref: ref in published.bundles for ref in published.images})


def publish_two_level(pusher: Pusher, prefix: str) -> list[Published]:
    """An outer bundle naming a middle bundle naming an inner bundle (each with plain images): innermost first."""
    inner = publish_bundle(pusher, f"{prefix}/inner", images=1, files={"inner.yml": "inner: true\n"})
    middle = publish_outer_bundle(pusher, f"{prefix}/middle", inner)
    outer = publish_outer_bundle(pusher, f"{prefix}/top", middle)
    return [inner, middle, outer]


def relocate_chain(pusher: Pusher, chain: list[Published], dest_repo: str) -> None:
    """`imgpkg copy -b <outermost>` of a nesting chain (innermost first): one repository, a locations image each."""
    for published in chain[:-1]:
        relocate(pusher, published, dest_repo, tag=None)
    relocate(pusher, chain[-1], dest_repo)
