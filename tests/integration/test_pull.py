"""`pull` against a real registry: images and bundles, the cache, verification, safety, auth and TLS."""

from __future__ import annotations

import json
import stat
from pathlib import Path

import pytest

from tests.conftest import run_cli
from tests.support.builders import Entry, Pusher, make_bundle, make_image, publish_bundle
from tests.support.devfull import FULL, run_into_full_disk
from tests.support.faults import Rule, fault_proxy
from tests.support.registry import PASSWORD, USERNAME, Registry


def pull(*args: str, cache: Path | None = None) -> tuple[int, dict[str, object], str]:
    extra = ["--cache-dir", str(cache)] if cache else ["--no-cache"]
    result = run_cli("pull", *args, *extra, "--json")
    doc = json.loads(result.stdout) if result.stdout.strip() else {}
    return result.exit_code, doc, result.stderr


def tree(root: Path) -> dict[str, tuple[int, bytes]]:
    return {
        str(p.relative_to(root)): (stat.S_IMODE(p.stat().st_mode), p.read_bytes() if p.is_file() else b"")
        for p in sorted(root.rglob("*"))
    }


def test_image_by_tag_and_by_digest(registry: Registry, pusher: Pusher, repo_prefix: str, tmp_path: Path) -> None:
    image = make_image({"config/app.yml": "a: 1\n", "run.sh": "#!/bin/sh\n"})
    ref = pusher.image(f"{repo_prefix}/img", image, tag="v1")
    code, doc, _ = pull("-i", f"{registry.host}/{repo_prefix}/img:v1", "-o", str(tmp_path / "by-tag"))
    assert code == 0, doc
    code, doc, _ = pull("-i", ref, "-o", str(tmp_path / "by-digest"))
    assert code == 0
    assert doc["result"]["kind"] == "image"  # type: ignore[index]
    assert tree(tmp_path / "by-tag") == tree(tmp_path / "by-digest")
    assert (tmp_path / "by-digest/config/app.yml").read_text() == "a: 1\n"
    assert stat.S_IMODE((tmp_path / "by-digest/config/app.yml").stat().st_mode) == 0o644
    assert stat.S_IMODE((tmp_path / "by-digest/config").stat().st_mode) == 0o755


def test_second_pull_of_a_digest_is_served_from_cache_with_zero_requests(
    registry: Registry, pusher: Pusher, repo_prefix: str, tmp_path: Path
) -> None:
    published = publish_bundle(pusher, repo_prefix, images=2)
    cache = tmp_path / "cache"
    code, first, _ = pull("-b", published.ref(registry), "-o", str(tmp_path / "one"), cache=cache)
    assert code == 0, first
    assert first["result"]["requests"]["total"] > 0  # type: ignore[index]
    mark = registry.mark()
    code, second, _ = pull("-b", published.ref(registry), "-o", str(tmp_path / "two"), cache=cache)
    assert code == 0
    assert second["result"]["requests"]["total"] == 0  # type: ignore[index]
    assert registry.since(mark) == []
    assert tree(tmp_path / "one") == tree(tmp_path / "two")


def test_a_tag_costs_one_head_when_its_digest_is_cached(
    registry: Registry, pusher: Pusher, repo_prefix: str, tmp_path: Path
) -> None:
    image = make_image({"a.txt": "a"})
    pusher.image(f"{repo_prefix}/img", image, tag="v1")
    cache = tmp_path / "cache"
    ref = f"{registry.host}/{repo_prefix}/img:v1"
    assert pull("-i", ref, "-o", str(tmp_path / "one"), cache=cache)[0] == 0
    mark = registry.mark()
    code, doc, _ = pull("-i", ref, "-o", str(tmp_path / "two"), cache=cache)
    assert code == 0
    assert doc["result"]["requests"]["by_method"] == {"HEAD": 1}  # type: ignore[index]
    assert [(m, s) for m, _, s in registry.since(mark)] == [("HEAD", 200)]


