"""Signed or not served (`--policy`): cosign signatures checked before anything is extracted, offline once verified.

Keys are made here; signatures are written in cosign's classic format (tests/support/cosign.py) and pushed to the real
test registry; requests are counted with its access log.
"""

from __future__ import annotations

import json
import sqlite3
import textwrap
from pathlib import Path

import pytest

from tests.conftest import run_cli
from tests.integration.test_kapp_controller import PLACEHOLDER, Controller, config, lock, vendir_binary  # noqa: F401
from tests.support.builders import Pusher, make_image, publish_bundle, publish_outer_bundle, relocate
from tests.support.cosign import Key, policy, sign
from tests.support.registry import Registry

HEAD = "apiVersion: vendir.k14s.io/v1alpha1\nkind: Config\n"


@pytest.fixture(scope="module")
def key() -> Key:
    return Key.make("p256")


def write_policy(tmp_path: Path, text: str, name: str = "policy.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def pushed_image(pusher: Pusher, repo: str, text: str = "signed\n") -> tuple[str, str]:
    image = make_image({"app.yml": text})
    return pusher.image(repo, image), image.digest


def pull_image(ref: str, out: Path, cache: Path, policy_path: Path, *extra: str) -> object:
    return run_cli("pull", "-i", ref, "-o", str(out), "--cache-dir", str(cache), "--policy", str(policy_path), *extra)


def test_a_signed_image_is_verified_then_extracted_and_cache_ls_shows_the_verdict(
    registry: Registry, pusher: Pusher, repo_prefix: str, tmp_path: Path, key: Key
) -> None:
    repo = f"{repo_prefix}/app"
    ref, digest = pushed_image(pusher, repo)
    sign(pusher, repo, digest, key)
    path = write_policy(tmp_path, policy("signed-apps", f"{registry.host}/{repo_prefix}/**", key))
    done = pull_image(ref, tmp_path / "out", tmp_path / "cache", path)
    assert done.exit_code == 0, done.stderr
    assert (tmp_path / "out/app.yml").read_text() == "signed\n"
    listed = run_cli("cache", "ls", "--cache-dir", str(tmp_path / "cache"), "--json")
    entries = {e["ref"]: e for e in json.loads(listed.stdout)["result"]["entries"]}
    assert entries[ref]["signature"] == "verified"
    assert {e["kind"] for e in entries.values()} == {"image", "signature"}
    table = run_cli("cache", "ls", "--cache-dir", str(tmp_path / "cache"))
    assert "SIGNATURE" in table.stdout.splitlines()[0]


@pytest.mark.parametrize("kind", ["p384", "rsa", "ed25519"])
def test_every_supported_key_type_verifies(
    registry: Registry, pusher: Pusher, repo_prefix: str, tmp_path: Path, kind: str
) -> None:
    signer = Key.make(kind)
    repo = f"{repo_prefix}/app"
    ref, digest = pushed_image(pusher, repo, kind)
    sign(pusher, repo, digest, signer)
    path = write_policy(tmp_path, policy("p", f"{registry.host}/{repo}*", signer))
    done = pull_image(ref, tmp_path / "out", tmp_path / "cache", path)
    assert done.exit_code == 0, done.stderr


@pytest.mark.parametrize(
    ("case", "reason"),
    [
        ("unsigned", "no signatures (no '"),
        ("wrong-key", "no signature verifies with its key (1 checked)"),
        ("other-digest", "a signature verifies, but its payload names sha256:"),
        ("tampered", "no signature verifies with its key (1 checked)"),
        ("bad-blob", "its signatures could not be read:"),
    ],
)
def test_a_failing_signature_is_exit_1_naming_image_and_policy_and_the_target_is_untouched(
    registry: Registry, pusher: Pusher, repo_prefix: str, tmp_path: Path, key: Key, case: str, reason: str
) -> None:
    repo = f"{repo_prefix}/app"
    ref, digest = pushed_image(pusher, repo)
    other_ref, other_digest = pushed_image(pusher, repo, "another image\n")
    if case == "wrong-key":
        sign(pusher, repo, digest, Key.make("p256"))
    elif case == "other-digest":
        sign(pusher, repo, digest, key, names=other_digest)
    elif case == "tampered":
        sign(pusher, repo, digest, key, tamper=True)
    elif case == "bad-blob":
        sign(pusher, repo, digest, key, size_skew=-1)
    path = write_policy(tmp_path, policy("signed-apps", f"{registry.host}/{repo}@*", key))
    out = tmp_path / "out"
    out.mkdir()
    (out / "keep.txt").write_text("previous\n")
    done = pull_image(ref, out, tmp_path / "cache", path)
    assert done.exit_code == 1, done.stderr
    assert "Extracting" not in done.stderr
    assert (
        f"\nocivendir: Error: image '{ref}' is not allowed by signature policy 'signed-apps' ({path}): "
        "authority 'key-0': "
    ) in done.stderr
    assert reason in done.stderr
    assert sorted(p.name for p in out.iterdir()) == ["keep.txt"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cache", "out", "policy.yaml"]
    assert other_ref != ref


def test_an_image_no_policy_matches_is_served_as_today_without_asking_for_signatures(
    registry: Registry, pusher: Pusher, repo_prefix: str, tmp_path: Path, key: Key
) -> None:
    ref, _ = pushed_image(pusher, f"{repo_prefix}/app")
    path = write_policy(tmp_path, policy("elsewhere", "other.example.com/**", key))
    mark = registry.mark()
    done = pull_image(ref, tmp_path / "out", tmp_path / "cache", path)
    assert done.exit_code == 0, done.stderr
    assert not [r for r in registry.since(mark) if ".sig" in r[1]]


def test_warn_mode_serves_the_content_with_a_warning(
    registry: Registry, pusher: Pusher, repo_prefix: str, tmp_path: Path, key: Key
) -> None:
    ref, _ = pushed_image(pusher, f"{repo_prefix}/app")
    path = write_policy(tmp_path, policy("soft", f"{registry.host}/{repo_prefix}/**", key, mode="warn"))
    done = pull_image(ref, tmp_path / "out", tmp_path / "cache", path)
    assert done.exit_code == 0, done.stderr
    assert (tmp_path / "out/app.yml").is_file()
    warning = f"ocivendir: Warning: image '{ref}' is not allowed by signature policy 'soft' ({path}): "
    assert warning in done.stderr
    assert "(mode: warn, so it is used anyway)" in done.stderr


def test_several_policies_must_all_pass_and_any_authority_of_one_suffices(
    registry: Registry, pusher: Pusher, repo_prefix: str, tmp_path: Path, key: Key
) -> None:
    repo = f"{repo_prefix}/app"
    ref, digest = pushed_image(pusher, repo)
    sign(pusher, repo, digest, key)
    other = Key.make("p256")
    either = policy("either", f"{registry.host}/{repo}*", other, key)
    only_other = policy("only-other", f"{registry.host}/{repo_prefix}/**", other)
    directory = tmp_path / "policies"
    directory.mkdir()
    write_policy(directory, either, "a.yaml")
    assert pull_image(ref, tmp_path / "one", tmp_path / "cache", directory).exit_code == 0
    write_policy(directory, only_other, "b.yaml")
    done = pull_image(ref, tmp_path / "two", tmp_path / "cache", directory)
    assert done.exit_code == 1
    assert "signature policy 'only-other'" in done.stderr
    assert "'either'" not in done.stderr


def sync_config(work: Path, ref: str, *, recursive: bool = False, lazy: bool = False) -> None:
    (work / "vendir.yml").write_text(
        HEAD
        + textwrap.dedent(f"""\
        directories:
        - path: vendor
          contents:
          - path: app
            lazy: {str(lazy).lower()}
            imgpkgBundle: {{image: "{ref}", recursive: {str(recursive).lower()}}}
        """)
    )


def sync(work: Path, cache: Path, policy_path: Path, *extra: str) -> object:
    return run_cli("sync", "--chdir", str(work), "--cache-dir", str(cache), "--json", "--policy", str(policy_path),
                   *extra)  # fmt: skip


def test_a_warm_signed_sync_makes_no_request_works_offline_and_a_changed_policy_verifies_again(
    own_registry: Registry, tmp_path: Path, key: Key
) -> None:
    pusher = Pusher(own_registry)
    published = publish_bundle(pusher, "sig", images=1)
    sign(pusher, published.bundle_repo, published.bundle.digest, key)
    ref = published.ref(own_registry)
    work, cache = tmp_path / "work", tmp_path / "cache"
    work.mkdir()
    sync_config(work, ref)
    path = write_policy(tmp_path, policy("bundles", f"{own_registry.host}/sig/**", key))
    cold = sync(work, cache, path)
    assert cold.exit_code == 0, cold.stderr
    assert (work / "vendor/app/config/app.yml").is_file()

    mark = own_registry.mark()
    warm = sync(work, cache, path)
    assert warm.exit_code == 0, warm.stderr
    assert own_registry.since(mark) == []
    assert json.loads(warm.stdout)["result"]["requests"]["total"] == 0

    assert sync(work, cache, path, "--offline").exit_code == 0
    changed = write_policy(tmp_path, policy("bundles", f"{own_registry.host}/sig/**", Key.make("p256"), key))
    mark = own_registry.mark()
    again = sync(work, cache, changed)
    assert again.exit_code == 0, again.stderr
    assert [r for r in own_registry.since(mark) if ".sig" in r[1]]

    own_registry.stop()
    stopped = sync(work, cache, changed)
    assert stopped.exit_code == 0, stopped.stderr
    unverified = write_policy(tmp_path, policy("bundles", f"{own_registry.host}/sig/**", Key.make("p256")), "new.yaml")
    refused = sync(work, cache, unverified)
    assert refused.exit_code == 1
    assert (work / "vendor/app/config/app.yml").is_file()


def test_a_lazy_content_synced_before_a_policy_is_judged_by_it_once_then_kept(
    registry: Registry, pusher: Pusher, repo_prefix: str, tmp_path: Path, key: Key
) -> None:
    """A lazy bundle is kept unfetched only when it passed the policy files in force.

    A sync a policy governs vouches for its whole output. Synced with no policy, then under one that refuses it, the
    sync fails and the tree stays; under one it passes, it is fetched once (from the cache) and kept lazily from then
    on; an edited policy judges it again.
    """
    published = publish_bundle(pusher, f"{repo_prefix}/lazy", images=1)
    sign(pusher, published.bundle_repo, published.bundle.digest, key)
    ref = published.ref(registry)
    work, cache = tmp_path / "work", tmp_path / "cache"
    work.mkdir()
    sync_config(work, ref, lazy=True)
    unsigned = run_cli("sync", "--chdir", str(work), "--cache-dir", str(cache))
    assert unsigned.exit_code == 0, unsigned.stderr
    glob = f"{registry.host}/{repo_prefix}/lazy/**"

    refusing = write_policy(tmp_path, policy("other-key", glob, Key.make("p256")), "refusing.yaml")
    refused = sync(work, cache, refusing)
    assert refused.exit_code == 1
    assert "signature policy 'other-key'" in refused.stderr
    assert (work / "vendor/app/config/app.yml").is_file()

    passing = write_policy(tmp_path, policy("bundles", glob, key))
    judged = sync(work, cache, passing)
    assert judged.exit_code == 0, judged.stderr
    assert counts(judged) == (1, 0)
    kept = sync(work, cache, passing)
    assert kept.exit_code == 0, kept.stderr
    assert counts(kept) == (0, 1)
    assert json.loads(kept.stdout)["result"]["requests"]["total"] == 0

    edited = write_policy(tmp_path, policy("bundles", glob, key, Key.make("p256")), "edited.yaml")
    again = sync(work, cache, edited)
    assert again.exit_code == 0, again.stderr
    assert counts(again) == (1, 0)
    assert "Skipping fetch: vendor + app" in run_cli("sync", "--chdir", str(work), "--cache-dir", str(cache)).stderr


def counts(done: object) -> tuple[int, int]:
    """A --json sync's (fetched, skipped) contents."""
    result = json.loads(done.stdout)["result"]  # type: ignore[attr-defined]
    return result["fetched"], result["skipped"]


def test_a_relocated_bundle_verifies_in_its_new_repository(
    registry: Registry, pusher: Pusher, repo_prefix: str, tmp_path: Path, key: Key
) -> None:
    published = publish_bundle(pusher, repo_prefix, images=1)
    sign(pusher, published.bundle_repo, published.bundle.digest, key)
    relocate(pusher, published, f"{repo_prefix}/copied")  # without the .sig tag
    relocate(pusher, published, f"{repo_prefix}/mirror")
    sign(pusher, published.bundle_repo, published.bundle.digest, key, into=f"{repo_prefix}/mirror")  # `imgpkg copy`
    path = write_policy(tmp_path, policy("bundles", f"{registry.host}/{repo_prefix}/**", key))
    mark = registry.mark()
    mirror = published.ref(registry, f"{repo_prefix}/mirror")
    done = run_cli("pull", "-b", mirror, "-o", str(tmp_path / "m"), "--cache-dir", str(tmp_path / "c"),
                   "--policy", str(path))  # fmt: skip
    assert done.exit_code == 0, done.stderr
    asked = [r[1] for r in registry.since(mark) if ".sig" in r[1]]
    assert asked
    assert all(f"/v2/{repo_prefix}/mirror/" in p for p in asked)
    copied = published.ref(registry, f"{repo_prefix}/copied")
    done = run_cli("pull", "-b", copied, "-o", str(tmp_path / "c2"), "--cache-dir", str(tmp_path / "c"),
                   "--policy", str(path))  # fmt: skip
    assert done.exit_code == 1
    assert f"image '{copied}' is not allowed by signature policy 'bundles'" in done.stderr


def test_nested_bundles_are_verified_each_before_extraction(
    registry: Registry, pusher: Pusher, repo_prefix: str, tmp_path: Path, key: Key
) -> None:
    inner = publish_bundle(pusher, f"{repo_prefix}/inner", images=1)
    outer = publish_outer_bundle(pusher, f"{repo_prefix}/outer", inner)
    sign(pusher, outer.bundle_repo, outer.bundle.digest, key)
    both = write_policy(
        tmp_path,
        policy("outer", f"{registry.host}/{outer.bundle_repo}@*", key)
        + "---\n"
        + policy("inner", f"{registry.host}/{inner.bundle_repo}@*", key),
        "both.yaml",
    )
    ref = outer.ref(registry)
    out = tmp_path / "out"
    done = run_cli("pull", "-b", ref, "-r", "-o", str(out), "--cache-dir", str(tmp_path / "c"), "--policy", str(both))
    assert done.exit_code == 1
    assert f"image '{inner.ref(registry)}' is not allowed by signature policy 'inner'" in done.stderr
    assert not out.exists()
    sign(pusher, inner.bundle_repo, inner.bundle.digest, key)
    done = run_cli("pull", "-b", ref, "-r", "-o", str(out), "--cache-dir", str(tmp_path / "c"), "--policy", str(both))
    assert done.exit_code == 0, done.stderr
    assert (out / ".imgpkg/bundles" / f"sha256-{inner.bundle.hex}" / ".imgpkg/images.yml").is_file()
    work = tmp_path / "work"
    work.mkdir()
    sync_config(work, ref, recursive=True)
    assert sync(work, tmp_path / "c", both).exit_code == 0
    rows = sqlite3.connect(tmp_path / "c/index.db").execute("SELECT ref, verdict FROM signatures").fetchall()
    assert {r for r, verdict in rows if verdict == "verified"} == {ref, inner.ref(registry)}
    assert {r for r, verdict in rows if verdict != "verified"} == {"policy-files"}  # the policy files parsed


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("apiVersion: policy.sigstore.dev/v1alpha9\nkind: ClusterImagePolicy\n", "apiVersion: expected"),
        (
            "apiVersion: policy.sigstore.dev/v1beta1\nkind: ClusterImagePolicy\nmetadata: {name: p}\n"
            "spec: {images: [{glob: '**'}], authorities: [{key: {kms: 'awskms:///x'}}]}\n",
            "(policy 'p'): spec.authorities[0].key.kms: this field is not supported by ocivendir",
        ),
        (
            "apiVersion: policy.sigstore.dev/v1beta1\nkind: ClusterImagePolicy\nmetadata: {name: p}\n"
            "spec: {images: [{glob: '**'}], authorities: [{static: {action: pass}}], bogus: 1}\n",
            "(policy 'p'): spec.bogus: unknown field",
        ),
        ("{{{", "Reading signature policy"),
    ],
)
def test_a_malformed_policy_is_exit_2_naming_the_field(
    registry: Registry, pusher: Pusher, repo_prefix: str, tmp_path: Path, text: str, message: str
) -> None:
    ref, _ = pushed_image(pusher, f"{repo_prefix}/app")
    path = write_policy(tmp_path, text)
    mark = registry.mark()
    done = pull_image(ref, tmp_path / "out", tmp_path / "cache", path)
    assert done.exit_code == 2
    assert done.stderr.startswith(f"ocivendir: Error: Reading signature policy '{path}'")
    assert message in done.stderr
    assert registry.since(mark) == []
    assert not (tmp_path / "out").exists()


