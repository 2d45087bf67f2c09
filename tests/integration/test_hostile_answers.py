"""Malformed answers from a registry are registry errors naming it (exit 1, one of ocivendir's codes), never Python's.

A hostile registry on loopback serves, one row at a time, a header or a manifest field of the wrong form, or a status
that is no answer at all (`101 Switching Protocols`). Each row names the error code and the words the message must
carry; the message must also name the registry. `internal-error` (a Python exception turned into a message: today's
`TypeError` for `"annotations": [1]`, `ValueError` for `Content-Length: abc`) is never an answer.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from ocivendir.oci.manifest import MAX_CONFIG_BYTES
from tests.conftest import run_cli
from tests.support.builders import Image, make_image, sha
from tests.support.hostile import Reply, Seen, hostile, image_routes, write_tag_selection

IMAGE = make_image({"a.txt": "a"})
REPO = "hostile/img"
OCI_INDEX = "application/vnd.oci.image.index.v1+json"


def _error(result: Any) -> dict[str, str]:
    assert result.exit_code == 1, result.stderr
    error: dict[str, str] = json.loads(result.stdout)["error"]
    assert error["code"] != "internal-error", error
    return error


def _with(change: Callable[[dict[str, Any]], object]) -> Image:
    """`IMAGE` with its manifest changed by `change` (a new digest, which the pull asks for)."""
    doc = json.loads(IMAGE.manifest)
    change(doc)
    return Image(config=IMAGE.config, layers=IMAGE.layers, manifest=json.dumps(doc).encode())


def _layer(key: str, value: object) -> Callable[[dict[str, Any]], object]:
    return lambda doc: doc["layers"][0].__setitem__(key, value)


def _top(key: str, value: object) -> Callable[[dict[str, Any]], object]:
    return lambda doc: doc.__setitem__(key, value)


def _index(doc: dict[str, Any]) -> None:
    doc.clear()
    doc.update({"schemaVersion": 2, "mediaType": OCI_INDEX, "manifests": 5})


MANIFEST_FIELDS = {
    "annotations-array": (_layer("annotations", [1]), "layer: 'annotations' is an array, not an object"),
    "annotations-string": (_layer("annotations", "a=b"), "layer: 'annotations' is a string, not an object"),
    "annotation-number": (_layer("annotations", {"a": 1}), "layer: descriptor has a digest or an annotation that"),
    "layers-number": (_top("layers", 5), "manifest: 'layers' is a number, not an array"),
    "layers-object": (_top("layers", {"a": 1}), "manifest: 'layers' is an object, not an array"),
    "media-type-number": (_layer("mediaType", 5), "layer: 'mediaType' is a number, not a string"),
    "media-type-array": (_layer("mediaType", ["x"]), "layer: 'mediaType' is an array, not a string"),
    "digest-number": (_layer("digest", 5), "layer: descriptor has a digest or an annotation that is not a string"),
    "size-string": (_layer("size", "5"), "layer: descriptor has an invalid size"),
    "size-fraction": (_layer("size", 1.5), "layer: descriptor has an invalid size"),
    "config-array": (_top("config", []), "config: expected a descriptor object"),
    "index-manifests-number": (_index, "index: 'manifests' is a number, not an array"),
}


@pytest.mark.parametrize(("change", "words"), MANIFEST_FIELDS.values(), ids=MANIFEST_FIELDS.keys())
def test_a_manifest_field_of_the_wrong_json_type_is_an_error_naming_the_manifest(
    tmp_path: Path, change: Callable[[dict[str, Any]], object], words: str
) -> None:
    image = _with(change)
    with hostile(image_routes(REPO, image)) as server:
        result = run_cli("pull", "-i", f"{server.host}/{REPO}@{image.digest}", "-o", str(tmp_path / "o"), "--json")
    error = _error(result)
    assert error["code"] == "unsupported-media-type"
    assert error["message"].startswith(f"Reading manifest '{server.host}/{REPO}@{image.digest}': {words}")
    assert not (tmp_path / "o").exists()


def _head(*headers: tuple[str, str], status: int = 200, reason: str = "OK") -> Reply:
    """A HEAD answer for the tag: the manifest's digest and type, and `headers`."""
    found = [
        ("Docker-Content-Digest", IMAGE.digest),
        ("Content-Type", "application/vnd.docker.distribution.manifest.v2+json"),
    ]
    return Reply(status=status, reason=reason, headers=[*found, *headers])