def test_pull_works_from_cache_with_the_registry_stopped(own_registry: Registry, tmp_path: Path) -> None:
    pusher = Pusher(own_registry)
    image = make_image({"a.txt": "served offline\n"})
    ref = pusher.image("offline/img", image, tag="v1")
    cache = tmp_path / "cache"
    assert pull("-i", ref, "-o", str(tmp_path / "one"), cache=cache)[0] == 0
    own_registry.stop()
    code, doc, _ = pull("-i", ref, "-o", str(tmp_path / "two"), cache=cache)
    assert code == 0, doc
    assert (tmp_path / "two/a.txt").read_text() == "served offline\n"
    code, doc, _ = pull("-i", f"{own_registry.host}/offline/img:v1", "-o", str(tmp_path / "three"), cache=cache)
    assert code == 1
    assert doc["error"]["code"] == "registry-unreachable"  # type: ignore[index]
    assert not (tmp_path / "three").exists()


def test_a_blob_altered_in_registry_storage_is_rejected_and_nothing_is_written_or_cached(
    own_registry: Registry, tmp_path: Path
) -> None:
    pusher = Pusher(own_registry)
    image = make_image({"a.txt": "original\n"})
    ref = pusher.image("tamper/img", image)
    layer_digest = json.loads(image.manifest)["layers"][0]["digest"]
    blob = own_registry.blob_file(layer_digest)
    data = bytearray(blob.read_bytes())
    data[-1] ^= 0xFF
    blob.write_bytes(bytes(data))
    out = tmp_path / "out"
    out.mkdir()
    (out / "previous.txt").write_text("keep me")
    cache = tmp_path / "cache"
    code, doc, stderr = pull("-i", ref, "-o", str(out), cache=cache)
    assert code == 1
    assert doc["error"]["code"] == "digest-mismatch"  # type: ignore[index]
    assert layer_digest in stderr
    assert sorted(p.name for p in out.iterdir()) == ["previous.txt"]
    assert not (cache / "blobs/sha256" / layer_digest.split(":")[1]).exists()
    assert list((cache / "tmp").iterdir()) == []
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cache", "out"]


@pytest.mark.parametrize("name", ["../evil.txt", "/abs/evil.txt"])
def test_a_layer_escaping_the_output_is_refused(pusher: Pusher, repo_prefix: str, tmp_path: Path, name: str) -> None:
    image = make_image(entries=[Entry("ok.txt", b"fine"), Entry(name, b"evil")])
    ref = pusher.image(f"{repo_prefix}/evil", image)
    out = tmp_path / "nested" / "out"
    code, doc, _ = pull("-i", ref, "-o", str(out))
    assert code == 1
    assert doc["error"]["code"] == "unsafe-archive"  # type: ignore[index]
    assert not out.exists()
    assert not (tmp_path / "nested" / "evil.txt").exists()
    assert sorted(p.name for p in (tmp_path / "nested").iterdir()) == []


def test_bundle_and_image_flags_are_checked_with_imgpkgs_messages(
    registry: Registry, pusher: Pusher, repo_prefix: str, tmp_path: Path
) -> None:
    published = publish_bundle(pusher, repo_prefix, images=1)
    image_ref = next(iter(published.images))
    result = run_cli("pull", "-b", image_ref, "-o", str(tmp_path / "a"), "--no-cache")
    assert result.exit_code == 1
    assert "Expected bundle image but found plain image (hint: Did you use -i instead of -b?)" in result.stderr
    result = run_cli("pull", "-i", published.ref(registry), "-o", str(tmp_path / "b"), "--no-cache")
    assert result.exit_code == 1
    assert "Expected bundle flag when pulling a bundle (hint: Use -b instead of -i for bundles)" in result.stderr
    result = run_cli("pull", "-i", published.ref(registry), "-o", str(tmp_path / "c"), "--no-cache",
                     "--image-is-bundle-check=false")  # fmt: skip
    assert result.exit_code == 0
    assert (tmp_path / "c/.imgpkg/images.yml").exists()


def test_an_index_is_refused_with_a_hint(pusher: Pusher, repo_prefix: str, tmp_path: Path) -> None:
    index_ref = pusher.index(f"{repo_prefix}/multi", [make_image({"a": "1"}), make_image({"b": "2"})], "v1")
    for flag in ("-i", "-b"):
        result = run_cli("pull", flag, index_ref, "-o", str(tmp_path / flag), "--no-cache")
        assert result.exit_code == 1
        assert "Unable to pull non-images, such as image indexes." in result.stderr
        assert "(hint: provide a specific digest to the image instead)" in result.stderr


