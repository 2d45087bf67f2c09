"""Manifests, indexes, image configs, images.yml: what ocivendir accepts reads as Go reads it (issue 22.4).

tests/golden/goyaml/manifests.jsonl holds 400 seeded random documents whose keys vary in case (`Layers`, `LAYERS`),
use the two non-ASCII runes Go folds onto ASCII (U+017F, U+212A), repeat, or are unknown, and go-containerregistry's
reading of each (ParseManifest, ParseIndexManifest, ParseConfigFile: encoding/json, as imgpkg, vendir and crane read
them; README beside it). ocivendir refuses a document whose keys Go would match otherwise; every document it accepts
must give what Go gave. imageslocks.jsonl does the same for images.yml against imgpkg's own reader (go-yaml v2
strict, then encoding/json).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ocivendir import jsondoc
from ocivendir.errors import ImagesLockError, OcivendirError, UnsupportedMediaType
from ocivendir.gofold import go_fold
from ocivendir.goyaml.load import field
from ocivendir.oci.gokeys import JSONObject, with_repeats
from ocivendir.oci.imageslock import ImageLocation, parse_image_locations, parse_images_lock
from ocivendir.oci.manifest import Descriptor, Index, Manifest, parse_config, parse_manifest

GOLDEN = Path(__file__).resolve().parents[1] / "golden" / "goyaml" / "manifests.jsonl"
ROWS = [json.loads(line) for line in GOLDEN.read_text().split("\n") if line]
DIGEST = "sha256:" + "a" * 64


def _descriptor(d: Descriptor) -> list[object]:
    return [d.media_type, str(d.digest), d.size, d.annotations]


def _ours(row: dict[str, object]) -> object:
    """What ocivendir reads, in the recording's form; None when it refuses the document."""
    raw = str(row["document"]).encode()
    try:
        if row["kind"] == "labels":
            return parse_config(raw).labels
        parsed = parse_manifest(raw)
    except OcivendirError:
        return None
    if isinstance(parsed, Index):
        return {"mediaType": parsed.media_type, "manifests": [_descriptor(m) for m in parsed.manifests]}
    assert isinstance(parsed, Manifest)
    return {
        "mediaType": parsed.media_type,
        "schemaVersion": 2,
        "config": _descriptor(parsed.config),
        "layers": [_descriptor(layer) for layer in parsed.layers],
    }


def _exact(row: dict[str, object]) -> object:
    """What a reader matching names exactly (Python's json, ocivendir before) would take for the layers or labels."""
    doc = json.loads(str(row["document"]))
    if row["kind"] == "labels":
        return (doc.get("config") or {}).get("Labels") or {}
    return [
        [d.get("mediaType", ""), d.get("digest"), d.get("size")]
        for d in doc.get((row["kind"] == "index" and "manifests") or "layers") or []
    ]


def _go_view(row: dict[str, object]) -> object:
    go = row["go"]
    if row["kind"] == "labels" or not isinstance(go, dict) or "error" in go:
        return go
    return [entry[:3] for entry in go["manifests" if row["kind"] == "index" else "layers"]]


def _agrees(ours: object, go: object) -> bool:
    """The same reading; a document without mediaType has ocivendir's default kind where Go has "" (no key matter)."""
    if isinstance(ours, dict) and isinstance(go, dict) and go.get("mediaType") == "":
        ours = {**ours, "mediaType": ""}
    return ours == go


def test_every_accepted_document_reads_as_go_reads_it() -> None:
    accepted = [(row, ours) for row in ROWS if (ours := _ours(row)) is not None]
    assert [row["document"] for row, ours in accepted if not _agrees(ours, row["go"])] == []
    assert len(accepted) > 150


def test_every_document_an_exact_reader_would_read_otherwise_than_go_is_refused() -> None:
    differing = [row for row in ROWS if not isinstance(row["go"], dict) or "error" not in row["go"]]
    differing = [row for row in differing if _exact(row) != _go_view(row)]
    assert len(differing) > 40
    assert [row["document"] for row in differing if _ours(row) is not None] == []


@pytest.mark.parametrize(
    ("document", "problem"),
    [
        ('{"schemaVersion":2,"config":{"digest":"D","size":1},"layers":[],"Layers":[{"digest":"D","size":2}]}',
         "manifest has the key 'Layers', which Go's encoding/json reads as the field 'layers'"),
        ('{"schemaVersion":2,"config":{"digest":"D","size":1},"layers":[],"layers":[]}',
         "manifest has the field 'layers' more than once"),
        ('{"schemaVersion":2,"config":{"digest":"D","\\u017fize":1,"size":1},"layers":[]}',
         "manifest: config has the key '\u017fize', which Go's encoding/json reads as the field 'size'"),
        ('{"schemaVersion":2,"config":{"digest":"D","size":1},"layers":[{"digest":"D","size":1,"MediaType":"x"}]}',
         "manifest: layers[0] has the key 'MediaType'"),
        ('{"manifests":[{"digest":"D","size":1,"platform":{"OS":"linux"}}]}',
         "manifest: manifests[0]: platform has the key 'OS'"),
    ],
)  # fmt: skip
def test_a_key_go_matches_otherwise_is_refused_with_the_key_and_the_field(document: str, problem: str) -> None:
    with pytest.raises(UnsupportedMediaType) as caught:
        parse_manifest(document.replace('"D"', f'"{DIGEST}"').encode())
    assert problem in str(caught.value)
    assert "Go tools (imgpkg, vendir, crane) would read it otherwise; refused" in str(caught.value)


