"""Sigstore bundles attached as OCI 1.1 referrers: found through the referrers API or the `sha256-<hex>` tag schema.

Distribution 2.8 (the test registry) has no referrers API (it answers 404), so bundles pushed there are found through
the tag schema; the API path is served by a fault proxy in front of it (tests/support/faults.py) that answers the
referrers request with the index itself. Bundles are made by tests/support/sigstore.py: message signatures over the
manifest digest and DSSE in-toto statements, signed by a key or keylessly under a trusted root made for the tests.
"""

from __future__ import annotations

import base64
import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec

from tests.conftest import run_cli
from tests.integration.test_keyless import ISSUER, SUBJECT
from tests.integration.test_signatures import pull_image, pushed_image, sync, sync_config, write_policy
from tests.support.builders import Pusher, publish_bundle
from tests.support.faults import Rule, fault_proxy
from tests.support.registry import Registry
from tests.support.sigstore import OCI_INDEX, Sigstore, attach_bundle, bundle, keyless_policy, statement


@pytest.fixture(scope="module")
def sigstore() -> Sigstore:
    return Sigstore.make()


@pytest.fixture(scope="module")
def signer() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def key_policy(name: str, glob: str, key: ec.EllipticCurvePrivateKey) -> str:
    pem = key.public_key().public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    data = "".join(f"        {line}\n" for line in pem.decode().splitlines())
    return (
        f"apiVersion: policy.sigstore.dev/v1beta1\nkind: ClusterImagePolicy\nmetadata:\n  name: {name}\nspec:\n"
        f'  images:\n  - glob: "{glob}"\n  authorities:\n  - name: release\n    key:\n      data: |\n{data}'
    )


@pytest.mark.parametrize("form", ["message", "dsse"])
def test_a_bundle_signed_by_the_key_is_found_by_the_tag_schema_and_verifies(
    registry: Registry,
    pusher: Pusher,
    repo_prefix: str,
    tmp_path: Path,
    signer: ec.EllipticCurvePrivateKey,
    form: str,
) -> None:
    repo = f"{repo_prefix}/app"
    ref, digest = pushed_image(pusher, repo)
    told = statement(f"{registry.host}/{repo}", digest) if form == "dsse" else None
    referrer, _ = attach_bundle(pusher, repo, digest, bundle(digest=digest, statement_of=told, key=signer))
    path = write_policy(tmp_path, key_policy("bundled", f"{registry.host}/{repo}@*", signer))
    mark = registry.mark()
    done = pull_image(ref, tmp_path / "out", tmp_path / "cache", path)
    assert done.exit_code == 0, done.stderr
    asked = [path for _, path, *_ in registry.since(mark)]
    hexdigest = digest.split(":", 1)[1]
    assert f"/v2/{repo}/referrers/{digest}" in asked  # the API first: Distribution 2.8 answers 404
    assert f"/v2/{repo}/manifests/sha256-{hexdigest}" in asked  # then the tag schema
    listed = json.loads(run_cli("cache", "ls", "--cache-dir", str(tmp_path / "cache"), "--json").stdout)
    kinds = {e["ref"]: e["kind"] for e in listed["result"]["entries"]}
    assert kinds[f"{registry.host}/{repo}@{referrer}"] == "signature"


@pytest.mark.parametrize("form", ["message", "dsse"])
def test_a_keyless_bundle_verifies_against_the_trusted_root(
    registry: Registry, pusher: Pusher, repo_prefix: str, tmp_path: Path, sigstore: Sigstore, form: str
) -> None:
    repo = f"{repo_prefix}/app"
    ref, digest = pushed_image(pusher, repo)
    told = statement(f"{registry.host}/{repo}", digest) if form == "dsse" else None
    attach_bundle(pusher, repo, digest, bundle(digest=digest, statement_of=told, sigstore=sigstore))
    path = write_policy(
        tmp_path, keyless_policy("k", f"{registry.host}/{repo}@*", [{"issuer": ISSUER, "subject": SUBJECT}])
    )
    root = sigstore.trusted_root(tmp_path / "trusted_root.json")
    done = pull_image(ref, tmp_path / "out", tmp_path / "cache", path, "--trusted-root", str(root))
    assert done.exit_code == 0, done.stderr
    assert (tmp_path / "out/app.yml").is_file()