def test_wrong_credentials_give_a_clear_auth_error(auth_registry: Registry, tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    image = make_image({"secret.txt": "s"})
    ref = Pusher(auth_registry).image("private/img", image)
    monkeypatch.setenv("IMGPKG_REGISTRY_HOSTNAME", auth_registry.host)
    monkeypatch.setenv("IMGPKG_REGISTRY_USERNAME", USERNAME)
    monkeypatch.setenv("IMGPKG_REGISTRY_PASSWORD", "wrong-password")
    result = run_cli("pull", "-i", ref, "-o", str(tmp_path / "bad"), "--no-cache")
    assert result.exit_code == 1
    assert f"{auth_registry.host} refused the credentials" in result.stderr
    assert "wrong-password" not in result.stderr
    monkeypatch.setenv("IMGPKG_REGISTRY_PASSWORD", PASSWORD)
    result = run_cli("pull", "-i", ref, "-o", str(tmp_path / "good"), "--no-cache")
    assert result.exit_code == 0, result.stderr
    assert (tmp_path / "good/secret.txt").read_text() == "s"


def test_anonymous_pull_from_an_auth_registry_says_credentials_are_needed(auth_registry: Registry,
                                                                          tmp_path: Path) -> None:  # fmt: skip
    ref = Pusher(auth_registry).image("private/anon", make_image({"x": "x"}))
    result = run_cli("pull", "-i", ref, "-o", str(tmp_path / "out"), "--no-cache")
    assert result.exit_code == 1
    assert "requires authentication" in result.stderr


def test_tls_registry_needs_its_ca_and_works_with_it(tls_registry: Registry, tmp_path: Path) -> None:
    ref = Pusher(tls_registry).image("secure/img", make_image({"tls.txt": "ok"}))
    result = run_cli("pull", "-i", ref, "-o", str(tmp_path / "no-ca"), "--no-cache")
    assert result.exit_code == 1
    assert "x509: certificate signed by unknown authority" in result.stderr
    assert tls_registry.ca_cert is not None
    result = run_cli("pull", "-i", ref, "-o", str(tmp_path / "ca"), "--no-cache",
                     "--registry-ca-cert-path", str(tls_registry.ca_cert))  # fmt: skip
    assert result.exit_code == 0, result.stderr
    assert (tmp_path / "ca/tls.txt").read_text() == "ok"
    result = run_cli("pull", "-i", ref, "-o", str(tmp_path / "skip"), "--no-cache", "--registry-verify-certs=false")
    assert result.exit_code == 0, result.stderr


def test_a_failed_pull_leaves_the_previous_output_intact(
    registry: Registry, pusher: Pusher, repo_prefix: str, tmp_path: Path
) -> None:
    good = pusher.image(f"{repo_prefix}/img", make_image({"v.txt": "good"}))
    out = tmp_path / "out"
    assert pull("-i", good, "-o", str(out))[0] == 0
    missing = f"{registry.host}/{repo_prefix}/img@sha256:{'0' * 64}"
    code, doc, _ = pull("-i", missing, "-o", str(out))
    assert code == 1
    assert doc["error"]["code"] == "not-found"  # type: ignore[index]
    assert (out / "v.txt").read_text() == "good"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]


def test_a_dropped_connection_mid_blob_is_retried_and_5xx_are_retried(
    registry: Registry, pusher: Pusher, repo_prefix: str, tmp_path: Path
) -> None:
    image = make_image({"data.txt": "x" * 100_000})
    pusher.image(f"{repo_prefix}/img", image)
    layer = json.loads(image.manifest)["layers"][0]["digest"]
    with fault_proxy(registry.host) as proxy:
        proxy.rules.append(Rule("GET", f"/blobs/{layer}", truncate=True, times=1))
        proxy.rules.append(Rule("GET", "/manifests/", status=503, times=2))
        ref = f"{proxy.host}/{repo_prefix}/img@{image.digest}"
        code, doc, stderr = pull("-i", ref, "-o", str(tmp_path / "out"))
        assert code == 0, stderr
        assert (tmp_path / "out/data.txt").read_text() == "x" * 100_000
        statuses = [s for m, p, s in proxy.log if m == "GET"]
        assert statuses.count(503) == 2
        assert doc["result"]["requests"]["by_status"].get("503") == 2  # type: ignore[index]


