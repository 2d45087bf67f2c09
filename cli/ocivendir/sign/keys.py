"""Owns: public keys and signature checks, with the `cryptography` package (the only importer of it).

Keys are PEM `PUBLIC KEY` blocks: ECDSA (P-256, P-384, P-521), RSA and Ed25519, as cosign generates and
policy-controller accepts them. A signature is checked over the payload's bytes as cosign makes it: ECDSA (DER) and
RSA (PKCS #1 v1.5) over the authority's `hashAlgorithm` (sha256 unless set), Ed25519 over the bytes themselves.
"""

from __future__ import annotations

from ocivendir.errors import ConfigError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.types import PublicKeyTypes
    from cryptography.hazmat.primitives.asymmetric.utils import Prehashed
    from cryptography.hazmat.primitives.hashes import HashAlgorithm

    PublicKey = PublicKeyTypes

__all__ = ["load_public_key", "signature_verifies", "signature_verifies_with"]


def load_public_key(pem: str, where: str) -> PublicKeyTypes:
    """A PEM public key of a supported type, or ConfigError naming `where` (the policy and authority)."""
    from cryptography.exceptions import UnsupportedAlgorithm  # noqa: PLC0415 - only when verifying
    from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa  # noqa: PLC0415
    from cryptography.hazmat.primitives.serialization import load_pem_public_key  # noqa: PLC0415

    try:
        key = load_pem_public_key(pem.encode("utf-8"))
    except (ValueError, TypeError, UnicodeEncodeError, UnsupportedAlgorithm) as exc:  # a curve it cannot use, too
        raise ConfigError(f"{where}: key.data is not a usable PEM public key: {exc}") from None
    if not isinstance(key, ec.EllipticCurvePublicKey | rsa.RSAPublicKey | ed25519.Ed25519PublicKey):
        raise ConfigError(f"{where}: key.data: unsupported key type {type(key).__name__}")
    return key


def signature_verifies(key: PublicKeyTypes, signature: bytes, payload: bytes, hash_algorithm: str) -> bool:
    """Whether `signature` is the key's signature of `payload`, hashed with a policy's `hashAlgorithm` name."""
    from cryptography.hazmat.primitives import hashes  # noqa: PLC0415 - only when verifying

    algorithms: dict[str, hashes.HashAlgorithm] = {
        "sha224": hashes.SHA224(), "sha256": hashes.SHA256(), "sha384": hashes.SHA384(), "sha512": hashes.SHA512()
    }  # fmt: skip
    return signature_verifies_with(key, signature, payload, algorithms[hash_algorithm])


def signature_verifies_with(
    key: PublicKeyTypes, signature: bytes, payload: bytes, digest: HashAlgorithm | Prehashed | None
) -> bool:
    """Whether `signature` is the key's signature of `payload` (ECDSA and RSA over `digest`; Ed25519 needs none).

    `Prehashed(...)` means `payload` is already the digest (a Sigstore bundle's message signature).
    """
    from cryptography.exceptions import InvalidSignature  # noqa: PLC0415 - only when verifying
    from cryptography.hazmat.primitives import hashes  # noqa: PLC0415
    from cryptography.hazmat.primitives.asymmetric import ec, ed25519, padding, rsa  # noqa: PLC0415

    digest = digest or hashes.SHA256()
    try:
        if isinstance(key, ec.EllipticCurvePublicKey):
            key.verify(signature, payload, ec.ECDSA(digest))
        elif isinstance(key, rsa.RSAPublicKey):
            key.verify(signature, payload, padding.PKCS1v15(), digest)
        elif isinstance(key, ed25519.Ed25519PublicKey):
            key.verify(signature, payload)
        else:  # pragma: no cover - load_public_key and the trusted root admit no other type
            return False
    except InvalidSignature:
        return False
    return True