def test_labels_under_a_case_variant_or_given_twice_are_refused_not_missed() -> None:
    for config in ('{"config":{"labels":{"dev.carvel.imgpkg.bundle":""}}}',
                   '{"config":{"Labels":{"dev.carvel.imgpkg.bundle":""},"Labels":{}}}',  # Go merges the two maps
                   '{"Config":{"Labels":{}}}'):  # fmt: skip
        with pytest.raises(UnsupportedMediaType, match="image config"):
            parse_config(config.encode())
    assert parse_config(b'{"config":{"Labels":{"dev.carvel.imgpkg.bundle":""},"labels2":1},"Labels":1}').is_bundle


def test_unknown_keys_and_map_keys_differing_in_case_stay_accepted() -> None:
    doc = (f'{{"schemaVersion":2,"config":{{"digest":"{DIGEST}","size":1,"annotations":{{"a":"1","A":"2"}}}},'
           f'"layers":[],"extension":{{"Layers":1,"layers":2}},"layersx":[]}}')  # fmt: skip
    parsed = parse_manifest(doc.encode())
    assert isinstance(parsed, Manifest)
    assert parsed.config.annotations == {"a": "1", "A": "2"}


def test_go_folds_only_long_s_and_the_kelvin_sign_onto_ascii() -> None:
    assert [go_fold(k) for k in ("Layers", "\u017fize", "\u212aind", "Ä", "İmage", "size\u0307")] == [
        "layers", "size", "kind", None, None, None,
    ]  # fmt: skip


def test_yaml_read_into_go_structs_folds_field_names_as_go_does() -> None:
    assert field({"paths": 1, "path\u017f": 2}, "paths") == 2  # sorted keys: the long s comes last, so it wins
    assert field({"kind": "a", "\u212aind": "b"}, "kind") == "b"
    head = "apiVersion: imgpkg.carvel.dev/v1alpha1\nkind: ImageLocations\n"
    text = f"{head}images:\n- image: a.io/x@{DIGEST}\nimage\u017f:\n- image: b.io/y@{DIGEST}\n  isBundle: true\n"
    assert parse_image_locations(text.encode()) == (ImageLocation(image=f"b.io/y@{DIGEST}", is_bundle=True),)
    strict = f"{head.replace('ImageLocations', 'ImagesLock')}Images:\n- image: a.io/x@{DIGEST}\n"
    with pytest.raises(ImagesLockError, match='unknown field "Images"'):
        parse_images_lock(strict.encode())  # imgpkg would take it; refusing is the safe side


def test_reading_with_repeats_gives_json_loads_values_and_names_each_objects_repeated_keys() -> None:
    text = b'{"a":1,"a":{"b":2,"b":3,"c":[{"x":1,"x":2}]},"d":[{"e":1}],"e":{}}'
    doc = jsondoc.loads(text, object_pairs_hook=with_repeats)
    assert doc == json.loads(text)
    assert isinstance(doc, JSONObject)
    assert doc.repeated == {"a"}
    assert doc["a"].repeated == {"b"}
    assert doc["a"]["c"][0].repeated == {"x"}
    assert doc["d"][0].repeated == doc["e"].repeated == frozenset()
    assert type(jsondoc.loads(text)) is dict


LOCKS = [json.loads(line) for line in (GOLDEN.parent / "imageslocks.jsonl").read_text().split("\n") if line]


def _lock(document: str) -> list[list[object]] | None:
    try:
        return [[entry.image, entry.annotations] for entry in parse_images_lock(document.encode()).images]
    except OcivendirError:
        return None


def test_every_images_lock_accepted_reads_as_imgpkg_reads_it_and_variant_keys_are_refused() -> None:
    accepted = [(row, ours) for row in LOCKS if (ours := _lock(row["document"])) is not None]
    assert [row["document"] for row, ours in accepted if ours != row["go"]] == []
    assert len(accepted) > 50
    # imgpkg takes `Images:`, long-s or Kelvin spellings and `Image:` beside `image:` (the greatest key winning): refused
    variants = [row for row in LOCKS if isinstance(row["go"], list) and _lock(row["document"]) is None]
    assert len(variants) > 50