def test_a_policy_key_that_is_not_a_key_is_exit_2(
    registry: Registry, pusher: Pusher, repo_prefix: str, tmp_path: Path
) -> None:
    repo = f"{repo_prefix}/app"
    ref, digest = pushed_image(pusher, repo)
    sign(pusher, repo, digest, Key.make())
    text = policy("p", f"{registry.host}/{repo}*", Key.make()).replace("MF", "XX", 1)
    done = pull_image(ref, tmp_path / "out", tmp_path / "cache", write_policy(tmp_path, text))
    assert done.exit_code == 2
    assert "signature policy 'p'" in done.stderr
    assert "authority 'key-0': key.data is not a usable PEM public key" in done.stderr


def test_vendir_mode_through_kapp_controllers_stdin_with_a_policy_configmap(
    own_registry: Registry,
    vendir_binary: Path,  # noqa: F811 - the fixture of test_kapp_controller, imported
    tmp_path: Path,
    key: Key,
) -> None:
    pusher = Pusher(own_registry)
    signed = publish_bundle(pusher, "kc/signed", images=1)
    sign(pusher, signed.bundle_repo, signed.bundle.digest, key)
    unsigned = publish_bundle(pusher, "kc/unsigned", images=1)
    configmap = tmp_path / "policies"  # as kubelet mounts a ConfigMap: ..data links beside the keys
    (configmap / "..2026_12_04_00_00_00.1").mkdir(parents=True)
    (configmap / "..2026_12_04_00_00_00.1/kc.yaml").write_text(policy("kc", f"{own_registry.host}/kc/**", key))
    (configmap / "..data").symlink_to("..2026_12_04_00_00_00.1")
    (configmap / "kc.yaml").symlink_to("..data/kc.yaml")
    controller = Controller(vendir_binary, tmp_path / "kapp")
    stream = PLACEHOLDER + config("imgpkgBundle", signed.ref(own_registry))
    done, cwd = controller.fetch(stream, OCIVENDIR_POLICY=str(configmap))
    assert done.returncode == 0, done.stderr
    assert done.stdout == lock("imgpkgBundle", signed.ref(own_registry))
    assert done.stderr == ""
    assert (cwd / "0/config/app.yml").is_file()
    mark = own_registry.mark()
    assert controller.fetch(stream, OCIVENDIR_POLICY=str(configmap))[0].returncode == 0
    assert own_registry.since(mark) == []

    done, cwd = controller.fetch(PLACEHOLDER + config("imgpkgBundle", unsigned.ref(own_registry)),
                                 OCIVENDIR_POLICY=str(configmap))  # fmt: skip
    assert done.returncode == 1
    assert done.stdout == ""
    assert done.stderr.startswith("vendir: Error: Syncing directory '0':")
    assert f"image '{unsigned.ref(own_registry)}' is not allowed by signature policy 'kc'" in done.stderr
    assert list(cwd.iterdir()) == []


