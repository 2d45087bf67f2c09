"""`cache import` / `cache export`: seeding a cache from archives so that Apps reconcile with no registry at all.

An import stands where `imgpkg copy --to-repo REPO` would: every manifest and blob verified before anything is
admitted, then served as `REPO@sha256:…` with the bundle counted as relocated there.
"""

from __future__ import annotations

import json
import tarfile
from pathlib import Path

import pytest

from tests.conftest import run_cli
from tests.integration.test_kapp_controller import PLACEHOLDER, Controller, config, vendir_binary
from tests.support.archives import descriptor, imgpkg_tar, layers_of, oci_layout, tar_of
from tests.support.builders import (
    Pusher,
    base256,
    make_bundle,
    make_image,
    padded,
    publish_bundle,
    raw_header,
    relocate,
    sha,
)
from tests.support.registry import Registry

__all__ = ["vendir_binary"]  # the fixture, shared with the kapp-controller tests


def _tree(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def _cache_state(cache: Path) -> dict[str, bytes]:
    """The blobs a cache holds (what must not change when an import fails)."""
    blobs = cache / "blobs" / "sha256"
    return {p.name: p.read_bytes() for p in sorted(blobs.iterdir())} if blobs.exists() else {}


def _import(cache: Path, source: Path, repo: str, *extra: str) -> tuple[int, dict[str, object], str]:
    done = run_cli("cache", "import", str(source), "--to-repo", repo, "--cache-dir", str(cache), "--json", *extra)
    doc = json.loads(done.stdout) if done.stdout.strip() else {}
    return done.exit_code, doc, done.stderr


def _export_from_registry(tmp_path: Path, registry: Registry, published: object, out: Path) -> None:
    """The product's own writer: pull the images and the bundle into a cache, then `cache export` the bundle."""
    cache = tmp_path / "export-cache"
    for ref in published.images:  # type: ignore[attr-defined]
        assert run_cli("pull", "-i", ref, "-o", str(tmp_path / "img"), "--cache-dir", str(cache)).exit_code == 0
    bundle_ref = published.ref(registry)  # type: ignore[attr-defined]
    pulled = run_cli("pull", "-b", bundle_ref, "-o", str(tmp_path / "b"), "-r", "--cache-dir", str(cache))
    assert pulled.exit_code == 0, pulled.stderr
    done = run_cli("cache", "export", bundle_ref, "--to-tar", str(out), "--cache-dir", str(cache), "--json")
    assert done.exit_code == 0, done.stderr


def test_an_imported_bundle_syncs_offline_exactly_as_the_copied_bundle_syncs_online(
    own_registry: Registry, tmp_path: Path, vendir_binary: Path
) -> None:
    """Import, stop the registry, kapp-shaped sync of REPO@digest: the tree equals an online sync after a copy."""
    pusher = Pusher(own_registry)
    published = publish_bundle(pusher, "src", images=2)
    archive = tmp_path / "bundle.tar"
    _export_from_registry(tmp_path, own_registry, published, archive)
    relocate(pusher, published, "internal/bundle")
    ref = published.ref(own_registry, "internal/bundle")
    stream = PLACEHOLDER + config("imgpkgBundle", ref)

    online = Controller(vendir_binary, tmp_path / "online")
    done, online_cwd = online.fetch(stream)
    assert done.returncode == 0, done.stderr

    seeded = tmp_path / "seeded"
    code, doc, err = _import(seeded, archive, f"{own_registry.host}/internal/bundle")
    assert code == 0, err
    result = doc["result"]
    assert result["format"] == "imgpkg-tar"
    moved = {f"{own_registry.host}/internal/bundle@{img.digest}" for img in published.images.values()}
    assert {i["ref"] for i in result["imported"]} == {ref, *moved}
    assert result["relocated_bundles"] == [ref]
    assert result["already_present"] == []

    own_registry.stop()
    offline = Controller(vendir_binary, tmp_path / "offline")
    done, offline_cwd = offline.fetch(stream, OCIVENDIR_CACHE_DIR=str(seeded))
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
    assert _tree(offline_cwd) == _tree(online_cwd)
    assert f"internal/bundle@{next(iter(published.images.values())).digest}" in (
        offline_cwd / "0/.imgpkg/images.yml").read_text()  # fmt: skip

    tagged = Controller(vendir_binary, tmp_path / "tagged")
    done, _ = tagged.fetch(PLACEHOLDER + config("imgpkgBundle", f"{own_registry.host}/internal/bundle:v1"),
                           OCIVENDIR_CACHE_DIR=str(seeded))  # fmt: skip
    assert done.returncode == 1
    assert "a tag is resolved at its registry on every run, so it needs that registry" in done.stderr

    again = run_cli("cache", "import", str(archive), "--to-repo", f"{own_registry.host}/internal/bundle",
                    "--cache-dir", str(seeded), "--json")  # fmt: skip
    assert again.exit_code == 0
    second = json.loads(again.stdout)["result"]
    assert second["imported"] == []
    assert len(second["already_present"]) == 3
    assert second["blobs_new"] == 0


def test_export_then_import_gives_the_same_digests(
    registry: Registry, pusher: Pusher, repo_prefix: str, tmp_path: Path
) -> None:
    """A seeded cache exports what it was seeded with; importing that again gives the same digests and bytes."""
    published = publish_bundle(pusher, repo_prefix, images=1)
    first = tmp_path / "first.tar"
    _export_from_registry(tmp_path, registry, published, first)
    repo = f"{registry.host}/{repo_prefix}/moved"
    code, doc, err = _import(tmp_path / "c1", first, repo)
    assert code == 0, err
    second = tmp_path / "second.tar"
    bundle = f"{repo}@{published.bundle.digest}"
    done = run_cli("cache", "export", bundle, "--to-tar", str(second), "--cache-dir", str(tmp_path / "c1"))
    assert done.exit_code == 0, done.stderr
    code, again, err = _import(tmp_path / "c2", second, repo)
    assert code == 0, err
    digests = sorted(i["digest"] for i in doc["result"]["imported"])
    assert sorted(i["digest"] for i in again["result"]["imported"]) == digests
    assert _cache_state(tmp_path / "c1") == _cache_state(tmp_path / "c2")


def _bundle_archive(tmp_path: Path, host: str = "src.example:5000") -> tuple[bytes, list[object], object]:
    image = make_image({"app.txt": "app\n"})
    image_ref = f"{host}/src/img@{image.digest}"
    bundle = make_bundle({"config.yml": "a: 1\n"}, [image_ref])
    bundle_ref = f"{host}/src/bundle@{bundle.digest}"
    descriptors = [descriptor(bundle, bundle_ref, orig_ref=bundle_ref, root=True),
                   descriptor(image, image_ref, orig_ref=image_ref)]  # fmt: skip
    return imgpkg_tar(descriptors, layers_of(bundle, image)), descriptors, (bundle, image)


def _flip(data: bytes, at: int) -> bytes:
    return data[:at] + bytes([data[at] ^ 1]) + data[at + 1 :]


@pytest.mark.parametrize(
    "damage",
    ["flipped-byte", "missing-blob", "escaping-path", "claimed-size", "link", "inline-manifest", "inline-config",
     "layout-missing-blob"],
)  # fmt: skip
def test_a_damaged_archive_admits_nothing(tmp_path: Path, damage: str) -> None:
    """A damaged archive fails the import, and the cache (seeded before) stays exactly as it was.

    One flipped byte in a blob, a manifest naming a blob the archive lacks, a path leaving it, a size it does not
    hold, a link.
    """
    good, descriptors, (bundle, image) = _bundle_archive(tmp_path)
    cache = tmp_path / "cache"
    seed = tmp_path / "seed.tar"
    seed.write_bytes(tar_of([("index.json", b'{"schemaVersion":2,"manifests":[]}')]))
    assert _import(cache, seed, "r.example/seed")[0] == 0
    before = _cache_state(cache)
    layer = bundle.layers[0]  # type: ignore[attr-defined]
    if damage == "flipped-byte":
        at = good.index(layer) + len(layer) // 2
        data = _flip(good, at)
    elif damage == "missing-blob":
        data = imgpkg_tar(descriptors, layers_of(bundle))  # the image's layer is not in it
    elif damage == "escaping-path":
        data = tar_of([("manifest.json", json.dumps(descriptors).encode()), ("../escape.tar.gz", b"x"),
                       *[(f"{d.replace(':', '-')}.tar.gz", b) for d, b in layers_of(bundle, image).items()]])  # fmt: skip
    elif damage == "claimed-size":
        image.manifest = image.manifest.replace(  # type: ignore[attr-defined]
            f'"size":{len(image.layers[0])}'.encode(), b'"size":1099511627776'
        )  # type: ignore[attr-defined]
        descriptors[1] = descriptor(image, "src.example:5000/src/img@" + image.digest)  # type: ignore[arg-type,attr-defined]
        data = imgpkg_tar(descriptors, layers_of(bundle, image))
    elif damage == "inline-manifest":  # the manifest.json entry's raw manifest is not the digest it claims
        image.manifest = image.manifest.replace(b'"schemaVersion":2', b'"schemaVersion": 2')  # type: ignore[attr-defined]
        entry = descriptor(image, "src.example:5000/src/img@x")  # type: ignore[arg-type]
        entry["Image"]["Manifest"]["Digest"] = descriptors[1]["Image"]["Manifest"]["Digest"]  # type: ignore[index]
        data = imgpkg_tar([descriptors[0], entry], layers_of(bundle, image))
    elif damage == "inline-config":
        descriptors[1]["Image"]["Config"]["Raw"] += " "  # type: ignore[index]
        data = imgpkg_tar(descriptors, layers_of(bundle, image))
    elif damage == "layout-missing-blob":
        files = oci_layout({"v1": image})  # type: ignore[dict-item]
        del files[f"blobs/sha256/{sha(image.layers[0]).split(':')[1]}"]  # type: ignore[attr-defined]
        data = tar_of(sorted(files.items()))
    else:
        out = tmp_path / "link.tar"
        with tarfile.open(out, "w") as archive:
            info = tarfile.TarInfo("manifest.json")
            info.type, info.linkname = tarfile.SYMTYPE, "/etc/passwd"
            archive.addfile(info)
        data = out.read_bytes()
    bad = tmp_path / "bad.tar"
    bad.write_bytes(data)
    code, _, err = _import(cache, bad, "r.example/apps/bundle")
    assert code == 1, err
    assert "nothing" in err or "damaged" in err
    assert _cache_state(cache) == before
    assert not any((cache / "tmp").iterdir())
    listed = run_cli("cache", "ls", "--cache-dir", str(cache), "--json")
    assert json.loads(listed.stdout)["result"]["entries"] == []


def test_an_oci_layout_directory_and_tar_import_as_the_repository_named(tmp_path: Path) -> None:
    """An OCI image layout (what skopeo and oras write), as a directory and as a tar: every image under REPO."""
    images = {"v1": make_image({"a.txt": "a"}), "v2": make_image({"b.txt": "b"})}
    files = oci_layout(images)
    layout = tmp_path / "layout"
    for name, data in files.items():
        (layout / name).parent.mkdir(parents=True, exist_ok=True)
        (layout / name).write_bytes(data)
    as_tar = tmp_path / "layout.tar"
    as_tar.write_bytes(tar_of(sorted(files.items())))
    for source, cache in ((layout, tmp_path / "c1"), (as_tar, tmp_path / "c2")):
        code, doc, err = _import(cache, source, "r.example/apps/img")
        assert code == 0, err
        assert doc["result"]["format"] == "oci-layout"
        assert sorted(i["ref"] for i in doc["result"]["imported"]) == sorted(
            f"r.example/apps/img@{i.digest}" for i in images.values())  # fmt: skip
        assert doc["result"]["relocated_bundles"] == []
        out = tmp_path / f"out-{cache.name}"
        pulled = run_cli("pull", "-i", f"r.example/apps/img@{images['v1'].digest}", "-o", str(out),
                         "--cache-dir", str(cache), "--offline")  # fmt: skip
        assert pulled.exit_code == 0, pulled.stderr
        assert (out / "a.txt").read_text() == "a"


def test_ten_thousand_blobs_import_and_a_claimed_size_the_archive_lacks_is_refused(tmp_path: Path) -> None:
    """An image of 10,000 small layers imports, each blob admitted once; a member shorter than its blob, nothing.

    The blobs are small, so the bound tested is their count: one manifest.json, 10,000 members, 10,002 admissions.
    """
    import gzip  # noqa: PLC0415

    from tests.support.builders import Entry, config_bytes, tar_bytes  # noqa: PLC0415
    from tests.support.builders import Image as BuiltImage  # noqa: PLC0415

    layers = [gzip.compress(tar_bytes([Entry(f"f{n}", str(n).encode())]), mtime=0) for n in range(10_000)]
    image = BuiltImage(config=config_bytes(bundle=False, layers=layers[:1]), layers=layers)
    ref = f"src.example/many@{image.digest}"
    archive = tmp_path / "many.tar"
    archive.write_bytes(imgpkg_tar([descriptor(image, ref, orig_ref=ref)], layers_of(image)))
    code, doc, err = _import(tmp_path / "cache", archive, "r.example/many")
    assert code == 0, err
    assert doc["result"]["blobs_new"] == 10_002  # the layers, the config and the manifest
    assert len(list((tmp_path / "cache" / "blobs" / "sha256").iterdir())) == 10_002

    small = make_image({"x": "x"})
    doc_bytes = json.dumps([descriptor(small, "src.example/x@" + small.digest)]).encode()
    lying = tar_of([("manifest.json", doc_bytes), (f"{sha(small.layers[0]).replace(':', '-')}.tar.gz", b"short")])
    (tmp_path / "lying.tar").write_bytes(lying)
    code, _, err = _import(tmp_path / "cache2", tmp_path / "lying.tar", "r.example/small")
    assert code == 1
    claimed = f"{sha(small.layers[0]).replace(':', '-')}.tar.gz"
    huge = raw_header("manifest.json", size=len(doc_bytes)) + padded(doc_bytes)
    huge += raw_header(claimed, patch={124: base256(1 << 40)}) + bytes(4096)
    (tmp_path / "huge.tar").write_bytes(huge)  # a member header claiming 1 TiB, then 4 KiB and the end
    code, _, err = _import(tmp_path / "cache2", tmp_path / "huge.tar", "r.example/small")
    assert code == 1, err
    assert "claims 1099511627776 bytes, more than the archive's" in err
    assert list((tmp_path / "cache2" / "tmp").iterdir()) == []
    assert not (tmp_path / "cache2" / "blobs" / "sha256").exists() or not any(
        (tmp_path / "cache2" / "blobs" / "sha256").iterdir())  # fmt: skip


FIXTURE = Path(__file__).resolve().parents[1] / "support" / "fixtures" / "imgpkg-0.43.1-nested-bundle.tar"
OUTER = "sha256:f49ded378f8d00ca2a942f22844e1bc9e2f0ed0402636a3e5855986384cc827e"
INNER = "sha256:35f98616861a4f3d0930ef385527e5d5cece00bfc07996a81b09f8d067c7dbd5"
INDEX = "sha256:b7834651d8299c6ad5e312e3d183c5635244519633d7aa49aa2e8b2602ea143a"
IMAGE = "sha256:4f769606a047b0200b693f218b613728298b4f519546ca98af01c93ae919ea93"


def test_a_tarball_made_by_real_imgpkg_imports_and_pulls_offline_with_images_yml_rewritten(tmp_path: Path) -> None:
    """A tarball real imgpkg made imports, then pulls with -r and no network, every images.yml rewritten.

    `imgpkg copy -b <outer> --to-tar` (v0.43.1, checked in): an outer bundle naming a nested bundle, a multi-platform
    index and an image. Imported as `registry.internal/apps/bundle`, the trees are those real vendir gives after
    `imgpkg copy --tar --to-repo` into that repository (checked by hand); the index is no nested bundle.
    """
    repo = "registry.internal/apps/bundle"
    code, doc, err = _import(tmp_path / "cache", FIXTURE, repo)
    assert code == 0, err
    result = doc["result"]
    assert sorted((i["kind"], i["digest"]) for i in result["imported"]) == sorted(
        [("bundle", OUTER), ("bundle", INNER), ("index", INDEX), ("image", IMAGE)])  # fmt: skip
    assert sorted(result["relocated_bundles"]) == sorted([f"{repo}@{OUTER}", f"{repo}@{INNER}"])
    assert next(i for i in result["imported"] if i["digest"] == OUTER)["origin"].endswith(f"/src/outer@{OUTER}")
    out = tmp_path / "out"
    pulled = run_cli("pull", "-b", f"{repo}@{OUTER}", "-o", str(out), "-r", "--offline",
                     "--cache-dir", str(tmp_path / "cache"))  # fmt: skip
    assert pulled.exit_code == 0, pulled.stderr
    assert (out / ".imgpkg/images.yml").read_text() == (
        f"---\napiVersion: imgpkg.carvel.dev/v1alpha1\nimages:\n- image: {repo}@{INNER}\n- image: {repo}@{INDEX}\n"
        f"- image: {repo}@{IMAGE}\nkind: ImagesLock\n"
    )
    nested = out / ".imgpkg/bundles" / INNER.replace(":", "-")
    assert (nested / ".imgpkg/images.yml").read_text() == (
        "---\napiVersion: imgpkg.carvel.dev/v1alpha1\nimages:\n- annotations:\n    kbld.carvel.dev/id: example.com/app\n"
        f"  image: {repo}@{IMAGE}\nkind: ImagesLock\n"
    )
    assert (nested / "inner.yml").read_text() == "inner: true\n"
    assert (out / "config/app.yml").read_text() == "outer: true\n"
    assert run_cli("cache", "verify", "--cache-dir", str(tmp_path / "cache")).exit_code == 0  # consistent as imported


def test_an_export_of_the_real_imgpkg_tarball_describes_the_same_content(tmp_path: Path) -> None:
    """Exported again from the seeded cache, the tarball holds the same manifests, configs and layers as imgpkg's."""
    repo = "registry.internal/apps/bundle"
    assert _import(tmp_path / "cache", FIXTURE, repo)[0] == 0
    out = tmp_path / "again.tar"
    done = run_cli("cache", "export", f"{repo}@{OUTER}", "--to-tar", str(out), "--cache-dir", str(tmp_path / "cache"))
    assert done.exit_code == 0, done.stderr

    def content(path: Path) -> tuple[list[str], list[tuple[str, str, str]], dict[str, bytes]]:
        with tarfile.open(path) as archive:
            names = archive.getnames()
            described = json.loads(archive.extractfile("manifest.json").read())  # type: ignore[union-attr]
            layers = {n: archive.extractfile(n).read() for n in names[1:]}  # type: ignore[union-attr]
        rows = []
        for entry in described:
            item = entry["Image"] or entry["ImageIndex"]
            raw = item["Manifest"]["Raw"] if entry["Image"] else item["Raw"]
            rows.append((sha(raw.encode()), item.get("Config", {}).get("Raw", ""), str(item["Labels"])))
        return names, rows, layers

    assert content(out) == content(FIXTURE)


def test_the_stage_of_a_killed_import_is_removed_by_the_next_import(tmp_path: Path) -> None:
    """A stage nobody holds the lock of (its import was killed) goes at the next import; a held one stays."""
    cache = tmp_path / "cache"
    seed = tmp_path / "seed.tar"
    seed.write_bytes(tar_of([("index.json", b'{"schemaVersion":2,"manifests":[]}')]))
    assert _import(cache, seed, "r.example/seed")[0] == 0
    killed = cache / "tmp" / "import-0123456789ab"
    killed.mkdir()
    (killed / ("a" * 64)).write_bytes(b"half a blob")
    assert _import(cache, seed, "r.example/seed")[0] == 0
    assert not killed.exists()
    assert sorted(p.name for p in (cache / "locks").iterdir() if p.name.startswith("import-")) == []


def test_an_export_of_content_the_cache_lacks_fails_and_leaves_no_file(tmp_path: Path) -> None:
    """Exporting a digest the cache does not hold (for that repository) is an error naming it; no tarball is left."""
    repo = "registry.internal/apps/bundle"
    assert _import(tmp_path / "cache", FIXTURE, repo)[0] == 0
    out = tmp_path / "out.tar"
    other = run_cli("cache", "export", f"registry.internal/other@{OUTER}", "--to-tar", str(out),
                    "--cache-dir", str(tmp_path / "cache"))  # fmt: skip
    assert other.exit_code == 1
    assert f"Exporting 'registry.internal/other@{OUTER}': the cache does not hold it" in other.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cache"]
    tag = run_cli("cache", "export", f"{repo}:v1", "--to-tar", str(out), "--cache-dir", str(tmp_path / "cache"))
    assert tag.exit_code == 2
    done = run_cli("cache", "export", f"{repo}@{OUTER}", "--to-tar", str(out), "--cache-dir", str(tmp_path / "cache"),
                   "--json")  # fmt: skip
    exported = json.loads(done.stdout)["result"]
    assert exported["bytes"] == exported["exported"][0]["bytes"] > 0
    assert exported["blobs"] == 16  # 4 manifests under the outer bundle, 2 index children, their configs and layers


def test_an_oci_artifact_whose_config_is_no_image_config_imports_as_an_image(tmp_path: Path) -> None:
    """An artifact (as oras writes) whose config is no image config imports: verified by digest, it is no bundle."""
    layer = b"not a tar: an artifact's blob"
    config = b"\x00binary config"
    manifest = json.dumps({"schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
                           "config": {"mediaType": "application/vnd.example.config", "digest": sha(config),
                                      "size": len(config)},
                           "layers": [{"mediaType": "application/vnd.example.data", "digest": sha(layer),
                                       "size": len(layer)}]}).encode()  # fmt: skip
    index = {"schemaVersion": 2, "manifests": [{"mediaType": "application/vnd.oci.image.manifest.v1+json",
                                                "digest": sha(manifest), "size": len(manifest)}]}  # fmt: skip
    files = [("oci-layout", b'{"imageLayoutVersion":"1.0.0"}'), ("index.json", json.dumps(index).encode())]
    files += [(f"blobs/sha256/{sha(b).split(':')[1]}", b) for b in (manifest, config, layer)]
    (tmp_path / "artifact.tar").write_bytes(tar_of(files))
    code, doc, err = _import(tmp_path / "cache", tmp_path / "artifact.tar", "r.example/artifacts")
    assert code == 0, err
    assert [(i["kind"], i["digest"]) for i in doc["result"]["imported"]] == [("image", sha(manifest))]


def test_an_oci_archive_made_by_skopeo_imports_and_pulls_offline(tmp_path: Path) -> None:
    """`skopeo copy docker://…/src/img:v1 oci-archive:…` (checked in, 8 KB): served as REPO@digest, no network."""
    archive = Path(__file__).resolve().parents[1] / "support" / "fixtures" / "skopeo-oci-archive.tar"
    digest = "sha256:f0daa032871728b81db1605eff013ad297d655990707661c8fdaeb57d6c2a646"
    code, doc, err = _import(tmp_path / "cache", archive, "registry.internal/apps/img")
    assert code == 0, err
    assert doc["result"]["format"] == "oci-layout"
    assert [(i["digest"], i["tag"]) for i in doc["result"]["imported"]] == [(digest, "v1")]
    out = tmp_path / "out"
    pulled = run_cli("pull", "-i", f"registry.internal/apps/img@{digest}", "-o", str(out), "--offline",
                     "--cache-dir", str(tmp_path / "cache"))  # fmt: skip
    assert pulled.exit_code == 0, pulled.stderr
    assert (out / "hello.txt").read_text() == "hello from skopeo\n"


def test_a_bundle_without_its_images_imports_but_is_not_counted_as_relocated(tmp_path: Path) -> None:
    """A bundle whose images.yml names an image the archive lacks is imported, with a warning and no verdict."""
    _, descriptors, (bundle, _image) = _bundle_archive(tmp_path)
    (tmp_path / "alone.tar").write_bytes(imgpkg_tar(descriptors[:1], layers_of(bundle)))  # type: ignore[arg-type]
    code, doc, err = _import(tmp_path / "cache", tmp_path / "alone.tar", "r.example/apps/bundle")
    assert code == 0, err
    assert doc["result"]["relocated_bundles"] == []
    assert doc["result"]["warnings"] == [
        f"bundle r.example/apps/bundle@{bundle.digest}: its images.yml names content the archive does not hold "  # type: ignore[attr-defined]
        "(or cannot be read): not recorded as relocated, so a sync checks it at the registry"
    ]
    assert "Warning: bundle r.example/apps/bundle@" in err
