"""A process that serves many calls parses each manifest and config once, by its bytes, and hands out read-only forms."""

from __future__ import annotations

import json

import pytest

from ocivendir.errors import UnsupportedMediaType
from ocivendir.oci import parsed
from ocivendir.oci.manifest import OCI_MANIFEST, Manifest

LAYER = {"mediaType": "application/vnd.oci.image.layer.v1.tar+gzip", "digest": "sha256:" + "a" * 64, "size": 3,
         "annotations": {"org.opencontainers.image.title": "x"}}  # fmt: skip
CONFIG = {"mediaType": "application/vnd.oci.image.config.v1+json", "digest": "sha256:" + "b" * 64, "size": 2}


def manifest_bytes(**extra: object) -> bytes:
    return json.dumps(
        {"schemaVersion": 2, "mediaType": OCI_MANIFEST, "config": CONFIG, "layers": [LAYER], **extra}
    ).encode()


def test_the_same_bytes_are_parsed_once_and_others_anew() -> None:
    raw = manifest_bytes()
    first = parsed.manifest(raw)
    assert isinstance(first, Manifest)
    assert parsed.manifest(bytes(raw)) is first
    assert parsed.manifest(manifest_bytes(annotations={"a": "b"})) is not first
    assert parsed.manifest(raw, OCI_MANIFEST) is not first  # the media type it was served as is part of the key
    config = parsed.config(b'{"config":{"Labels":{"dev.carvel.imgpkg.bundle":""}}}')
    assert config.is_bundle
    assert parsed.config(b'{"config":{"Labels":{"dev.carvel.imgpkg.bundle":""}}}') is config


def test_what_is_handed_out_cannot_be_changed_by_a_call() -> None:
    """Annotations and labels are read-only: a call cannot change what the next call is handed."""
    layer = parsed.manifest(manifest_bytes()).layers[0]  # type: ignore[union-attr]
    with pytest.raises(TypeError):
        layer.annotations["org.opencontainers.image.title"] = "y"  # type: ignore[index]
    labels = parsed.config(b'{"config":{"Labels":{"a":"b"}}}').labels
    with pytest.raises(TypeError):
        labels["a"] = "c"  # type: ignore[index]


def test_a_failure_is_never_remembered() -> None:
    bad = b'{"schemaVersion": 2, "mediaType": "application/x-nope"}'
    for _ in range(2):
        with pytest.raises(UnsupportedMediaType, match="unsupported manifest media type"):
            parsed.manifest(bad)


def test_at_most_size_are_kept() -> None:
    for number in range(parsed.SIZE + 5):
        parsed.manifest(manifest_bytes(annotations={"n": str(number)}))
    assert len(parsed._manifests) == parsed.SIZE


def test_only_small_documents_are_kept_so_a_fellow_caller_cannot_pin_a_worker_s_memory() -> None:
    """A parsed form takes about ten times its bytes (a 4 MiB manifest of annotations: ~35 MiB of objects).

    Kept by count alone, SIZE of them would stay in a worker after the calls that read them; a document larger than
    KEPT_BYTES is parsed for its call and not kept, so what stays is at most SIZE small ones.
    """
    many = {f"k{n}": "" for n in range(100_000)}  # a 1 MiB document
    large = manifest_bytes(annotations=many)
    assert parsed.manifest(large) is not parsed.manifest(large)
    labels = json.dumps({"config": {"Labels": many}}).encode()
    assert parsed.config(labels) is not parsed.config(labels)
    small = manifest_bytes(annotations={"small": "yes"})
    assert parsed.manifest(small) is parsed.manifest(small)
    assert len(small) <= parsed.KEPT_BYTES < len(labels) < len(large)