def test_verify_relocation_reports_the_signature_status_of_each_bundle(
    registry: Registry, pusher: Pusher, repo_prefix: str, tmp_path: Path, key: Key
) -> None:
    published = publish_bundle(pusher, repo_prefix, images=1)
    relocate(pusher, published, f"{repo_prefix}/mirror")
    sign(pusher, published.bundle_repo, published.bundle.digest, key, into=f"{repo_prefix}/mirror")
    path = write_policy(tmp_path, policy("bundles", f"{registry.host}/{repo_prefix}/**", key))
    mirror, original = published.ref(registry, f"{repo_prefix}/mirror"), published.ref(registry)
    cache = str(tmp_path / "cache")
    done = run_cli("verify-relocation", "-b", mirror, "--cache-dir", cache, "--policy", str(path))
    assert done.exit_code == 0, done.stderr
    assert f"{mirror}: relocated (signature: verified)" in done.stdout
    done = run_cli("verify-relocation", "-b", original, "--cache-dir", cache, "--policy", str(path), "--json")
    assert done.exit_code == 1
    (report,) = json.loads(done.stdout)["result"]["bundles"]
    assert (report["verdict"], report["signature"], report["error"]) == ("not-relocated", "failed", None)
    assert f"image '{original}' is not allowed by signature policy 'bundles'" in done.stderr
    plain = run_cli("verify-relocation", "-b", mirror, "--cache-dir", cache, "--json")
    assert json.loads(plain.stdout)["result"]["bundles"][0]["signature"] is None