@pytest.mark.parametrize(
    ("case", "reason"),
    [
        ("other-digest", "a Sigstore bundle verifies, but it does not name sha256:"),
        ("tampered", "the bundle's signature does not verify"),
        ("wrong-key", "the bundle's signature does not verify"),
        ("none", "no Sigstore bundle (no referrers API answer, no referrers tag)"),
    ],
)
def test_a_bundle_that_does_not_hold_is_exit_1_and_nothing_is_extracted(
    registry: Registry,
    pusher: Pusher,
    repo_prefix: str,
    tmp_path: Path,
    signer: ec.EllipticCurvePrivateKey,
    case: str,
    reason: str,
) -> None:
    repo = f"{repo_prefix}/app"
    ref, digest = pushed_image(pusher, repo)
    _, other = pushed_image(pusher, repo, "another\n")
    if case == "other-digest":
        attach_bundle(pusher, repo, digest, bundle(digest=digest, statement_of=statement(repo, other), key=signer))
    elif case == "tampered":
        attach_bundle(pusher, repo, digest, bundle(digest=digest, key=signer, tamper=True))
    elif case == "wrong-key":
        attach_bundle(pusher, repo, digest, bundle(digest=digest, key=ec.generate_private_key(ec.SECP256R1())))
    path = write_policy(tmp_path, key_policy("bundled", f"{registry.host}/{repo}@*", signer))
    done = pull_image(ref, tmp_path / "out", tmp_path / "cache", path)
    assert done.exit_code == 1
    said = " ".join(done.stderr.split())
    assert f"image '{ref}' is not allowed by signature policy 'bundled' ({path}): authority 'release': " in said
    assert "no signatures (no '" in said  # the classic scheme was looked at first
    assert reason in said
    assert not (tmp_path / "out").exists()


def test_the_referrers_api_is_used_when_the_registry_has_one_and_the_tag_schema_is_not_asked(
    registry: Registry, pusher: Pusher, repo_prefix: str, tmp_path: Path, signer: ec.EllipticCurvePrivateKey
) -> None:
    repo = f"{repo_prefix}/app"
    _, digest = pushed_image(pusher, repo)
    _, index = attach_bundle(pusher, repo, digest, bundle(digest=digest, key=signer), tag_schema=False)
    with fault_proxy(registry.host) as proxy:
        proxy.rules.append(Rule("GET", f"/v2/{repo}/referrers/{digest}$", status=200, body=index,
                                headers={"Content-Type": OCI_INDEX}))  # fmt: skip
        path = write_policy(tmp_path, key_policy("bundled", f"{proxy.host}/{repo}@*", signer))
        done = pull_image(f"{proxy.host}/{repo}@{digest}", tmp_path / "out", tmp_path / "cache", path)
        assert done.exit_code == 0, done.stderr
        asked = [p for _, p, _ in proxy.log]
    assert asked.count(f"/v2/{repo}/referrers/{digest}") == 1
    assert not [p for p in asked if "sha256-" in p and ".sig" not in p]  # the tag schema was not needed


def test_a_warm_sync_verified_by_a_bundle_makes_no_request_and_works_with_the_registry_down(
    own_registry: Registry, tmp_path: Path, signer: ec.EllipticCurvePrivateKey
) -> None:
    pusher = Pusher(own_registry)
    published = publish_bundle(pusher, "bundled", images=1)
    repo, digest = published.bundle_repo, published.bundle.digest
    attach_bundle(pusher, repo, digest, bundle(digest=digest, statement_of=statement(repo, digest), key=signer))
    work, cache = tmp_path / "work", tmp_path / "cache"
    work.mkdir()
    sync_config(work, published.ref(own_registry))
    path = write_policy(tmp_path, key_policy("bundled", f"{own_registry.host}/bundled/**", signer))
    cold = sync(work, cache, path)
    assert cold.exit_code == 0, cold.stderr
    mark = own_registry.mark()
    warm = sync(work, cache, path)
    assert warm.exit_code == 0, warm.stderr
    assert own_registry.since(mark) == []
    assert json.loads(warm.stdout)["result"]["requests"]["total"] == 0
    own_registry.stop()
    assert sync(work, cache, path).exit_code == 0
    # a changed policy verifies again from the cached bundle: the referrers tag's last answer, the bundle by digest
    changed = write_policy(
        tmp_path, key_policy("bundled", f"{own_registry.host}/bundled/**", signer) + "  mode: enforce\n"
    )
    again = sync(work, cache, changed, "--offline", "--stale-if-error", "1h")
    assert again.exit_code == 0, again.stderr