def test_stale_if_error_serves_a_tags_last_answer_with_a_warning(own_registry: Registry, tmp_path: Path) -> None:
    ref = Pusher(own_registry).image("stale/img", make_image({"s.txt": "stale ok"}), tag="v1")
    tag = f"{own_registry.host}/stale/img:v1"
    cache = tmp_path / "cache"
    assert pull("-i", tag, "-o", str(tmp_path / "one"), cache=cache)[0] == 0
    own_registry.stop()
    assert pull("-i", tag, "-o", str(tmp_path / "two"), cache=cache)[0] == 1
    result = run_cli("pull", "-i", tag, "-o", str(tmp_path / "three"), "--cache-dir", str(cache),
                     "--stale-if-error", "1h")  # fmt: skip
    assert result.exit_code == 0, result.stderr
    assert "ocivendir: Warning: could not resolve" in result.stderr
    assert ref.split("@")[1] in result.stderr
    assert (tmp_path / "three/s.txt").read_text() == "stale ok"


def test_pull_by_bundle_lock_file(registry: Registry, pusher: Pusher, repo_prefix: str, tmp_path: Path) -> None:
    published = publish_bundle(pusher, repo_prefix, images=1)
    lock = tmp_path / "bundle.lock.yml"
    lock.write_text(
        "---\napiVersion: imgpkg.carvel.dev/v1alpha1\nbundle:\n"
        f"  image: {published.ref(registry)}\n  tag: v1\nkind: BundleLock\n"
    )
    code, doc, _ = pull("--lock", str(lock), "-o", str(tmp_path / "out"))
    assert code == 0
    assert doc["result"]["kind"] == "bundle"  # type: ignore[index]
    assert (tmp_path / "out/.imgpkg/images.yml").exists()
    lock.write_text("apiVersion: imgpkg.carvel.dev/v1alpha1\nkind: BundleLock\nbundle:\n  image: r.io/some/app:v1\n")
    code, doc, _ = pull("--lock", str(lock), "-o", str(tmp_path / "bad"))
    assert code == 2  # the user's own file: a usage error (design §4.7), before any request
    assert "Expected ref to be in digest form, got 'r.io/some/app:v1'" in doc["error"]["message"]  # type: ignore[index]
    lock.write_bytes(b"\x00\xff binary")
    code, doc, _ = pull("--lock", str(lock), "-o", str(tmp_path / "bad"))
    assert code == 2
    assert doc["error"]["message"] == (  # type: ignore[index]
        f"Reading bundle lock '{lock}': Unmarshaling bundle lock: error converting YAML to JSON: yaml: control "
        "characters are not allowed"
    )


def test_layers_apply_first_to_last_with_whiteouts_as_vendir_does(pusher: Pusher, repo_prefix: str,
                                                                  tmp_path: Path) -> None:  # fmt: skip
    image = make_image(entries=[Entry("a.txt", b"one"), Entry("b.txt", b"b")],
                       extra_layers=[[Entry("a.txt", b"two"), Entry(".wh.b.txt")]])  # fmt: skip
    ref = pusher.image(f"{repo_prefix}/layers", image)
    code, doc, _ = pull("-i", ref, "-o", str(tmp_path / "out"))
    assert code == 0
    assert doc["result"]["layers"] == 2  # type: ignore[index]
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["a.txt"]
    assert (tmp_path / "out/a.txt").read_text() == "two"


