"""Owns: imgpkg tarballs and OCI layouts built in memory from builders' images, for import tests (incl. hostile ones)."""

from __future__ import annotations

import io
import json
import tarfile
from typing import TYPE_CHECKING

from tests.support.builders import DOCKER_MANIFEST, Image, sha

if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping

ROOT_LABEL = "dev.carvel.imgpkg.copy.root-bundle"


def descriptor(image: Image, ref: str, *, orig_ref: str = "", root: bool = False) -> dict[str, object]:
    """Imgpkg's ImageDescriptor for an image, inline manifest and config."""
    layers = [{"MediaType": "application/vnd.docker.image.rootfs.diff.tar.gzip", "Digest": sha(layer), "DiffID": "",
               "Size": len(layer)} for layer in image.layers]  # fmt: skip
    return {"ImageIndex": None, "Image": {
        "Refs": [ref], "Layers": layers, "Config": {"Digest": sha(image.config), "Raw": image.config.decode()},
        "Manifest": {"MediaType": DOCKER_MANIFEST, "Digest": image.digest, "Raw": image.manifest.decode()},
        "Tag": "", "OrigRef": orig_ref, "Labels": {ROOT_LABEL: ""} if root else None}}  # fmt: skip


def tar_of(members: Iterable[tuple[str, bytes]]) -> bytes:
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w", format=tarfile.USTAR_FORMAT) as archive:
        for name, data in members:
            info = tarfile.TarInfo(name)
            info.size, info.mode = len(data), 0o644
            archive.addfile(info, io.BytesIO(data))
    return out.getvalue()


def imgpkg_tar(descriptors: list[dict[str, object]], layers: Mapping[str, bytes]) -> bytes:
    """`manifest.json`, then `sha256-<hex>.tar.gz` per layer (by digest), as imgpkg's TarWriter lays them out."""
    members = [("manifest.json", json.dumps(descriptors).encode())]
    members += [(f"{digest.replace(':', '-')}.tar.gz", layers[digest]) for digest in sorted(layers)]
    return tar_of(members)


def layers_of(*images: Image) -> dict[str, bytes]:
    return {sha(layer): layer for image in images for layer in image.layers}


def oci_layout(images: Mapping[str, Image]) -> dict[str, bytes]:
    """An OCI image layout's files (path → bytes), one index.json entry per image named by its ref name."""
    files: dict[str, bytes] = {"oci-layout": b'{"imageLayoutVersion":"1.0.0"}'}
    manifests = []
    for name, image in images.items():
        for blob in [image.manifest, *image.blobs]:
            files[f"blobs/sha256/{sha(blob).split(':')[1]}"] = blob
        manifests.append({"mediaType": DOCKER_MANIFEST, "digest": image.digest, "size": len(image.manifest),
                          "annotations": {"org.opencontainers.image.ref.name": name}})  # fmt: skip
    files["index.json"] = json.dumps({"schemaVersion": 2, "manifests": manifests}).encode()
    return files