def test_signature_content_is_cached_whole_and_an_oversized_signature_blob_is_never_fetched(
    registry: Registry, pusher: Pusher, repo_prefix: str, tmp_path: Path, key: Key
) -> None:
    repo = f"{repo_prefix}/app"
    ref, digest = pushed_image(pusher, repo)
    sign(pusher, repo, digest, key)
    path = write_policy(tmp_path, policy("p", f"{registry.host}/{repo_prefix}/**", key))
    assert pull_image(ref, tmp_path / "out", tmp_path / "cache", path).exit_code == 0
    verified = run_cli("cache", "verify", "--cache-dir", str(tmp_path / "cache"), "--json")
    assert verified.exit_code == 0, verified.stdout
    assert json.loads(verified.stdout)["result"]["consistent"] is True

    big_repo = f"{repo_prefix}/big"
    big_ref, big_digest = pushed_image(pusher, big_repo)
    sign(pusher, big_repo, big_digest, key, size_skew=2 << 20)
    mark = registry.mark()
    done = pull_image(big_ref, tmp_path / "big", tmp_path / "cache", path)
    assert done.exit_code == 1
    assert "is not a signature image: over 256 layers or a blob over 1048576 bytes" in done.stderr
    blob_gets = [r[1] for r in registry.since(mark) if "/blobs/" in r[1] and r[0] == "GET"]
    assert len(blob_gets) == 1  # the image's own config (fetch_image reads it); no signature blob


