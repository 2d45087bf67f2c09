"""Owns: OCI/Docker media types, manifests, indexes and image configs parsed from raw bytes."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from types import MappingProxyType

from ocivendir import jsondoc
from ocivendir.errors import BadReference, RegistryError, UnsupportedMediaType
from ocivendir.oci import gokeys
from ocivendir.oci.configtypes import check_config_types
from ocivendir.oci.reference import Digest, parse_digest

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any

__all__ = [
    "ACCEPT_MANIFESTS",
    "BUNDLE_LABEL",
    "DOCKER_MANIFEST",
    "DOCKER_MANIFEST_LIST",
    "INDEX_TYPES",
    "LAYER_GZIP",
    "LAYER_PLAIN",
    "LAYER_ZSTD",
    "MAGIC_BYTES",
    "MANIFEST_TYPES",
    "MAX_CONFIG_BYTES",
    "OCI_INDEX",
    "OCI_MANIFEST",
    "Descriptor",
    "ImageConfig",
    "Index",
    "Manifest",
    "layer_compression",
    "parse_config",
    "parse_manifest",
    "served_digest",
    "sha256_digest",
    "sniff_compression",
]

DOCKER_MANIFEST = "application/vnd.docker.distribution.manifest.v2+json"
DOCKER_MANIFEST_LIST = "application/vnd.docker.distribution.manifest.list.v2+json"
OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
OCI_INDEX = "application/vnd.oci.image.index.v1+json"
MANIFEST_TYPES = frozenset({DOCKER_MANIFEST, OCI_MANIFEST})
INDEX_TYPES = frozenset({DOCKER_MANIFEST_LIST, OCI_INDEX})
ACCEPT_MANIFESTS = f"{OCI_MANIFEST}, {OCI_INDEX}, {DOCKER_MANIFEST}, {DOCKER_MANIFEST_LIST}"
BUNDLE_LABEL = "dev.carvel.imgpkg.bundle"
MAX_CONFIG_BYTES = 64 << 20  # an image config is a few KiB: a larger one is neither fetched nor read into memory

LAYER_GZIP = "gzip"
LAYER_PLAIN = "tar"
LAYER_ZSTD = "zstd"
_LAYER_TYPES = {
    "application/vnd.docker.image.rootfs.diff.tar.gzip": LAYER_GZIP,
    "application/vnd.oci.image.layer.v1.tar+gzip": LAYER_GZIP,
    "application/vnd.oci.image.layer.nondistributable.v1.tar+gzip": LAYER_GZIP,
    "application/vnd.docker.image.rootfs.foreign.diff.tar.gzip": LAYER_GZIP,
    "application/vnd.docker.image.rootfs.diff.tar": LAYER_PLAIN,
    "application/vnd.oci.image.layer.v1.tar": LAYER_PLAIN,
    "application/vnd.oci.image.layer.nondistributable.v1.tar": LAYER_PLAIN,
    "application/vnd.oci.image.layer.v1.tar+zstd": LAYER_ZSTD,
    "application/vnd.oci.image.layer.nondistributable.v1.tar+zstd": LAYER_ZSTD,
}


def sha256_digest(data: bytes) -> Digest:
    """The digest of some bytes."""
    return Digest(hashlib.sha256(data).hexdigest())


_NOTHING: Mapping[str, str] = MappingProxyType({})


@dataclass(frozen=True, kw_only=True)
class Descriptor:
    """A content descriptor: media type, digest and size."""

    media_type: str
    digest: Digest
    size: int
    annotations: Mapping[str, str] = field(default_factory=lambda: _NOTHING, compare=False)  # read-only


@dataclass(frozen=True, kw_only=True)
class Manifest:
    """An image manifest (Docker v2 schema 2 or OCI)."""

    media_type: str
    config: Descriptor
    layers: tuple[Descriptor, ...]

    @property
    def blobs(self) -> tuple[Descriptor, ...]:
        """Config first, then layers."""
        return (self.config, *self.layers)


@dataclass(frozen=True, kw_only=True)
class Index:
    """An image index or Docker manifest list."""

    media_type: str
    manifests: tuple[Descriptor, ...]


@dataclass(frozen=True, kw_only=True)
class ImageConfig:
    """The parts of an image config ocivendir reads: its labels."""

    labels: Mapping[str, str]  # read-only: a parsed config may serve many calls (`oci/parsed.py`)

    @property
    def is_bundle(self) -> bool:
        """An imgpkg bundle has the bundle label, whatever its value."""
        return BUNDLE_LABEL in self.labels


def served_digest(text: str, where: str) -> Digest:
    """A digest a registry served (in a manifest or a header): malformed, it is the registry's fault (exit 1)."""
    try:
        return parse_digest(text)
    except BadReference as exc:
        raise RegistryError(f"{where}: the registry served an invalid digest: {exc.message}") from None