def test_a_bundle_without_images_counts_as_relocated_and_gets_the_empty_form(
    registry: Registry, pusher: Pusher, repo_prefix: str, tmp_path: Path
) -> None:
    bundle = make_bundle({"a.yml": "a"}, [])
    ref = pusher.image(f"{repo_prefix}/empty", bundle)
    code, doc, _ = pull("-b", ref, "-o", str(tmp_path / "out"))
    assert code == 0
    assert doc["result"]["relocation"]["relocated"] is True  # type: ignore[index]
    assert doc["result"]["requests"]["total"] == 3  # type: ignore[index]  (manifest, config, layer: no probe at all)
    assert (tmp_path / "out/.imgpkg/images.yml").read_text() == (
        "---\napiVersion: imgpkg.carvel.dev/v1alpha1\nkind: ImagesLock\n"
    )
    assert registry.host in ref


def test_the_scheme_that_worked_is_remembered_so_later_runs_make_no_failed_attempt(
    registry: Registry, pusher: Pusher, repo_prefix: str, tmp_path: Path
) -> None:
    pusher.image(f"{repo_prefix}/img", make_image({"a": "a"}), tag="v1")
    tag = f"{registry.host}/{repo_prefix}/img:v1"
    cache = tmp_path / "cache"
    code, first, _ = pull("-i", tag, "-o", str(tmp_path / "one"), cache=cache)
    assert code == 0
    code, second, _ = pull("-i", tag, "-o", str(tmp_path / "two"), cache=cache)
    assert code == 0
    assert second["result"]["requests"]["connect_errors"] == 0  # type: ignore[index]
    assert second["result"]["requests"]["total"] == 1  # type: ignore[index]
    assert first["result"]["requests"]["connect_errors"] in {0, 1}  # type: ignore[index]  (https tried once at most)


def test_a_manifest_whose_keys_go_reads_otherwise_is_refused_and_nothing_is_extracted(
    registry: Registry, pusher: Pusher, repo_prefix: str, tmp_path: Path
) -> None:
    shown, hidden = make_image({"a.txt": "A"}), make_image({"b.txt": "B"})
    for blob in [*shown.blobs, *hidden.blobs]:
        pusher.blob(f"{repo_prefix}/twin", blob)
    doc, hidden_doc = json.loads(shown.manifest), json.loads(hidden.manifest)
    # issue 22.4: `layers` read exactly gives a.txt; Go's encoding/json (imgpkg, crane) takes `Layers`, the last match
    parts = [f'"{key}":{json.dumps(doc[key])}' for key in ("schemaVersion", "mediaType", "config", "layers")]
    raw = ("{" + ",".join([*parts, f'"Layers":{json.dumps(hidden_doc["layers"])}']) + "}").encode()
    digest = pusher.manifest(f"{repo_prefix}/twin", "v1", raw)
    code, doc, stderr = pull("-i", f"{registry.host}/{repo_prefix}/twin@{digest}", "-o", str(tmp_path / "out"),
                             cache=tmp_path / "cache")  # fmt: skip
    assert code == 1
    assert doc["error"]["code"] == "unsupported-media-type"  # type: ignore[index]
    assert "manifest has the key 'Layers', which Go's encoding/json reads as the field 'layers'" in stderr
    assert not (tmp_path / "out").exists()


@pytest.mark.skipif(not FULL.exists(), reason="no /dev/full")
def test_a_pull_whose_stdout_is_on_a_full_disk_names_it_once_its_json_cannot_be_written(
    registry: Registry, pusher: Pusher, repo_prefix: str, tmp_path: Path
) -> None:
    """`pull --json > /dev/full`: the image is extracted, the lost envelope is one error line and exit 1.

    A plain pull writes nothing on stdout (its lines are on stderr), so the full disk does not concern it.
    """
    ref = pusher.image(f"{repo_prefix}/img", make_image({"a.txt": "a\n"}))
    as_json = run_into_full_disk("pull", "-i", ref, "-o", "j", "--cache-dir", "c", "--json", cwd=tmp_path)
    assert as_json.returncode == 1, as_json.stderr
    assert as_json.stderr == "ocivendir: Error: '/dev/stdout': no space left on device\n"
    assert (tmp_path / "j/a.txt").read_text() == "a\n"
    plain = run_into_full_disk("pull", "-i", ref, "-o", "p", "--cache-dir", "c", cwd=tmp_path)
    assert plain.returncode == 0, plain.stderr
    assert plain.stderr.splitlines()[-1] == "Succeeded"
    assert (tmp_path / "p/a.txt").read_text() == "a\n"
