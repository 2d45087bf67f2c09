"""Signature checks: public keys of every supported type, cosign's payloads and signature annotations."""

from __future__ import annotations

import base64

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec

from ocivendir.errors import ConfigError
from ocivendir.oci.manifest import Descriptor
from ocivendir.oci.reference import Digest
from ocivendir.sign.cosign import SIGNATURE_ANNOTATION, payload_digest, signature_bytes
from ocivendir.sign.keys import load_public_key, signature_verifies
from tests.support.cosign import Key, payload

DIGEST = "sha256:5504f2a95018e3d8a52d80d9e1a128c6ea337581808ff9fe96f5628ce2336350"


@pytest.mark.parametrize("kind", ["p256", "p384", "rsa", "ed25519"])
def test_keys_of_every_supported_type_verify_their_signatures_and_nothing_else(kind: str) -> None:
    signer = Key.make(kind)
    public = load_public_key(signer.pem, "here")
    body = payload("r.example/app", DIGEST)
    signature = signer.sign(body)
    assert signature_verifies(public, signature, body, "sha256")
    assert not signature_verifies(public, signature, body + b" ", "sha256")
    assert not signature_verifies(load_public_key(Key.make(kind).pem, "here"), signature, body, "sha256")


def test_a_pem_that_is_not_a_key_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match=r"here: key\.data is not a usable PEM public key"):
        load_public_key("-----BEGIN PUBLIC KEY-----\nAAAA\n-----END PUBLIC KEY-----\n", "here")


def test_payloads_and_signature_annotations_are_read_defensively() -> None:
    assert payload_digest(payload("r.example/app", DIGEST)) == DIGEST
    for bad in (
        b"not json",
        b"[]",
        b'{"critical": {"image": {}}}',
        b'{"critical": {"image": {"docker-manifest-digest": 1}}}',
    ):
        assert payload_digest(bad) is None
    layer = Descriptor(media_type="x", digest=Digest("0" * 64), size=1, annotations={})
    assert signature_bytes(layer) is None
    layer.annotations[SIGNATURE_ANNOTATION] = base64.b64encode(b"sig").decode()
    assert signature_bytes(layer) == b"sig"
    layer.annotations[SIGNATURE_ANNOTATION] = "not base64!"
    assert signature_bytes(layer) is None


def test_a_key_on_a_curve_cryptography_cannot_use_is_a_config_error_naming_the_authority() -> None:
    # prime192v2 in place of prime256v1: cryptography raises UnsupportedAlgorithm, which ended the run (review)
    der = (
        ec.generate_private_key(ec.SECP256R1())
        .public_key()
        .public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
        .replace(bytes.fromhex("06082A8648CE3D030107"), bytes.fromhex("06082A8648CE3D030102"))
    )
    pem = "-----BEGIN PUBLIC KEY-----\n" + base64.encodebytes(der).decode() + "-----END PUBLIC KEY-----\n"
    with pytest.raises(ConfigError, match=r"policy 'p', authority 'k': key\.data is not a usable PEM public key"):
        load_public_key(pem, "policy 'p', authority 'k'")