def _descriptor(raw: Any, where: str) -> Descriptor:  # noqa: ANN401 - raw JSON
    if not isinstance(raw, dict):
        raise UnsupportedMediaType(f"{where}: expected a descriptor object")
    try:
        size, digest_text = raw["size"], raw["digest"]
    except KeyError as exc:
        raise UnsupportedMediaType(f"{where}: descriptor lacks {exc.args[0]!r}") from None
    if not isinstance(size, int) or isinstance(size, bool) or size < 0:
        raise UnsupportedMediaType(f"{where}: descriptor has an invalid size")
    media_type = _typed(raw, "mediaType", str, "", where)
    annotations = _typed(raw, "annotations", dict, {}, where)
    if not isinstance(digest_text, str) or not all(isinstance(value, str) for value in annotations.values()):
        raise UnsupportedMediaType(f"{where}: descriptor has a digest or an annotation that is not a string")
    digest = served_digest(digest_text, where)
    return Descriptor(media_type=media_type, digest=digest, size=size,
                      annotations=MappingProxyType(dict(annotations)) if annotations else _NOTHING)  # fmt: skip


def _typed(doc: dict[str, Any], key: str, kind: type, default: Any, where: str) -> Any:  # noqa: ANN401 - raw JSON
    """`doc[key]` if it holds a `kind` (JSON null or absent: `default`); any other type is refused, as Go refuses it."""
    value = doc.get(key)
    if value is None:
        return default
    if not isinstance(value, kind):
        raise UnsupportedMediaType(f"{where}: {key!r} is {_json_type(value)}, not {_JSON_TYPES[kind]}")
    return value


def _json_type(value: object) -> str:
    """JSON's name for a decoded value's type (objects may be a dict subclass that remembers repeated keys)."""
    return next(name for kind, name in _JSON_TYPES.items() if isinstance(value, kind))


_JSON_TYPES = {
    dict: "an object",
    list: "an array",
    str: "a string",
    bool: "a boolean",  # before int: a bool is an int too
    int: "a number",
    float: "a number",
}


def parse_manifest(raw: bytes, media_type: str | None = None) -> Manifest | Index:
    """Parse manifest bytes; the `mediaType` field wins over the Content-Type the registry sent."""
    try:
        doc = jsondoc.go_loads(raw, object_pairs_hook=gokeys.with_repeats)
    except ValueError as exc:
        raise UnsupportedMediaType(f"manifest is not valid JSON: {exc}") from None
    if not isinstance(doc, dict):
        raise UnsupportedMediaType("manifest is not a JSON object")
    gokeys.check(doc, gokeys.MANIFEST_OR_INDEX, "manifest")
    kind = str(doc.get("mediaType") or media_type or "")
    if not kind:
        kind = OCI_INDEX if "manifests" in doc else OCI_MANIFEST
    if kind in INDEX_TYPES:
        entries = _typed(doc, "manifests", list, [], "index")
        return Index(media_type=kind, manifests=tuple(_descriptor(m, "index entry") for m in entries))
    if kind not in MANIFEST_TYPES:
        raise UnsupportedMediaType(f"unsupported manifest media type '{kind}'")
    version = doc.get("schemaVersion")  # 2, the only schema version of both formats (2.0 is no int to Go)
    if version != 2 or not isinstance(version, int):  # noqa: PLR2004
        raise UnsupportedMediaType(f"unsupported manifest schemaVersion {doc.get('schemaVersion')!r}")
    layers = _typed(doc, "layers", list, [], "manifest")
    return Manifest(
        media_type=kind,
        config=_descriptor(doc.get("config"), "config"),
        layers=tuple(_descriptor(layer, "layer") for layer in layers),
    )


def parse_config(raw: bytes) -> ImageConfig:
    """Read the labels of an image config."""
    try:
        doc = jsondoc.go_loads(raw, object_pairs_hook=gokeys.with_repeats)
    except ValueError as exc:
        raise UnsupportedMediaType(f"image config is not valid JSON: {exc}") from None
    gokeys.check(doc, gokeys.CONFIG_FILE, "image config")
    check_config_types(doc, raw)
    config = doc.get("config") if isinstance(doc, dict) else None
    labels = config.get("Labels") if isinstance(config, dict) else None
    if not isinstance(labels, dict):
        labels = {}
    return ImageConfig(labels=MappingProxyType({str(k): str(v) for k, v in labels.items()}))


_MAGIC = ((b"\x1f\x8b", LAYER_GZIP), (b"\x28\xb5\x2f\xfd", LAYER_ZSTD))
MAGIC_BYTES = 4


def sniff_compression(head: bytes) -> str:
    """`gzip`, `zstd` or `tar` from a layer's first bytes, as go-containerregistry decides (not by media type).

    imgpkg reads a `…nondistributable.v1.tar` layer that holds gzip data, for one, as gzip.
    """
    return next((kind for magic, kind in _MAGIC if head.startswith(magic)), LAYER_PLAIN)


def layer_compression(media_type: str) -> str:
    """`gzip`, `tar` or `zstd` for a layer media type; anything else is an error naming it."""
    try:
        return _LAYER_TYPES[media_type]
    except KeyError:
        raise UnsupportedMediaType(f"unsupported layer media type '{media_type}'") from None
