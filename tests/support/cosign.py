"""Test-only cosign: keys made here, signatures written in cosign's documented classic format and pushed.

A signature of `repo@sha256:<hex>` is the image `repo:sha256-<hex>.sig`: an OCI manifest whose layers are
simple-signing payloads (`application/vnd.dev.cosign.simplesigning.v1+json`), each with its base64 signature in the
`dev.cosignproject.cosign/signature` annotation (cosign's pkg/oci/static and pkg/cosign/payload).
"""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass

from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, padding, rsa

from tests.support.builders import Pusher, sha

OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
OCI_CONFIG = "application/vnd.oci.image.config.v1+json"
SIMPLE_SIGNING = "application/vnd.dev.cosign.simplesigning.v1+json"
ANNOTATION = "dev.cosignproject.cosign/signature"

PrivateKey = ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey | ed25519.Ed25519PrivateKey


@dataclass
class Key:
    """A signing key and its public half in PEM."""

    private: PrivateKey

    @classmethod
    def make(cls, kind: str = "p256") -> Key:
        if kind == "p256":
            return cls(ec.generate_private_key(ec.SECP256R1()))
        if kind == "p384":
            return cls(ec.generate_private_key(ec.SECP384R1()))
        if kind == "rsa":
            return cls(rsa.generate_private_key(public_exponent=65537, key_size=2048))
        if kind == "ed25519":
            return cls(ed25519.Ed25519PrivateKey.generate())
        raise ValueError(kind)

    @property
    def pem(self) -> str:
        data = self.private.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )
        return data.decode()

    def sign(self, payload: bytes) -> bytes:
        if isinstance(self.private, ec.EllipticCurvePrivateKey):
            return self.private.sign(payload, ec.ECDSA(hashes.SHA256()))
        if isinstance(self.private, rsa.RSAPrivateKey):
            return self.private.sign(payload, padding.PKCS1v15(), hashes.SHA256())
        return self.private.sign(payload)


def payload(ref_repo: str, digest: str) -> bytes:
    """The simple-signing payload cosign signs for an image."""
    doc = {
        "critical": {
            "identity": {"docker-reference": ref_repo},
            "image": {"docker-manifest-digest": digest},
            "type": "cosign container image signature",
        },
        "optional": None,
    }
    return json.dumps(doc, separators=(",", ":")).encode()


def signature_manifest(layers: list[tuple[bytes, bytes]], *, size_skew: int = 0) -> tuple[bytes, bytes]:
    """The signature image's config and manifest for (payload, signature) layers."""
    config = json.dumps({
        "architecture": "", "created": "0001-01-01T00:00:00Z", "history": [{"created": "0001-01-01T00:00:00Z"}],
        "os": "", "rootfs": {"type": "layers", "diff_ids": [sha(p) for p, _ in layers]}, "config": {},
    }, separators=(",", ":")).encode()  # fmt: skip
    doc = {
        "schemaVersion": 2,
        "mediaType": OCI_MANIFEST,
        "config": {"mediaType": OCI_CONFIG, "size": len(config), "digest": sha(config)},
        "layers": [
            {"mediaType": SIMPLE_SIGNING, "size": len(p) + size_skew, "digest": sha(p),
             "annotations": {ANNOTATION: base64.b64encode(s).decode()}}
            for p, s in layers
        ],
    }  # fmt: skip
    return config, json.dumps(doc, separators=(",", ":")).encode()


def sign(pusher: Pusher, repo: str, digest: str, key: Key, *, names: str | None = None, tamper: bool = False,
         size_skew: int = 0, into: str | None = None) -> str:  # fmt: skip
    """Sign `repo@digest` with `key` as cosign does and push `sha256-<hex>.sig` (to `into`, default `repo`).

    `names`: the digest the payload names (another one for a forged claim); `tamper`: flip a bit of the signature;
    `size_skew`: declare the payload's size wrong (its fetch then fails verification). Returns the .sig tag.
    """
    body = payload(f"{pusher.registry.host}/{repo}", names or digest)
    signature = bytearray(key.sign(body))
    if tamper:
        signature[len(signature) // 2] ^= 0x01
    config, manifest = signature_manifest([(body, bytes(signature))], size_skew=size_skew)
    target = into or repo
    pusher.blob(target, config)
    pusher.blob(target, body)
    tag = f"sha256-{digest.split(':', 1)[1]}.sig"
    pusher.manifest(target, tag, manifest, OCI_MANIFEST)
    return tag


def policy(name: str, glob: str, *keys: Key, mode: str = "enforce", extra: str = "") -> str:
    """A ClusterImagePolicy document with one key authority per key."""
    authorities = "".join(
        f"  - name: key-{i}\n    key:\n      data: |\n" + "".join(f"        {line}\n" for line in key.pem.splitlines())
        for i, key in enumerate(keys)
    )
    return (
        f"apiVersion: policy.sigstore.dev/v1beta1\nkind: ClusterImagePolicy\nmetadata:\n  name: {name}\nspec:\n"
        f'  mode: {mode}\n  images:\n  - glob: "{glob}"\n  authorities:\n{authorities}{extra}'
    )
