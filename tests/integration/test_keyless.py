"""Keyless signatures (`keyless` authorities) checked offline against a Sigstore trusted root read from a file.

The tests make their own Fulcio (root and intermediate CA), Rekor key and CT log key (tests/support/sigstore.py),
write them as a `trusted_root.json` in protobuf-specs' JSON form, sign as cosign's keyless flow does (certificate with
an SCT, Rekor's signed entry timestamp) and push cosign's classic `.sig` image to the real test registry.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import os
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import run_cli
from tests.integration.test_signatures import pull_image, pushed_image, sync, sync_config, write_policy
from tests.support.builders import Pusher, publish_bundle
from tests.support.registry import Registry
from tests.support.sigstore import NOW, Sigstore, keyless_payload, keyless_policy, push_keyless

ISSUER = "https://accounts.test"
SUBJECT = "dev@example.com"


@pytest.fixture(scope="module")
def sigstore() -> Sigstore:
    return Sigstore.make()


def pull(ref: str, tmp_path: Path, path: Path, root: Path | None, *extra: str) -> object:
    roots = ("--trusted-root", str(root)) if root is not None else ()
    return pull_image(ref, tmp_path / "out", tmp_path / "cache", path, *roots, *extra)


def signed_image(pusher: Pusher, repo: str, sigstore: Sigstore, **options: object) -> str:
    ref, digest = pushed_image(pusher, repo)
    tamper = bool(options.pop("tamper_payload", False))
    push_keyless(pusher, repo, digest, sigstore.keyless(keyless_payload(pusher, repo, digest), **options),  # type: ignore[arg-type]
                 tamper_payload=tamper)  # fmt: skip
    return ref


@pytest.mark.parametrize(
    "identity",
    [
        {"issuer": ISSUER, "subject": SUBJECT},
        {"issuerRegExp": r"^https://accounts\.test$", "subjectRegExp": r"@example\.com$"},
        {"issuer": ISSUER, "subjectRegExp": "^dev@"},
    ],
    ids=["exact", "regexp", "mixed"],
)
def test_a_keyless_signature_by_a_listed_identity_verifies_and_is_extracted(
    registry: Registry, pusher: Pusher, repo_prefix: str, tmp_path: Path, sigstore: Sigstore, identity: dict[str, str]
) -> None:
    repo = f"{repo_prefix}/app"
    ref = signed_image(pusher, repo, sigstore)
    path = write_policy(tmp_path, keyless_policy("keyless", f"{registry.host}/{repo}@*", [identity]))
    done = pull(ref, tmp_path, path, sigstore.trusted_root(tmp_path / "trusted_root.json"))
    assert done.exit_code == 0, done.stderr
    assert (tmp_path / "out/app.yml").read_text() == "signed\n"
    listed = json.loads(run_cli("cache", "ls", "--cache-dir", str(tmp_path / "cache"), "--json").stdout)
    assert {e["ref"]: e["signature"] for e in listed["result"]["entries"]}[ref] == "verified"


@pytest.mark.parametrize("zone", ["Asia/Kolkata", "America/New_York"])
def test_a_keyless_signature_verifies_whatever_the_machines_time_zone(
    registry: Registry,
    pusher: Pusher,
    repo_prefix: str,
    tmp_path: Path,
    sigstore: Sigstore,
    monkeypatch: pytest.MonkeyPatch,
    zone: str,
) -> None:
    # the SCT's time (a naive UTC datetime from cryptography) was read as local time: refused east or west of UTC
    monkeypatch.setenv("TZ", zone)
    time.tzset()
    try:
        repo = f"{repo_prefix}/app"
        ref = signed_image(pusher, repo, sigstore)
        path = write_policy(
            tmp_path, keyless_policy("keyless", f"{registry.host}/{repo}@*", [{"issuer": ISSUER, "subject": SUBJECT}])
        )
        done = pull(ref, tmp_path, path, sigstore.trusted_root(tmp_path / "trusted_root.json"))
    finally:
        monkeypatch.delenv("TZ")
        time.tzset()
    assert done.exit_code == 0, done.stderr


def test_the_chain_may_come_from_the_signatures_chain_annotation(
    registry: Registry, pusher: Pusher, repo_prefix: str, tmp_path: Path, sigstore: Sigstore
) -> None:
    repo = f"{repo_prefix}/app"
    ref = signed_image(pusher, repo, sigstore)
    path = write_policy(
        tmp_path, keyless_policy("k", f"{registry.host}/{repo}@*", [{"issuer": ISSUER, "subject": SUBJECT}])
    )
    root = sigstore.trusted_root(tmp_path / "root-only.json", chain_in_root=False)  # only the root CA: no intermediate
    done = pull(ref, tmp_path, path, root)
    assert done.exit_code == 0, done.stderr


def _other_ca(sigstore: Sigstore) -> Sigstore:
    return dataclasses.replace(Sigstore.make("rogue"), rekor=sigstore.rekor, ctlog=sigstore.ctlog)


def test_a_crafted_subject_cannot_make_an_identity_regexp_backtrack(
    registry: Registry, pusher: Pusher, repo_prefix: str, tmp_path: Path, sigstore: Sigstore
) -> None:
    """The signer chooses its certificate's subject: matching it is RE2's linear time, as in cosign, so it returns.

    Python's re took 5.9 s for 27 characters, doubling with each; 60 here would take centuries. The pull runs in its
    own process, killed after two minutes, so that a regression fails instead of hanging the suite.
    """
    repo = f"{repo_prefix}/app"
    subject = "a" * 60 + "!@example.com"
    ref = signed_image(pusher, repo, sigstore, subject=subject)
    identity = {"issuer": ISSUER, "subjectRegExp": r"^(a+)+@example\.com$"}
    path = write_policy(tmp_path, keyless_policy("keyless", f"{registry.host}/{repo}@*", [identity]))
    root = sigstore.trusted_root(tmp_path / "trusted_root.json")
    args = ["pull", "-i", ref, "-o", str(tmp_path / "out"), "--cache-dir", str(tmp_path / "cache"),
            "--policy", str(path), "--trusted-root", str(root)]  # fmt: skip
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OCIVENDIR_", "IMGPKG_"))}
    done = subprocess.run([sys.executable, "-m", "ocivendir", *args], capture_output=True, text=True, env=env,
                          check=False, timeout=120)  # fmt: skip
    assert done.returncode == 1, done.stderr
    assert f"(issuer '{ISSUER}', subject '{subject}') matches none of the authority's identities" in done.stderr
    assert not (tmp_path / "out").exists()


def test_an_identity_regexp_go_refuses_is_exit_2_before_any_request(
    registry: Registry, pusher: Pusher, repo_prefix: str, tmp_path: Path, sigstore: Sigstore
) -> None:
    """A lookahead (Python's re reads it, Go's regexp does not) makes the policy malformed, not a failed match."""
    repo = f"{repo_prefix}/app"
    ref = signed_image(pusher, repo, sigstore)
    identity = {"issuer": ISSUER, "subjectRegExp": "^(?=dev)dev@"}
    path = write_policy(tmp_path, keyless_policy("keyless", f"{registry.host}/{repo}@*", [identity]))
    mark = registry.mark()
    done = pull(ref, tmp_path, path, sigstore.trusted_root(tmp_path / "trusted_root.json"))
    assert done.exit_code == 2, done.stderr
    assert (
        f"Reading signature policy '{path}' (policy 'keyless'): spec.authorities[0].keyless.identities[0]."
        "subjectRegExp: invalid regular expression: invalid perl operator: (?="
    ) in done.stderr
    assert registry.since(mark) == []
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    ("case", "reason"),
    [
        ("wrong-identity", f"the certificate's identity (issuer '{ISSUER}', subject '{SUBJECT}') matches none of"),
        ("wrong-issuer", f"the certificate's identity (issuer '{ISSUER}', subject '{SUBJECT}') matches none of"),
        ("expired", "the certificate was not valid at the signing time"),
        ("not-yet-valid", "the certificate was not valid at the signing time"),
        ("other-ca", "the certificate does not chain to the trusted root at the signing time"),
        ("bad-set", "the Rekor bundle's signed entry timestamp does not verify with the trusted root's log key"),
        ("tampered-payload", "the signature does not verify with its certificate's key"),
        ("unsigned", "no signatures (no '"),
    ],
)
def test_a_keyless_signature_that_does_not_hold_is_exit_1_naming_the_reason(
    registry: Registry, pusher: Pusher, repo_prefix: str, tmp_path: Path, sigstore: Sigstore, case: str, reason: str
) -> None:
    repo = f"{repo_prefix}/app"
    identity = {"issuer": ISSUER, "subject": SUBJECT}
    options: dict[str, object] = {}
    signer = sigstore
    if case == "wrong-identity":
        identity = {"issuer": ISSUER, "subject": "someone-else@example.com"}
    elif case == "wrong-issuer":
        identity = {"issuerRegExp": "^https://token.actions", "subjectRegExp": ".*"}
    elif case == "expired":  # valid for ten minutes that ended an hour before Rekor integrated the entry
        options["lifetime"] = (NOW - dt.timedelta(minutes=70), NOW - dt.timedelta(minutes=60))
    elif case == "not-yet-valid":
        options["integrated"] = NOW - dt.timedelta(hours=1)
    elif case == "other-ca":
        signer = _other_ca(sigstore)
    elif case == "bad-set":
        options["rekor"] = Sigstore.make("forger").rekor
    elif case == "tampered-payload":
        options["tamper_payload"] = True
    ref = pushed_image(pusher, repo)[0] if case == "unsigned" else signed_image(pusher, repo, signer, **options)
    path = write_policy(tmp_path, keyless_policy("keyless", f"{registry.host}/{repo}@*", [identity]))
    out = tmp_path / "out"
    out.mkdir()
    (out / "keep.txt").write_text("previous\n")
    done = pull(ref, tmp_path, path, sigstore.trusted_root(tmp_path / "trusted_root.json"))
    assert done.exit_code == 1, done.stderr
    assert f"image '{ref}' is not allowed by signature policy 'keyless' ({path}): authority 'keyless': " in done.stderr
    assert reason in done.stderr
    assert sorted(p.name for p in out.iterdir()) == ["keep.txt"]


def test_a_signature_without_certificate_or_rekor_bundle_is_refused_by_a_keyless_authority(
    registry: Registry, pusher: Pusher, repo_prefix: str, tmp_path: Path, sigstore: Sigstore
) -> None:
    from tests.support.cosign import Key, sign  # noqa: PLC0415

    repo = f"{repo_prefix}/app"
    ref, digest = pushed_image(pusher, repo)
    sign(pusher, repo, digest, Key.make())
    path = write_policy(
        tmp_path, keyless_policy("k", f"{registry.host}/{repo}@*", [{"issuer": ISSUER, "subject": SUBJECT}])
    )
    done = pull(ref, tmp_path, path, sigstore.trusted_root(tmp_path / "trusted_root.json"))
    assert done.exit_code == 1
    assert "no valid keyless signature (1 checked: the signature carries no certificate)" in done.stderr


def test_insecure_ignore_sct_accepts_a_certificate_whose_ct_log_the_root_does_not_list(
    registry: Registry, pusher: Pusher, repo_prefix: str, tmp_path: Path, sigstore: Sigstore
) -> None:
    repo = f"{repo_prefix}/app"
    ref = signed_image(pusher, repo, dataclasses.replace(sigstore, ctlog=Sigstore.make("ct").ctlog))
    identity = [{"issuer": ISSUER, "subject": SUBJECT}]
    root = sigstore.trusted_root(tmp_path / "trusted_root.json")
    strict = write_policy(tmp_path, keyless_policy("k", f"{registry.host}/{repo}@*", identity), "strict.yaml")
    refused = pull(ref, tmp_path, strict, root)
    assert refused.exit_code == 1
    assert "the certificate's SCT is not valid: SCT of an unknown CT log" in refused.stderr
    lax = write_policy(tmp_path, keyless_policy("k", f"{registry.host}/{repo}@*", identity,
                                                extra="      insecureIgnoreSCT: true\n"), "lax.yaml")  # fmt: skip
    assert pull(ref, tmp_path, lax, root).exit_code == 0


def test_a_keyless_policy_without_a_trusted_root_is_exit_2_before_any_request(
    registry: Registry,
    pusher: Pusher,
    repo_prefix: str,
    tmp_path: Path,
    sigstore: Sigstore,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    repo = f"{repo_prefix}/app"
    ref = signed_image(pusher, repo, sigstore)
    path = write_policy(
        tmp_path, keyless_policy("k", f"{registry.host}/{repo}@*", [{"issuer": ISSUER, "subject": SUBJECT}])
    )
    mark = registry.mark()
    done = pull(ref, tmp_path, path, None)
    assert done.exit_code == 2
    assert (
        f"ocivendir: Error: signature policy 'k' ({path}), authority 'keyless': a keyless authority needs a Sigstore "
        "trusted root: give --trusted-root PATH or OCIVENDIR_TRUSTED_ROOT (trusted_root.json)"
    ) in done.stderr
    assert registry.since(mark) == []
    assert not (tmp_path / "out").exists()
    root = sigstore.trusted_root(tmp_path / "trusted_root.json")
    monkeypatch.setenv("OCIVENDIR_TRUSTED_ROOT", str(root))
    from_env = pull(ref, tmp_path, path, None)
    assert from_env.exit_code == 0, from_env.stderr


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("{", "not JSON"),
        ("[]", "(document): expected a JSON object"),
        ('{"tlogs": []}', "certificateAuthorities: missing field"),
        ('{"mediaType": "application/x", "certificateAuthorities": []}', "mediaType: expected application/vnd.dev"),
        (
            '{"certificateAuthorities": [{"certChain": {"certificates": [{"rawBytes": "AAAA"}]}}], "tlogs": []}',
            "certificateAuthorities[0].certChain.certificates[0].rawBytes: not a DER certificate",
        ),
        ("missing", "No such file or directory"),
    ],
    ids=["syntax", "array", "no-ca", "media-type", "bad-cert", "missing-file"],
)
def test_a_malformed_trusted_root_is_exit_2_naming_the_file_and_field(
    registry: Registry, pusher: Pusher, repo_prefix: str, tmp_path: Path, sigstore: Sigstore, text: str, message: str
) -> None:
    repo = f"{repo_prefix}/app"
    ref = signed_image(pusher, repo, sigstore)
    path = write_policy(
        tmp_path, keyless_policy("k", f"{registry.host}/{repo}@*", [{"issuer": ISSUER, "subject": SUBJECT}])
    )
    root = tmp_path / "trusted_root.json"
    if text != "missing":
        root.write_text(text)
    out = tmp_path / "out"
    mark = registry.mark()
    done = pull(ref, tmp_path, path, root)
    assert done.exit_code == 2, done.stderr
    said = " ".join(done.stderr.split())  # long errors are wrapped
    assert f"ocivendir: Error: Reading Sigstore trusted root '{root}': " in said
    assert message in said
    assert not out.exists()
    assert registry.since(mark) == []  # parsed with the policies, before anything is asked of the registry


def test_a_warm_keyless_sync_makes_no_request_and_a_changed_trusted_root_verifies_again(
    own_registry: Registry, tmp_path: Path, sigstore: Sigstore
) -> None:
    pusher = Pusher(own_registry)
    published = publish_bundle(pusher, "keyless", images=1)
    repo, digest = published.bundle_repo, published.bundle.digest
    push_keyless(pusher, repo, digest, sigstore.keyless(keyless_payload(pusher, repo, digest)))
    work, cache = tmp_path / "work", tmp_path / "cache"
    work.mkdir()
    sync_config(work, published.ref(own_registry))
    path = write_policy(
        tmp_path, keyless_policy("k", f"{own_registry.host}/keyless/**", [{"issuer": ISSUER, "subject": SUBJECT}])
    )
    root = sigstore.trusted_root(tmp_path / "trusted_root.json")
    cold = sync(work, cache, path, "--trusted-root", str(root))
    assert cold.exit_code == 0, cold.stderr
    mark = own_registry.mark()
    warm = sync(work, cache, path, "--trusted-root", str(root))
    assert warm.exit_code == 0, warm.stderr
    assert own_registry.since(mark) == []
    assert json.loads(warm.stdout)["result"]["requests"]["total"] == 0

    own_registry.stop()
    assert sync(work, cache, path, "--trusted-root", str(root), "--offline").exit_code == 0
    # another root: verified again, from the cached signature (a .sig tag offline needs its recorded answer)
    other = Sigstore.make("other").trusted_root(tmp_path / "other_root.json")
    refused = sync(work, cache, path, "--trusted-root", str(other), "--offline", "--stale-if-error", "1h")
    assert refused.exit_code == 1
    assert "the Rekor bundle names a log the trusted root does not list" in refused.stderr


def test_a_signature_is_checked_once_whichever_authorities_ask_and_only_the_identity_per_authority(
    registry: Registry,
    pusher: Pusher,
    repo_prefix: str,
    tmp_path: Path,
    sigstore: Sigstore,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The signature's Rekor entry is parsed and checked once, and its certificate's chain and SCT once.

    Two keyless authorities ask, the first naming someone else; only the identity match runs for each.
    """
    from ocivendir.sign import fulcio, rekor  # noqa: PLC0415

    calls: Counter[str] = Counter()
    for module, name in ((fulcio, "verify_certificate"), (rekor, "classic_entry"), (rekor, "verify_entry")):
        real = getattr(module, name)

        def counted(*args: object, _real: Any = real, _name: str = name, **kwargs: object) -> object:
            calls[_name] += 1
            return _real(*args, **kwargs)

        monkeypatch.setattr(module, name, counted)
    repo = f"{repo_prefix}/app"
    ref = signed_image(pusher, repo, sigstore)
    text = keyless_policy("k", f"{registry.host}/{repo}@*", [{"issuer": ISSUER, "subject": "else@example.com"}])
    text += (f"  - name: second\n    keyless:\n      url: https://fulcio.test\n      identities:\n"
             f"      - {{issuer: '{ISSUER}', subject: '{SUBJECT}'}}\n")  # fmt: skip
    done = pull(ref, tmp_path, write_policy(tmp_path, text), sigstore.trusted_root(tmp_path / "trusted_root.json"))
    assert done.exit_code == 0, done.stderr
    assert calls == {"verify_certificate": 1, "classic_entry": 1, "verify_entry": 1}
