"""The keyless and bundle checks on their own: trusted roots, Rekor entries, bundles and SCTs, malformed and forged.

The integration tests (test_keyless.py, test_sigstore_bundles.py) push the common cases to a registry; here each
check's edge is met directly, with the test Sigstore of tests/support/sigstore.py.
"""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import json
from pathlib import Path

import pytest
from cryptography.hazmat.primitives.asymmetric import ec

from ocivendir.errors import ConfigError
from ocivendir.sign.bundle import bundle_key_problem, bundle_keyless_problem, parse_bundle
from ocivendir.sign.keyless import Signed, keyless_problem
from ocivendir.sign.policy import Identity
from ocivendir.sign.rekor import EntryError, classic_entry, rekor_entry
from ocivendir.sign.trustroot import TrustedRoot, parse_trusted_root
from tests.support.sigstore import Sigstore, bundle, statement

DIGEST = "sha256:" + "ab" * 32
ME = (Identity(issuer="https://accounts.test", subject="dev@example.com"),)


@pytest.fixture(scope="module")
def sigstore() -> Sigstore:
    return Sigstore.make()


@pytest.fixture(scope="module")
def root(sigstore: Sigstore, tmp_path_factory: pytest.TempPathFactory) -> TrustedRoot:
    path = sigstore.trusted_root(tmp_path_factory.mktemp("root") / "trusted_root.json")
    return parse_trusted_root(path.read_bytes(), str(path))


def signed(sigstore: Sigstore, **changes: object) -> Signed:
    made = sigstore.keyless(b'{"critical": {}}')
    fields = {"payload": made.payload, "signature": made.signature, "certificate": made.certificate,
              "chain": made.chain, "bundle": made.bundle}  # fmt: skip
    return Signed(**{**fields, **changes})  # type: ignore[arg-type]


def test_a_trusted_root_reads_protobufs_json_and_proto_field_names_alike(sigstore: Sigstore, tmp_path: Path) -> None:
    path = sigstore.trusted_root(tmp_path / "trusted_root.json")
    camel = parse_trusted_root(path.read_bytes(), "r")
    snake = path.read_text().replace("rawBytes", "raw_bytes").replace("certChain", "cert_chain")
    parsed = parse_trusted_root(snake.encode(), "r")
    assert [len(a.chain) for a in parsed.authorities] == [len(a.chain) for a in camel.authorities] == [2]
    assert parsed.tlog(camel.tlogs[0].log_id) is not None


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda d: d["tlogs"][0]["publicKey"].update(rawBytes="%%"), "tlogs[0].publicKey.rawBytes: not base64"),
        (lambda d: d["tlogs"][0]["publicKey"].update(rawBytes="AAAA"), "tlogs[0].publicKey.rawBytes: not a public key"),
        (lambda d: d["certificateAuthorities"][0]["validFor"].update(start="yesterday"),
         "certificateAuthorities[0].validFor.start: not an RFC 3339 time"),
        (lambda d: d.pop("tlogs"), "tlogs: missing field"),
        (lambda d: d["certificateAuthorities"][0]["certChain"].update(certificates=[]), "expected a non-empty list"),
        (lambda d: d.update(ctlogs={}), "ctlogs: expected a list"),
    ],
)  # fmt: skip
def test_a_trusted_root_that_is_not_one_is_a_config_error_naming_the_field(
    sigstore: Sigstore, tmp_path: Path, edit: object, message: str
) -> None:
    doc = json.loads(sigstore.trusted_root(tmp_path / "r.json").read_text())
    edit(doc)  # type: ignore[operator]
    with pytest.raises(ConfigError) as caught:
        parse_trusted_root(json.dumps(doc).encode(), "r.json")
    assert caught.value.message.startswith("Reading Sigstore trusted root 'r.json': ")
    assert message in caught.value.message


def test_a_keyless_signature_holds_and_each_forgery_says_what_failed(sigstore: Sigstore, root: TrustedRoot) -> None:
    assert keyless_problem(signed(sigstore), ME, root, check_sct=True) is None
    made = signed(sigstore)
    assert keyless_problem(dataclasses.replace(made, bundle=""), ME, root, check_sct=True) == (
        "the signature carries no Rekor bundle"
    )
    other = signed(sigstore)  # the same payload signed again: the SET holds, its entry is not this signature
    problem = keyless_problem(dataclasses.replace(made, bundle=other.bundle), ME, root, check_sct=True)
    assert problem == "the Rekor entry records another signature"
    forged = json.loads(made.bundle)
    forged["Payload"]["integratedTime"] += 1  # the SET covers the time
    problem = keyless_problem(dataclasses.replace(made, bundle=json.dumps(forged)), ME, root, check_sct=True)
    assert problem == "the Rekor bundle's signed entry timestamp does not verify with the trusted root's log key"
    assert keyless_problem(dataclasses.replace(made, certificate="junk"), ME, root, check_sct=True).startswith(
        "the certificate is not a PEM certificate"
    )


