"""Owns: the large artifacts the pull scenario needs.

A single-layer bundle of any size is built and uploaded as a stream (a 1 GiB layer never sits in memory); a bundle of
many small files is built in memory.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import random
import tarfile
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Protocol

from tests.support.builders import (
    BUNDLE_LABEL,
    DOCKER_CONFIG,
    DOCKER_LAYER,
    DOCKER_MANIFEST,
    Pusher,
    images_yml,
    make_bundle,
)
from tests.support.registry import Registry


class _Sink(Protocol):
    def write(self, data: bytes, /) -> object: ...


class _Hashing(io.RawIOBase):
    """A write-through stream that hashes and counts what passes."""

    def __init__(self, target: _Sink) -> None:
        self.target = target
        self.sha = hashlib.sha256()
        self.size = 0

    def writable(self) -> bool:
        return True

    def write(self, data: bytes) -> int:  # type: ignore[override]
        self.sha.update(data)
        self.size += len(data)
        self.target.write(data)
        return len(data)

    def tell(self) -> int:
        return self.size

    def digest(self) -> str:
        return "sha256:" + self.sha.hexdigest()


class _Random(io.RawIOBase):
    """`size` pseudo-random (incompressible) bytes, read in chunks."""

    def __init__(self, size: int, seed: int) -> None:
        self.left = size
        self.random = random.Random(seed)

    def readable(self) -> bool:
        return True

    def read(self, n: int = -1) -> bytes:
        take = self.left if n < 0 else min(n, self.left)
        self.left -= take
        return self.random.randbytes(take)


def _layer_file(path: Path, size: int) -> tuple[str, str, int]:
    """Write a gzip (stored, level 0) tar layer holding `.imgpkg/images.yml` and one `size`-byte data file."""
    lock = images_yml([]).encode()
    with path.open("wb") as raw:
        outer = _Hashing(raw)
        with gzip.GzipFile(fileobj=outer, mode="wb", compresslevel=0, mtime=0) as packed:
            inner = _Hashing(packed)
            with tarfile.open(fileobj=inner, mode="w", format=tarfile.USTAR_FORMAT) as archive:
                for name in (".", ".imgpkg"):
                    info = tarfile.TarInfo(name)
                    info.type, info.mode = tarfile.DIRTYPE, 0o700
                    archive.addfile(info)
                _add(archive, ".imgpkg/images.yml", len(lock), io.BytesIO(lock))
                _add(archive, "data.bin", size, _Random(size, seed=size))
    return outer.digest(), inner.digest(), outer.size


def _add(archive: tarfile.TarFile, name: str, size: int, source: _Random | io.BytesIO) -> None:
    info = tarfile.TarInfo(name)
    info.size, info.mode = size, 0o600
    archive.addfile(info, source)


def _upload(registry: Registry, repo: str, path: Path, digest: str, size: int) -> None:
    """A monolithic blob upload streamed from a file."""
    start = urllib.request.Request(f"{registry.url}/v2/{repo}/blobs/uploads/", data=b"", method="POST")
    with urllib.request.urlopen(start, timeout=60) as response:
        location = response.headers["Location"]
    location = location if location.startswith("http") else f"{registry.url}{location}"
    joiner = "&" if "?" in location else "?"
    with path.open("rb") as body:
        put = urllib.request.Request(f"{location}{joiner}digest={urllib.parse.quote(digest)}", data=body,
                                     method="PUT", headers={"Content-Type": "application/octet-stream",
                                                            "Content-Length": str(size)})  # fmt: skip
        with urllib.request.urlopen(put, timeout=1800) as response:
            assert response.status == 201, response.status


def big_bundle(registry: Registry, repo: str, size: int, scratch: Path) -> str:
    """Push a single-layer bundle with one `size`-byte file; its digest reference."""
    layer = scratch / "layer.tar.gz"
    digest, diff_id, layer_size = _layer_file(layer, size)
    _upload(registry, repo, layer, digest, layer_size)
    layer.unlink()
    config = json.dumps({
        "architecture": "", "created": "0001-01-01T00:00:00Z", "os": "",
        "history": [{"author": "imgpkg", "created": "0001-01-01T00:00:00Z", "created_by": "imgpkg"}],
        "rootfs": {"type": "layers", "diff_ids": [diff_id]}, "config": {"Labels": {BUNDLE_LABEL: "true"}},
    }, separators=(",", ":")).encode()  # fmt: skip
    pusher = Pusher(registry)
    config_digest = pusher.blob(repo, config)
    manifest = json.dumps({
        "schemaVersion": 2, "mediaType": DOCKER_MANIFEST,
        "config": {"mediaType": DOCKER_CONFIG, "size": len(config), "digest": config_digest},
        "layers": [{"mediaType": DOCKER_LAYER, "size": layer_size, "digest": digest}],
    }, separators=(",", ":")).encode()  # fmt: skip
    manifest_digest = pusher.manifest(repo, "v1", manifest)
    pusher.manifest(repo, f"sha256-{manifest_digest.split(':', 1)[1]}.imgpkg", manifest)
    return f"{registry.host}/{repo}@{manifest_digest}"


def many_files_bundle(registry: Registry, repo: str, files: int) -> str:
    """Push a bundle of `files` small YAML files (0.5–4 KiB each) in 20 directories; its digest reference."""
    rng = random.Random(files)
    tree = {f"config/dir{n % 20:02}/file{n:05}.yml": f"n: {n}\n" + "v: " + "y" * rng.randrange(500, 4000) + "\n"
            for n in range(files)}  # fmt: skip
    return Pusher(registry).image(repo, make_bundle(tree, []), tag="v1")