def test_a_bundle_is_parsed_and_checked_once_whichever_authorities_ask(
    registry: Registry,
    pusher: Pusher,
    repo_prefix: str,
    tmp_path: Path,
    sigstore: Sigstore,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A bundle is parsed once, its Rekor entry read once, its chain and SCT checked once, the referrers index once.

    Two keyless authorities ask, the first naming someone else; only the identity match runs for each.
    """
    from ocivendir.sign import bundle as bundles  # noqa: PLC0415
    from ocivendir.sign import fulcio, rekor  # noqa: PLC0415

    calls: Counter[str] = Counter()
    for module, name in ((bundles, "parse_bundle"), (rekor, "rekor_entry"), (fulcio, "verify_certificate")):
        real = getattr(module, name)

        def counted(*args: object, _real: Any = real, _name: str = name, **kwargs: object) -> object:
            calls[_name] += 1
            return _real(*args, **kwargs)

        monkeypatch.setattr(module, name, counted)
    from ocivendir.oci import parsed as parsed_memo  # noqa: PLC0415 - where the engine's manifests are parsed
    from ocivendir.oci.manifest import Index  # noqa: PLC0415

    parse_manifest = parsed_memo.parse_manifest

    def parsed(raw: bytes, media_type: str | None = None) -> object:
        found = parse_manifest(raw, media_type)
        calls["an index parsed as a manifest"] += isinstance(found, Index)
        return found

    monkeypatch.setattr(parsed_memo, "parse_manifest", parsed)
    repo = f"{repo_prefix}/app"
    ref, digest = pushed_image(pusher, repo)
    attach_bundle(pusher, repo, digest, bundle(digest=digest, sigstore=sigstore))
    text = keyless_policy("k", f"{registry.host}/{repo}@*", [{"issuer": ISSUER, "subject": "else@example.com"}])
    text += (f"  - name: second\n    keyless:\n      url: https://fulcio.test\n      identities:\n"
             f"      - {{issuer: '{ISSUER}', subject: '{SUBJECT}'}}\n")  # fmt: skip
    root = sigstore.trusted_root(tmp_path / "trusted_root.json")
    done = pull_image(
        ref, tmp_path / "out", tmp_path / "cache", write_policy(tmp_path, text), "--trusted-root", str(root)
    )
    assert done.exit_code == 0, done.stderr
    assert calls == {"parse_bundle": 1, "rekor_entry": 1, "verify_certificate": 1, "an index parsed as a manifest": 0}


def _short_digest(data: bytes) -> bytes:
    doc = json.loads(data)
    doc["messageSignature"]["messageDigest"]["digest"] = base64.b64encode(b"\0" * 31).decode()
    return json.dumps(doc).encode()


def _entries_a_number(data: bytes) -> bytes:
    doc = json.loads(data)
    doc["verificationMaterial"]["tlogEntries"] = 5
    return json.dumps(doc).encode()


HOSTILE = {
    "short-digest": (_short_digest, "the bundle's message digest is 31 bytes, not the 32 of a SHA-256 digest"),
    "entries-a-number": (_entries_a_number, "the bundle's tlogEntries is not a list"),
}


@pytest.mark.parametrize(("spoil", "reason"), HOSTILE.values(), ids=HOSTILE.keys())
def test_a_hostile_bundle_is_one_that_does_not_verify_never_the_runs_end(
    registry: Registry,
    pusher: Pusher,
    repo_prefix: str,
    tmp_path: Path,
    signer: ec.EllipticCurvePrivateKey,
    spoil: Any,
    reason: str,
) -> None:
    # anyone who may attach a referrer ended the run with a Python error (ValueError, TypeError), even for an image
    # another authority of the policy passes (adversarial review of signatures)
    repo = f"{repo_prefix}/app"
    ref, digest = pushed_image(pusher, repo)
    attach_bundle(pusher, repo, digest, spoil(bundle(digest=digest, key=signer)))
    strict = write_policy(tmp_path, key_policy("bundled", f"{registry.host}/{repo}@*", signer))
    refused = pull_image(ref, tmp_path / "out", tmp_path / "cache", strict)
    assert refused.exit_code == 1
    assert reason in " ".join(refused.stderr.split())
    assert "Traceback" not in refused.stderr
    passing = key_policy("bundled", f"{registry.host}/{repo}@*", signer) + (
        "  - name: open\n    static: {action: pass}\n"
    )
    done = pull_image(ref, tmp_path / "out", tmp_path / "cache", write_policy(tmp_path, passing, "open.yaml"))
    assert done.exit_code == 0, done.stderr