@pytest.mark.parametrize(
    ("annotation", "message"),
    [
        ("not json", "the Rekor bundle annotation is not JSON"),
        ("{}", "the Rekor bundle annotation has no Payload"),
        ('{"Payload": {"logID": "zz"}}', "the Rekor bundle's logID is not hexadecimal"),
        ('{"Payload": {"logID": "00", "body": "AA==", "integratedTime": -1}}', "integratedTime is not a whole number"),
        ('{"Payload": {"logID": "00", "body": 5}}', "the Rekor bundle's body is missing"),
        ("[" * 100_000 + "]" * 100_000, "the Rekor bundle annotation is not JSON"),  # too deep: no RecursionError
        (
            '{"Payload": {"logID": "00", "body": "AA==", "integratedTime": 100000000000000000000}}',
            "integratedTime is not a whole number from 0 to 253402300799",
        ),  # past a datetime: no OverflowError
        (
            '{"Payload": {"logID": "00", "body": "AA==", "integratedTime": 1, "logIndex": "\u00b2"}}',
            "logIndex is not a whole number",
        ),  # "²".isdigit() is true, and int() refuses it
    ],
)
def test_a_malformed_rekor_bundle_annotation_is_named(annotation: str, message: str) -> None:
    with pytest.raises(EntryError, match=message):
        classic_entry(annotation)


def test_a_bundle_log_entry_without_a_promise_is_refused() -> None:
    with pytest.raises(EntryError, match="no inclusionPromise"):
        rekor_entry({"logId": {"keyId": "AA=="}, "integratedTime": "1", "logIndex": "1", "canonicalizedBody": "AA=="})


@pytest.mark.parametrize("form", ["message", "dsse"])
def test_bundles_by_key_and_keyless_verify_and_name_the_digest(
    sigstore: Sigstore, root: TrustedRoot, form: str
) -> None:
    key = ec.generate_private_key(ec.SECP256R1())
    told = statement("registry.test/app", DIGEST) if form == "dsse" else None
    by_key = parse_bundle(bundle(digest=DIGEST, statement_of=told, key=key))
    assert by_key.names(DIGEST)
    assert not by_key.names("sha256:" + "cd" * 32)
    assert bundle_key_problem(by_key, key.public_key(), "sha256") is None
    other = ec.generate_private_key(ec.SECP256R1()).public_key()
    assert bundle_key_problem(by_key, other, "sha256") == "the bundle's signature does not verify"
    keyless = parse_bundle(bundle(digest=DIGEST, statement_of=told, sigstore=sigstore))
    assert bundle_keyless_problem(keyless, ME, root, check_sct=True) is None
    assert bundle_keyless_problem(by_key, ME, root, check_sct=True) == "the bundle carries no certificate"


def test_a_bundle_nested_past_any_use_is_not_json_not_a_recursion_error() -> None:
    with pytest.raises(ValueError, match="the Sigstore bundle is not JSON"):
        parse_bundle(b"[" * 100_000 + b"]" * 100_000)


@pytest.mark.parametrize(
    ("doc", "message"),
    [
        ({}, "neither a messageSignature nor a dsseEnvelope"),
        ({"messageSignature": {"messageDigest": {"algorithm": "SHA2_384", "digest": "AA=="}}}, "not SHA2_256"),
        (
            {"dsseEnvelope": {"payloadType": "text/plain", "payload": "AA=="}},
            "payload type is .text/plain., not application",
        ),
        ({"dsseEnvelope": {"payloadType": "application/vnd.in-toto+json", "payload": "e30="}}, None),
    ],
)
def test_a_bundle_that_says_nothing_usable_is_named(doc: dict[str, object], message: str | None) -> None:
    data = json.dumps(doc).encode()
    if message is None:  # an envelope with no signature and no subject: parsed, and it names nothing
        parsed = parse_bundle(data)
        assert (parsed.signatures, parsed.subjects) == ((), frozenset())
        return
    with pytest.raises(ValueError, match=message):
        parse_bundle(data)


def test_a_dsse_bundle_whose_rekor_entry_records_another_payload_is_refused(
    sigstore: Sigstore, root: TrustedRoot
) -> None:
    doc = json.loads(bundle(digest=DIGEST, statement_of=statement("r", DIGEST), sigstore=sigstore))
    entry = doc["verificationMaterial"]["tlogEntries"][0]
    body = json.loads(base64.b64decode(entry["canonicalizedBody"]))
    body["spec"]["payloadHash"]["value"] = hashlib.sha256(b"other").hexdigest()
    tampered = dict(entry, canonicalizedBody=base64.b64encode(json.dumps(body).encode()).decode())
    doc["verificationMaterial"]["tlogEntries"] = [tampered]
    problem = bundle_keyless_problem(parse_bundle(json.dumps(doc).encode()), ME, root, check_sct=True)
    assert problem == "the Rekor bundle's signed entry timestamp does not verify with the trusted root's log key"
    promised, stamp = sigstore.promise(body)  # the log itself promised the other payload: the entry does not match
    doc["verificationMaterial"]["tlogEntries"] = [dict(
        tampered, canonicalizedBody=promised["body"], integratedTime=str(promised["integratedTime"]),
        logIndex=str(promised["logIndex"]), inclusionPromise={"signedEntryTimestamp": base64.b64encode(stamp).decode()},
    )]  # fmt: skip
    problem = bundle_keyless_problem(parse_bundle(json.dumps(doc).encode()), ME, root, check_sct=True)
    assert problem == "the Rekor entry records another payload digest"
