"""Owns: what a process that serves calls remembers of parsed manifests and image configs.

Every warm sync reads the same manifest and config from the cache, verifies their bytes against their digests and
parses them (JSON, then Go's key rules and each descriptor). The bytes are the same call after call, so the parsed
form is remembered by the sha256 of the bytes (with the media type a manifest was served as). It is handed out as
it is: its dataclasses are frozen and its annotations and labels read-only mappings. At most SIZE of each, least
recently used dropped first; a failure is never remembered, so bad bytes are refused with their own error each time.
Only documents of at most KEPT_BYTES are remembered: a parsed form takes about ten times its bytes, and a worker would
otherwise keep SIZE of the largest a registry (or a fellow caller's image) can serve long after the calls that read
them; a larger one is parsed for its call, as before.
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict

from ocivendir.kept import through
from ocivendir.oci.manifest import ImageConfig, Index, Manifest, parse_config, parse_manifest

__all__ = ["KEPT_BYTES", "SIZE", "config", "manifest"]

SIZE = 32
KEPT_BYTES = 64 << 10  # a manifest of some 300 layers, an index of some 150 platforms: every usual one
_manifests: OrderedDict[tuple[bytes, str | None], Manifest | Index] = OrderedDict()  # by sha256 and media type
_configs: OrderedDict[bytes, ImageConfig] = OrderedDict()  # by sha256 of the config's bytes


def manifest(raw: bytes, media_type: str | None = None) -> Manifest | Index:
    """`parse_manifest(raw, media_type)`, remembered by the bytes' digest."""
    if len(raw) > KEPT_BYTES:
        return parse_manifest(raw, media_type)
    key = (hashlib.sha256(raw).digest(), media_type)
    return through(_manifests, key, lambda: parse_manifest(raw, media_type), SIZE)


def config(raw: bytes) -> ImageConfig:
    """`parse_config(raw)`, remembered by the bytes' digest."""
    if len(raw) > KEPT_BYTES:
        return parse_config(raw)
    return through(_configs, hashlib.sha256(raw).digest(), lambda: parse_config(raw), SIZE)
