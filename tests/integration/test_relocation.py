"""Relocation against a real registry: imgpkg's rewrite, the verdict cache, and `verify-relocation` as a CI gate."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from ocivendir.engine import pull as engine_pull
from tests.conftest import run_cli
from tests.support.builders import (
    Pusher,
    make_bundle,
    make_image,
    publish_bundle,
    publish_outer_bundle,
    relocate,
    relocate_tree,
    sha,
)
from tests.support.faults import Rule, fault_proxy
from tests.support.registry import Registry


def pull_bundle(ref: str, out: Path, cache: Path, *extra: str) -> tuple[int, dict[str, object], str]:
    result = run_cli("pull", "-b", ref, "-o", str(out), "--cache-dir", str(cache), "--json", *extra)
    return result.exit_code, json.loads(result.stdout), result.stderr


def verify(*args: str) -> tuple[int, dict[str, object], str]:
    result = run_cli("verify-relocation", *args, "--json")
    return result.exit_code, json.loads(result.stdout), result.stderr


def test_original_bundle_is_not_relocated_and_its_images_yml_is_byte_identical(
    registry: Registry, pusher: Pusher, repo_prefix: str, tmp_path: Path
) -> None:
    published = publish_bundle(pusher, repo_prefix, images=2, annotations={"kbld.carvel.dev/id": "example.com/app"})
    code, doc, _ = pull_bundle(published.ref(registry), tmp_path / "out", tmp_path / "cache")
    assert code == 0
    relocation = doc["result"]["relocation"]  # type: ignore[index]
    assert relocation["relocated"] is False
    written = (tmp_path / "out/.imgpkg/images.yml").read_text()
    assert written.startswith("---\napiVersion: imgpkg.carvel.dev/v1alpha1\nkind: ImagesLock\nimages:\n")
    result = run_cli("pull", "-b", published.ref(registry), "-o", str(tmp_path / "plain"), "--no-cache")
    assert "One or more images not found in bundle repo; skipping lock file update" in result.stderr
    code, report, _ = verify("-b", published.ref(registry), "--no-cache")
    assert code == 3
    assert report["status"] == "not-relocated"
    bundle = report["result"]["bundles"][0]  # type: ignore[index]
    assert bundle["verdict"] == "not-relocated"
    assert [i["status"] for i in bundle["images"]] == ["missing", "missing"]


def test_relocated_bundle_with_locations_image_is_rewritten_exactly_as_imgpkg_does(
    registry: Registry, pusher: Pusher, repo_prefix: str, tmp_path: Path
) -> None:
    published = publish_bundle(pusher, repo_prefix, images=1,
                               annotations={"kbld.carvel.dev/id": "example.com/app:latest"})  # fmt: skip
    relocate(pusher, published, f"{repo_prefix}/relocated")
    ref = published.ref(registry, f"{repo_prefix}/relocated")
    code, doc, _ = pull_bundle(ref, tmp_path / "out", tmp_path / "cache")
    assert code == 0
    digest = next(iter(published.images.values())).digest
    assert (tmp_path / "out/.imgpkg/images.yml").read_text() == (
        "---\napiVersion: imgpkg.carvel.dev/v1alpha1\nimages:\n- annotations:\n"
        "    kbld.carvel.dev/id: example.com/app:latest\n"
        f"  image: {registry.host}/{repo_prefix}/relocated@{digest}\nkind: ImagesLock\n"
    )
    assert doc["result"]["relocation"]["method"] == "locations"  # type: ignore[index]
    result = run_cli("pull", "-b", ref, "-o", str(tmp_path / "again"), "--no-cache")
    assert (
        f"The bundle repo ({registry.host}/{repo_prefix}/relocated) is hosting every image specified in the "
        "bundle's Images Lock file (.imgpkg/images.yml)"
    ) in result.stderr
    mark = registry.mark()
    code, report, _ = verify("-b", ref, "--cache-dir", str(tmp_path / "cache"))
    assert code == 0
    assert report["result"]["requests"]["total"] == 1  # type: ignore[index]
    assert [(m, s) for m, _, s in registry.since(mark)] == [("HEAD", 200)]
    assert report["result"]["bundles"][0]["images"][0]["status"] == "unchecked"  # type: ignore[index]


def test_relocated_without_locations_image_is_decided_by_per_image_heads(
    registry: Registry, pusher: Pusher, repo_prefix: str, tmp_path: Path
) -> None:
    published = publish_bundle(pusher, repo_prefix, images=3)
    relocate(pusher, published, f"{repo_prefix}/copy", with_locations=False)
    ref = published.ref(registry, f"{repo_prefix}/copy")
    code, doc, _ = pull_bundle(ref, tmp_path / "out", tmp_path / "cache")
    assert code == 0
    assert doc["result"]["relocation"]["relocated"] is True  # type: ignore[index]
    assert doc["result"]["relocation"]["method"] == "probes"  # type: ignore[index]
    assert f"{registry.host}/{repo_prefix}/copy@" in (tmp_path / "out/.imgpkg/images.yml").read_text()
    mark = registry.mark()
    code, report, _ = verify("-b", ref, "--cache-dir", str(tmp_path / "cache"), "--each-image")
    assert code == 0
    assert [(m, s) for m, _, s in registry.since(mark)] == [("HEAD", 200)] * 3, registry.since(mark)
    assert report["result"]["requests"]["total"] == 3  # type: ignore[index]


def test_partially_relocated_bundle_reports_the_missing_image_and_rewrites_nothing(
    registry: Registry, pusher: Pusher, repo_prefix: str, tmp_path: Path
) -> None:
    published = publish_bundle(pusher, repo_prefix, images=3)
    left_out = list(published.images)[1]
    relocate(pusher, published, f"{repo_prefix}/partial", with_locations=False, skip=[left_out])
    ref = published.ref(registry, f"{repo_prefix}/partial")
    code, doc, _ = pull_bundle(ref, tmp_path / "out", tmp_path / "cache")
    assert code == 0
    assert doc["result"]["relocation"]["relocated"] is False  # type: ignore[index]
    assert f"{registry.host}/{repo_prefix}/partial@" not in (tmp_path / "out/.imgpkg/images.yml").read_text()
    code, report, _ = verify("-b", ref, "--cache-dir", str(tmp_path / "cache"))
    assert code == 3
    statuses = {i["image"]: i["status"] for i in report["result"]["bundles"][0]["images"]}  # type: ignore[index]
    assert statuses[left_out] == "missing"
    assert sorted(statuses.values()) == ["missing", "present", "present"]
    text = run_cli("verify-relocation", "-b", ref, "--no-cache")
    assert text.exit_code == 3
    assert f"{ref}: not relocated (1 missing, 0 denied)" in text.stdout
    assert left_out in text.stdout


def test_a_denied_image_is_reported_as_denied_with_a_warning(
    registry: Registry, pusher: Pusher, repo_prefix: str, tmp_path: Path
) -> None:
    published = publish_bundle(pusher, repo_prefix, images=2)
    relocate(pusher, published, f"{repo_prefix}/guarded", with_locations=False)
    denied_digest = next(iter(published.images.values())).digest
    with fault_proxy(registry.host) as proxy:
        proxy.rules.append(Rule("HEAD", f"/v2/{repo_prefix}/guarded/manifests/{denied_digest}", status=403))
        ref = f"{proxy.host}/{repo_prefix}/guarded@{published.bundle.digest}"
        code, report, stderr = verify("-b", ref, "--no-cache")
        assert code == 3
        statuses = [i["status"] for i in report["result"]["bundles"][0]["images"]]  # type: ignore[index]
        assert statuses == ["denied", "present"]
        assert "ocivendir: Warning: access denied to" in stderr
        code, doc, stderr = pull_bundle(ref, tmp_path / "out", tmp_path / "cache")
        assert code == 0
        assert doc["result"]["relocation"]["denied"]  # type: ignore[index]
        assert "Warning: access denied" in stderr


def test_one_bundle_digest_in_two_repositories_gets_its_own_images_yml_from_one_cache(
    registry: Registry, pusher: Pusher, repo_prefix: str, tmp_path: Path
) -> None:
    published = publish_bundle(pusher, repo_prefix, images=1)
    relocate(pusher, published, f"{repo_prefix}/relocated")
    cache = tmp_path / "cache"
    assert pull_bundle(published.ref(registry, f"{repo_prefix}/relocated"), tmp_path / "a", cache)[0] == 0
    blobs = sorted(path.name for path in (cache / "blobs/sha256").iterdir())
    mark = registry.mark()
    code, doc, _ = pull_bundle(published.ref(registry), tmp_path / "b", cache)
    assert code == 0
    # the original repository never served these bytes to the cache, so it serves them now (manifest, config, layer:
    # possession is per repository); on disk they are the same blobs, stored once
    fetched = sorted(p for m, p, _ in registry.since(mark) if m == "GET")
    assert fetched == sorted(
        f"/v2/{repo_prefix}/bundle/{kind}/{digest}"
        for kind, digest in [("manifests", published.bundle.digest)]
        + [("blobs", sha(blob)) for blob in published.bundle.blobs]
    )
    assert sorted(path.name for path in (cache / "blobs/sha256").iterdir()) == blobs
    code, doc, _ = pull_bundle(published.ref(registry), tmp_path / "c", cache)
    assert doc["result"]["cache_hits"] >= 3  # type: ignore[index]
    assert doc["result"]["requests"]["total"] == 0  # type: ignore[index]
    relocated_yml = (tmp_path / "a/.imgpkg/images.yml").read_text()
    original_yml = (tmp_path / "b/.imgpkg/images.yml").read_text()
    assert f"{repo_prefix}/relocated@" in relocated_yml
    assert f"{repo_prefix}/relocated@" not in original_yml
    assert f"{repo_prefix}/img0@" in original_yml


def test_verdicts_are_cached_and_a_negative_one_is_rechecked_with_heads_only(
    own_registry: Registry, tmp_path: Path
) -> None:
    pusher = Pusher(own_registry)
    published = publish_bundle(pusher, "recheck", images=2)
    cache = tmp_path / "cache"
    ref = published.ref(own_registry)
    assert pull_bundle(ref, tmp_path / "one", cache)[0] == 0
    mark = own_registry.mark()
    code, doc, _ = pull_bundle(ref, tmp_path / "two", cache)
    assert code == 0
    assert doc["result"]["requests"]["total"] == 0  # type: ignore[index]
    code, doc, _ = pull_bundle(ref, tmp_path / "three", cache, "--relocation-recheck", "0")
    assert code == 0
    logged = own_registry.since(mark)
    assert [m for m, _, _ in logged] == ["HEAD", "HEAD"]  # the locations tag, then the recorded missing image
    own_registry.stop()
    code, doc, stderr = pull_bundle(ref, tmp_path / "four", cache, "--relocation-recheck", "0")
    assert code == 0
    assert "Warning: could not re-check relocation" in stderr
    assert (tmp_path / "four/.imgpkg/images.yml").read_text() == (tmp_path / "one/.imgpkg/images.yml").read_text()


def test_a_relocated_verdict_serves_pulls_with_the_registry_down(own_registry: Registry, tmp_path: Path) -> None:
    pusher = Pusher(own_registry)
    published = publish_bundle(pusher, "down", images=1)
    relocate(pusher, published, "down/relocated")
    ref = published.ref(own_registry, "down/relocated")
    cache = tmp_path / "cache"
    assert pull_bundle(ref, tmp_path / "one", cache)[0] == 0
    own_registry.stop()
    code, doc, stderr = pull_bundle(ref, tmp_path / "two", cache)
    assert code == 0, stderr
    assert doc["result"]["requests"]["total"] == 0  # type: ignore[index]
    assert "down/relocated@" in (tmp_path / "two/.imgpkg/images.yml").read_text()


def test_nested_bundles_are_pulled_and_checked_against_their_own_repository(
    registry: Registry, pusher: Pusher, repo_prefix: str, tmp_path: Path
) -> None:
    inner = publish_bundle(pusher, f"{repo_prefix}/inner", images=1, files={"inner.yml": "inner: true\n"})
    relocate(pusher, inner, f"{repo_prefix}/inner-copy")
    inner_ref = inner.ref(registry, f"{repo_prefix}/inner-copy")
    plain = publish_bundle(pusher, f"{repo_prefix}/side", images=1)
    outer = make_bundle({"outer.yml": "outer: true\n"}, [inner_ref, next(iter(plain.images))])
    outer_ref = pusher.image(f"{repo_prefix}/outer", outer, tag="v1")
    code, doc, _ = pull_bundle(outer_ref, tmp_path / "out", tmp_path / "cache", "-r")
    assert code == 0, doc
    nested_dir = tmp_path / "out/.imgpkg/bundles" / f"sha256-{inner.bundle.hex}"
    assert (nested_dir / "inner.yml").read_text() == "inner: true\n"
    assert f"{repo_prefix}/inner-copy@" in (nested_dir / ".imgpkg/images.yml").read_text()
    assert f"{repo_prefix}/outer@" not in (tmp_path / "out/.imgpkg/images.yml").read_text()
    assert doc["result"]["nested"] == [inner_ref]  # type: ignore[index]
    code, report, _ = verify("-b", outer_ref, "-r", "--no-cache")
    assert code == 3
    nested = report["result"]["bundles"][0]["nested"]  # type: ignore[index]
    assert [n["verdict"] for n in nested] == ["relocated"]


@pytest.mark.parametrize(
    ("images_yml", "message"),
    [
        ("apiVersion: imgpkg.carvel.dev/v1alpha1\nkind: ImagesLock\nimages:\n- image: nginx:1.0\n",
         "Validating images lock: Expected ref to be in digest form, got 'nginx:1.0'"),
        ("apiVersion: imgpkg.carvel.dev/v1alpha1\nkind: ImagesLock\nextra: 1\n",
         'json: unknown field "extra"'),
        ("apiVersion: v2\nkind: ImagesLock\n",
         "Validating images lock: Validating apiVersion: Unknown version (known: imgpkg.carvel.dev/v1alpha1)"),
    ],
)  # fmt: skip
def test_an_invalid_images_yml_fails_with_imgpkgs_message_before_anything_is_swapped(
    registry: Registry, pusher: Pusher, repo_prefix: str, tmp_path: Path, images_yml: str, message: str
) -> None:
    bundle = make_image({".imgpkg/images.yml": images_yml, "a.yml": "a"}, bundle=True)
    ref = pusher.image(f"{repo_prefix}/broken", bundle)
    out = tmp_path / "out"
    out.mkdir()
    (out / "old.txt").write_text("old")
    result = run_cli("pull", "-b", ref, "-o", str(out), "--no-cache")
    assert result.exit_code == 1
    assert message in " ".join(line.strip() for line in result.stderr.splitlines())
    assert sorted(p.name for p in out.iterdir()) == ["old.txt"]
    assert registry.host in ref


def test_verify_relocation_reads_every_imgpkg_bundle_of_a_vendir_yml(
    registry: Registry, pusher: Pusher, repo_prefix: str, tmp_path: Path
) -> None:
    published = publish_bundle(pusher, repo_prefix, images=1)
    relocate(pusher, published, f"{repo_prefix}/copy", tag="1.2.0")
    config = tmp_path / "vendir.yml"
    config.write_text(
        "apiVersion: vendir.k14s.io/v1alpha1\nkind: Config\ndirectories:\n- path: v\n  contents:\n"
        f"  - path: relocated\n    imgpkgBundle:\n      image: {registry.host}/{repo_prefix}/copy\n"
        "      tagSelection: {semver: {constraints: '>=1.0.0'}}\n"
        f'  - path: original\n    imgpkgBundle: {{image: "{published.ref(registry)}"}}\n'
        "  - path: inline\n    inline: {paths: {a: b}}\n"
    )
    code, report, _ = verify("-f", str(config), "--no-cache")
    assert code == 3
    verdicts = [(b["ref"], b["verdict"]) for b in report["result"]["bundles"]]  # type: ignore[index]
    assert verdicts == [
        (published.ref(registry, f"{repo_prefix}/copy"), "relocated"),
        (published.ref(registry), "not-relocated"),
    ]


def test_a_relocated_tree_finds_nested_bundles_from_the_locations_hints(
    registry: Registry, pusher: Pusher, repo_prefix: str, tmp_path: Path
) -> None:
    inner = publish_bundle(pusher, f"{repo_prefix}/inner", images=2, files={"inner.yml": "inner\n"})
    outer = publish_outer_bundle(pusher, repo_prefix, inner, images=3)
    relocate_tree(pusher, outer, inner, f"{repo_prefix}/mirror")
    ref = outer.ref(registry, f"{repo_prefix}/mirror")
    mark = registry.mark()
    code, doc, stderr = pull_bundle(ref, tmp_path / "out", tmp_path / "cache", "-r")
    assert code == 0, stderr
    nested = tmp_path / "out/.imgpkg/bundles" / f"sha256-{inner.bundle.hex}"
    assert (nested / "inner.yml").read_text() == "inner\n"
    assert f"{repo_prefix}/mirror@" in (tmp_path / "out/.imgpkg/images.yml").read_text()
    assert f"{repo_prefix}/mirror@" in (nested / ".imgpkg/images.yml").read_text()
    plain_manifest_gets = [
        p for m, p, _ in registry.since(mark)
        if m == "GET" and "/manifests/sha256:" in p and any(i.digest in p for i in outer.images.values()
                                                             if i is not inner.bundle)
    ]  # fmt: skip
    assert plain_manifest_gets == []  # isBundle hints: plain images are never fetched to find nested bundles
    assert doc["result"]["nested"] == [f"{registry.host}/{repo_prefix}/mirror@{inner.bundle.digest}"]  # type: ignore[index]


def test_a_locations_layer_larger_than_real_hints_is_not_downloaded_and_nested_bundles_are_probed(
    registry: Registry, pusher: Pusher, repo_prefix: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    inner = publish_bundle(pusher, f"{repo_prefix}/inner", images=1, files={"inner.yml": "inner\n"})
    outer = publish_outer_bundle(pusher, repo_prefix, inner, images=2)
    relocate_tree(pusher, outer, inner, f"{repo_prefix}/mirror")
    originals = {ref: ref in outer.bundles for ref in outer.images}
    locations_layer = sha(pusher.locations_image(f"{repo_prefix}/mirror", outer.bundle, originals).layers[0])
    monkeypatch.setattr(engine_pull, "MAX_HINTS", 16)  # every real locations layer is larger than 16 bytes
    mark = registry.mark()
    code, doc, stderr = pull_bundle(
        outer.ref(registry, f"{repo_prefix}/mirror"), tmp_path / "out", tmp_path / "c", "-r"
    )
    assert code == 0, stderr
    assert doc["result"]["nested"] == [f"{registry.host}/{repo_prefix}/mirror@{inner.bundle.digest}"]  # type: ignore[index]
    blob_gets = [p for m, p, _ in registry.since(mark) if m == "GET" and "/blobs/" in p]
    plain_manifest_gets = [p for m, p, _ in registry.since(mark) if m == "GET" and "/manifests/sha256:" in p
                           and any(i.digest in p for i in outer.images.values() if i is not inner.bundle)]  # fmt: skip
    assert plain_manifest_gets != []  # no hints: every image was probed for being a bundle
    assert [p for p in blob_gets if locations_layer in p] == []


def test_offline_with_a_due_recheck_uses_the_last_verdict_with_a_warning(
    registry: Registry, pusher: Pusher, repo_prefix: str, tmp_path: Path
) -> None:
    published = publish_bundle(pusher, repo_prefix, images=1)
    cache = tmp_path / "cache"
    assert pull_bundle(published.ref(registry), tmp_path / "one", cache)[0] == 0
    code, doc, stderr = pull_bundle(published.ref(registry), tmp_path / "two", cache, "--offline",
                                    "--relocation-recheck", "0")  # fmt: skip
    assert code == 0, stderr
    assert doc["result"]["requests"]["total"] == 0  # type: ignore[index]
    assert "Warning: could not re-check relocation" in stderr


def test_a_hostile_annotation_cannot_make_the_relocated_images_yml_list_a_second_image(
    registry: Registry, pusher: Pusher, repo_prefix: str, tmp_path: Path
) -> None:
    evil = "evil.example/x@sha256:" + "b" * 64
    note = f"a\nb\u2028  image: {evil}\u2028-"  # issue 22: LS is a line break to go-yaml, libyaml and PyYAML
    quoted = '"' + note.replace("\n", "\\n").replace("\u2028", "\\L") + '"'
    published = publish_bundle(pusher, repo_prefix, images=1, annotations={"note": quoted})
    relocate(pusher, published, f"{repo_prefix}/moved")
    ref = published.ref(registry, f"{repo_prefix}/moved")
    code, doc, _ = pull_bundle(ref, tmp_path / "out", tmp_path / "cache")
    assert code == 0
    assert doc["result"]["relocation"]["relocated"] is True  # type: ignore[index]
    digest = next(iter(published.images.values())).digest
    written = (tmp_path / "out/.imgpkg/images.yml").read_bytes()
    image = f"{registry.host}/{repo_prefix}/moved@{digest}"
    assert written.decode() == (  # go-yaml v2's bytes (tests/golden/goyaml): LS written raw, what follows indented
        "---\napiVersion: imgpkg.carvel.dev/v1alpha1\nimages:\n- annotations:\n    note: |-\n      a\n"
        f"      b\u2028        image: {evil}\u2028      -\n  image: {image}\nkind: ImagesLock\n"
    )
    assert yaml.safe_load(written)["images"] == [{"annotations": {"note": note}, "image": image}]
    assert [e.image for e in engine_pull.read_images_lock(tmp_path / "out")[0].images] == [image]


def test_an_images_yml_that_is_a_directory_is_refused_naming_its_path(tmp_path: Path) -> None:
    """A crafted bundle's `.imgpkg/images.yml` that is a directory: the error names the path, as imgpkg's does."""
    (tmp_path / ".imgpkg" / "images.yml").mkdir(parents=True)
    with pytest.raises(IsADirectoryError) as raised:
        engine_pull.read_images_lock(tmp_path)
    assert raised.value.filename == str(tmp_path / ".imgpkg" / "images.yml")
