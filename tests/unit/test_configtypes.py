"""An image config, manifest or tag list Go's encoding/json will not decode is refused (adversarial review).

Each refusal here was checked against imgpkg 0.43.1, which failed on the same document; the times against Go 1.22's
`json.Unmarshal` into a `time.Time`, which is how imgpkg reads a config's `created`.
"""

from __future__ import annotations

import json

import pytest

from ocivendir.errors import UnsupportedMediaType
from ocivendir.oci.configtypes import is_rfc3339
from ocivendir.oci.manifest import parse_config, parse_manifest

DIGEST = "sha256:" + "a" * 64
GO_TIMES = {
    "2024-01-02T03:04:05Z": True, "2024-01-02T03:04:05.123456789Z": True, "2024-01-02T03:04:05+01:00": True,
    "2024-01-02T03:04:05-23:59": True, "2024-01-02T03:04:05+99:99": True, "2024-01-02T03:04:05,5Z": True,
    "2024-02-29T00:00:00Z": True, "0000-02-29T00:00:00Z": True, "2024-01-02T03:04:05.1234567891234Z": True,
    "2020-01-01T1:00:00Z": True, "2020-01-01T0:00:00.5+01:00": True, "2020-01-01T:00:00Z": False,
    "2020-01-01T123:00:00Z": False, "2020-01-01T24:00:00Z": False,
    "2024-01-02t03:04:05Z": False, "2024-01-02T03:04:05z": False, "2024-02-30T00:00:00Z": False,
    "2023-02-29T00:00:00Z": False, "2024-01-02T24:00:00Z": False, "2024-01-02T03:60:05Z": False,
    "2024-01-02T03:04:60Z": False, "2024-01-02T03:04:05.Z": False, "2024-01-02T03:04:05,Z": False,
    "2024-01-02T03:04:05+0100": False, "2024-01-02T03:04:05+1:00": False, "2024-01-02T03:04:05+ab:00": False,
    "2024-01-02": False, "yesterday": False, "2024-1-02T03:04:05Z": False, "+2024-01-02T03:04:05Z": False,
    "2024-01-02 03:04:05Z": False, "2024-13-02T03:04:05Z": False, "2024-00-02T03:04:05Z": False,
    "2024-01-00T03:04:05Z": False, "2024-01-02T03:04:05Z ": False, "\uff19\uff19\uff19\uff19-01-02T03:04:05Z": False,
}  # fmt: skip


@pytest.mark.parametrize(("text", "taken"), GO_TIMES.items(), ids=GO_TIMES.keys())
def test_a_time_is_what_go_takes_for_a_time(text: str, taken: bool) -> None:
    assert is_rfc3339(text) is taken


GOOD = {
    "architecture": "amd64", "created": "2024-01-02T03:04:05Z", "history": [{"created": None, "empty_layer": True}],
    "rootfs": {"type": "layers", "diff_ids": [DIGEST]},
    "config": {"Labels": {"dev.carvel.imgpkg.bundle": "true"}, "Env": ["A=b"], "Volumes": {"/v": {}},
               "Healthcheck": {"Interval": 30000000000, "Test": None}, "unknown": [1, {}]},
    "unknown": {"anything": 1.5},
}  # fmt: skip


def test_a_config_go_decodes_is_read() -> None:
    assert parse_config(json.dumps(GOOD).encode()).labels == {"dev.carvel.imgpkg.bundle": "true"}
    assert parse_config(b"null").labels == {}  # Go leaves every field empty


BAD = {
    "label-number": ({"config": {"Labels": {"a": 5}}}, "'config.Labels.a' is a number, not a string"),
    "history-object": ({"history": {}}, "'history' is an object, not an array"),
    "created-text": ({"created": "yesterday"}, "'created' is not an RFC 3339 time"),
    "created-number": ({"created": 5}, "'created' is not an RFC 3339 time"),
    "history-time": ({"history": [{"created": "2024-02-30T00:00:00Z"}]}, "'history[0].created' is not an RFC 3339"),
    "diff-id": ({"rootfs": {"diff_ids": ["sha256:abc"]}}, "'rootfs.diff_ids[0]' is not a sha256 digest"),
    "interval-fraction": ({"config": {"Healthcheck": {"Interval": 1.5}}}, "'config.Healthcheck.Interval' is a fraction"),
    "volume-number": ({"config": {"Volumes": {"/v": 1}}}, "'config.Volumes./v' is a number, not an object"),
    "env-string": ({"config": {"Env": "A=b"}}, "'config.Env' is a string, not an array"),
    "tty-string": ({"config": {"Tty": "true"}}, "'config.Tty' is a string, not a boolean"),
    "os-number": ({"os": 1}, "'os' is a number, not a string"),
}  # fmt: skip


@pytest.mark.parametrize(("doc", "words"), BAD.values(), ids=BAD.keys())
def test_a_config_value_go_will_not_decode_is_refused(doc: object, words: str) -> None:
    with pytest.raises(UnsupportedMediaType) as caught:
        parse_config(json.dumps(doc).encode())
    assert caught.value.message.startswith(f"image config: {words}")


@pytest.mark.parametrize("raw", [b"[]", b'"text"', b"5"])
def test_a_config_that_is_not_an_object_is_refused(raw: bytes) -> None:
    with pytest.raises(UnsupportedMediaType, match="not a JSON object"):
        parse_config(raw)


MANIFEST = {"schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
            "config": {"mediaType": "application/vnd.oci.image.config.v1+json", "size": 2, "digest": DIGEST},
            "layers": []}  # fmt: skip


@pytest.mark.parametrize(
    ("raw", "words"),
    [
        (b"\xef\xbb\xbf" + json.dumps(MANIFEST).encode(), "manifest is not valid JSON: Unexpected UTF-8 BOM"),
        (json.dumps(MANIFEST).encode("utf-16-le"), "manifest is not valid JSON"),
        (json.dumps({**MANIFEST, "schemaVersion": 2.0}).encode(), "unsupported manifest schemaVersion 2.0"),
        (json.dumps({**MANIFEST, "annotations": {"a": float("nan")}}).encode(), "manifest is not valid JSON: NaN"),
        (json.dumps(MANIFEST).encode().replace(b'"layers"', b'"lay\xffers"'), "manifest is not valid JSON"),
    ],
    ids=["byte-order-mark", "utf-16", "schema-version-float", "nan", "not-utf-8"],
)
def test_a_manifest_go_cannot_read_is_refused(raw: bytes, words: str) -> None:
    assert parse_manifest(json.dumps(MANIFEST).encode())  # the same manifest, as Go writes it, is read
    with pytest.raises(UnsupportedMediaType) as caught:
        parse_manifest(raw)
    assert caught.value.message.startswith(words)


def test_a_time_written_with_a_json_escape_is_refused_as_go_reads_the_raw_bytes() -> None:
    # time.Time.UnmarshalJSON takes the bytes between the quotes as they are: `\u005a` is no `Z` to it (Go 1.22)
    escaped = b'{"created": "2020-01-01T00:00:00\\u005a"}'
    with pytest.raises(UnsupportedMediaType, match="is written with a JSON escape"):
        parse_config(escaped)
    twice = b'{"created": "2020-01-01T00:00:00Z", "history": [{"created": "2020-01-01T00:00:00\\u005a"}]}'
    with pytest.raises(UnsupportedMediaType, match="is written with a JSON escape"):
        parse_config(twice)
    assert parse_config(b'{"created": "2020-01-01T00:00:00Z", "history": [{"created": "2020-01-01T00:00:00Z"}]}')