@pytest.mark.parametrize("remembered_by", ["a sync the nested bundle failed", "a non-recursive pull"])
def test_a_lazy_recursive_bundle_is_not_kept_by_its_outer_bundles_verdict(
    registry: Registry, pusher: Pusher, repo_prefix: str, tmp_path: Path, key: Key, remembered_by: str
) -> None:
    """A lazy recursive bundle is judged again under a policy: its nested bundles' verdicts are their own (review).

    The outer bundle's pass is remembered as soon as it is judged: before its nested bundle is refused, or by a pull
    that never looks at the nested one. Kept by it, the refused nested bundle stayed with exit 0.
    """
    inner = publish_bundle(pusher, f"{repo_prefix}/inner", images=1)
    outer = publish_outer_bundle(pusher, f"{repo_prefix}/outer", inner)
    ref = outer.ref(registry)
    work, cache = tmp_path / "work", tmp_path / "cache"
    work.mkdir()
    sync_config(work, ref, recursive=True, lazy=True)
    assert run_cli("sync", "--chdir", str(work), "--cache-dir", str(cache)).exit_code == 0
    inner_only = write_policy(tmp_path, policy("inner", f"{registry.host}/{inner.bundle_repo}@*", key), "inner.yaml")
    if remembered_by == "a non-recursive pull":
        pulled = run_cli("pull", "-b", ref, "-o", str(tmp_path / "p"), "--cache-dir", str(cache),
                         "--policy", str(inner_only))  # fmt: skip
        assert pulled.exit_code == 0, pulled.stderr  # the outer bundle alone: no policy matches it
    else:
        refused = sync(work, cache, inner_only)
        assert refused.exit_code == 1, refused.stderr  # type: ignore[attr-defined]
        assert "signature policy 'inner'" in refused.stderr  # type: ignore[attr-defined]
    again = sync(work, cache, inner_only)
    assert again.exit_code == 1  # type: ignore[attr-defined]
    assert "signature policy 'inner'" in again.stderr  # type: ignore[attr-defined]