LAYER = f"blobs/{sha(IMAGE.layers[0])}"
SWITCHING = {"status": 101, "reason": "Switching Protocols", "headers": [("Upgrade", "h2c"), ("Connection", "Upgrade")]}
ANSWERS = {
    "head-length-letters": ("manifests/v1", _head(("Content-Length", "abc")), "registry-error",
                            "sent an invalid Content-Length 'abc'"),
    "head-length-negative": ("manifests/v1", _head(("Content-Length", "-1")), "registry-error",
                             "sent an invalid Content-Length '-1'"),
    "head-length-exponent": ("manifests/v1", _head(("Content-Length", "1e3")), "registry-error",
                             "sent an invalid Content-Length '1e3'"),
    "head-length-superscript": ("manifests/v1", _head(("Content-Length", "\u00b2")), "registry-error",
                                "sent an invalid Content-Length '\u00b2'"),
    "head-length-huge": ("manifests/v1", _head(("Content-Length", "9" * 40)), "registry-error",
                         "sent an invalid Content-Length '9999"),
    "head-101": ("manifests/v1", _head(status=101, reason="Switching Protocols"), "registry-error",
                 "the registry answered 101"),
    "get-manifest-101": (f"manifests/{IMAGE.digest}", Reply(**SWITCHING), "registry-error", "the registry answered 101"),
    "get-blob-101": (LAYER, Reply(**SWITCHING), "registry-error", "the registry answered 101"),
    "get-length-letters": (f"manifests/{IMAGE.digest}", Reply(headers=[("Content-Length", "abc")], body=b"{}"),
                           "registry-unreachable", "an invalid or conflicting Content-Length"),
    "retry-after-superscript": (LAYER, Reply(status=503, reason="Busy", headers=[("Retry-After", "\u00b2")]),
                                "registry-unreachable", "the registry answered 503"),
    "retry-after-year-overflow": (LAYER, Reply(status=503, reason="Busy", headers=[
        ("Retry-After", "Mon, 1 Jan 99999999999 00:00:00 GMT")]), "registry-unreachable", "the registry answered 503"),
}  # fmt: skip


@pytest.mark.parametrize(("path", "reply", "code", "words"), ANSWERS.values(), ids=ANSWERS.keys())
def test_a_malformed_header_or_status_is_an_error_naming_the_registry(
    tmp_path: Path, path: str, reply: Reply, code: str, words: str
) -> None:
    """Pulled by tag: a HEAD resolves it, then the manifest and blobs are fetched by digest."""
    with hostile(image_routes(REPO, IMAGE, **{path: reply})) as server:
        result = run_cli("pull", "-i", f"{server.host}/{REPO}:v1", "-o", str(tmp_path / "o"), "--json")
    error = _error(result)
    assert error["code"] == code
    assert words in error["message"]
    assert server.host in error["message"]
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize(
    ("link", "words"),
    [
        ('<http://[::1/v2/x?last=a>; rel="next"', "the next page's Link is not a URL: 'http://[::1/v2/x?last=a'"),
        ("", "the registry answered 101"),
    ],
    ids=["link-unclosed-ipv6", "tags-101"],
)
def test_a_malformed_tag_list_answer_is_an_error_naming_the_registry(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, link: str, words: str
) -> None:
    monkeypatch.setenv("OCIVENDIR_CACHE_DIR", str(tmp_path / "cache"))

    def route(request: Seen) -> Reply:
        if not link:
            return Reply(**SWITCHING)
        return Reply(headers=[("Link", link), ("Content-Type", "application/json")], body=b'{"tags":["1.0.0"]}')

    with hostile(route) as server:
        write_tag_selection(tmp_path / "vendir.yml", f"{server.host}/{REPO}")
        result = run_cli("sync", "--chdir", str(tmp_path), "--json")
    error = _error(result)
    assert f"Listing tags of '{server.host}/{REPO}': {words}" in error["message"]
    assert server.paths() == [f"/v2/{REPO}/tags/list?n=1000"]


@pytest.mark.parametrize(
    ("body", "words"),
    [
        (b'{"tags":["1.0.0"],"Tags":["9.9.9"]}', "the tag list has the key 'Tags', which Go's encoding/json reads as"),
        (b'{"Tags":["9.9.9"]}', "the tag list has the key 'Tags'"),
        (b'{"tags":["1.0.0"],"tags":["9.9.9"]}', "the tag list has the field 'tags' more than once"),
        (b'\xef\xbb\xbf{"tags":["1.0.0"]}', "invalid JSON in the answer"),
    ],
    ids=["tags-beside-Tags", "Tags-alone", "tags-twice", "byte-order-mark"],
)
def test_a_tag_list_go_would_read_otherwise_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, body: bytes, words: str
) -> None:
    # vendir reads `Tags` as `tags` (the last wins) and would lock 9.9.9 where ours listed 1.0.0 (adversarial review)
    monkeypatch.setenv("OCIVENDIR_CACHE_DIR", str(tmp_path / "cache"))
    with hostile(lambda _request: Reply(headers=[("Content-Type", "application/json")], body=body)) as server:
        write_tag_selection(tmp_path / "vendir.yml", f"{server.host}/{REPO}")
        result = run_cli("sync", "--chdir", str(tmp_path), "--json")
    error = _error(result)
    assert f"Listing tags of '{server.host}/{REPO}': {words}" in error["message"]


def test_a_config_larger_than_an_image_config_may_be_is_refused_before_it_is_fetched(tmp_path: Path) -> None:
    # a config is read whole into memory: a registry's 400 MiB one was fetched, cached and read (adversarial review)
    image = _with(lambda doc: doc["config"].__setitem__("size", MAX_CONFIG_BYTES + 1))
    with hostile(image_routes(REPO, image)) as server:
        result = run_cli("pull", "-i", f"{server.host}/{REPO}@{image.digest}", "-o", str(tmp_path / "o"), "--json")
    error = _error(result)
    assert error["message"] == (
        f"Reading config of '{server.host}/{REPO}': the config is {MAX_CONFIG_BYTES + 1} bytes, more than the "
        f"{MAX_CONFIG_BYTES} an image config may be"
    )
    assert not [path for path in server.paths() if "/blobs/" in path]  # neither the config nor a layer was asked for
    assert not (tmp_path / "o").exists()
