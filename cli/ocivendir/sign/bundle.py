"""Owns: Sigstore bundles (protobuf-specs `Bundle`, JSON, v0.1 to v0.3) — what one says about an image, and its checks.

A bundle holds one signature, either a `messageSignature` (the signature of a message whose `messageDigest` is given:
for an image, the manifest itself, so the digest must be the manifest digest) or a `dsseEnvelope` (an in-toto
statement, `application/vnd.in-toto+json`, whose `subject[].digest.sha256` must name the manifest; the signature is
over DSSE's pre-authentication encoding of the payload type and payload). Its `verificationMaterial` carries the
signer's certificate (`certificate`, or `x509CertificateChain.certificates`, leaf first) or only a key hint, and the
Rekor entries (`tlogEntries[]`) whose signed entry timestamp a keyless check needs. A key authority checks the
signature with its key; a keyless one checks it with the certificate's key, then Rekor's promise (`sign/rekor.py`)
and the certificate and identity (`sign/keyless.py`), as for cosign's classic signatures.
"""

from __future__ import annotations

from dataclasses import dataclass

from ocivendir.sign import strictb64

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from cryptography.hazmat.primitives.asymmetric.types import PublicKeyTypes

    from ocivendir.sign.keyless import Signer
    from ocivendir.sign.policy import Identity
    from ocivendir.sign.rekor import Entry
    from ocivendir.sign.trustroot import TrustedRoot

__all__ = [
    "BUNDLE_TYPES",
    "SigstoreBundle",
    "bundle_key_problem",
    "bundle_keyless_problem",
    "bundle_signer",
    "parse_bundle",
]

BUNDLE_TYPES = frozenset({
    "application/vnd.dev.sigstore.bundle.v0.3+json",
    "application/vnd.dev.sigstore.bundle+json;version=0.3",
    "application/vnd.dev.sigstore.bundle+json;version=0.2",
    "application/vnd.dev.sigstore.bundle+json;version=0.1",
})  # fmt: skip
IN_TOTO = "application/vnd.in-toto+json"


@dataclass(frozen=True, kw_only=True)
class SigstoreBundle:
    """A parsed bundle: what was signed (`signed`: the message digest or the DSSE PAE), by what, and its evidence."""

    signed: bytes  # the message's sha256 (prehashed) or the DSSE pre-authentication encoding
    prehashed: bool  # a message signature: `signed` is already the sha256
    signatures: tuple[bytes, ...]
    subjects: frozenset[str]  # the hex sha256 digests the bundle speaks for
    entry_digest: str  # the hex sha256 the Rekor entry must record (the message digest, or the DSSE payload's)
    certificates: tuple[bytes, ...] = ()  # DER, leaf first
    entries: tuple[dict[str, Any], ...] = ()

    def names(self, digest: str) -> bool:
        """Whether the bundle speaks for a manifest digest (`sha256:<hex>`)."""
        algorithm, _, hexdigest = digest.partition(":")
        return algorithm == "sha256" and hexdigest in self.subjects


def _b64(value: object, what: str) -> bytes:
    if not isinstance(value, str):
        raise ValueError(f"the Sigstore bundle has no {what}")  # noqa: TRY004 - a malformed bundle is a value problem
    decoded = strictb64.decode(value)
    if decoded is None:
        raise ValueError(f"the Sigstore bundle's {what} is not base64")
    return decoded


def _object(doc: dict[str, Any], key: str) -> dict[str, Any]:
    value = doc.get(key)
    return value if isinstance(value, dict) else {}


def _pae(payload_type: str, payload: bytes) -> bytes:
    """DSSE's pre-authentication encoding: what an envelope's signatures sign."""
    kind = payload_type.encode()
    return b"DSSEv1 %d %b %d %b" % (len(kind), kind, len(payload), payload)


def _statement_subjects(payload: bytes) -> frozenset[str]:
    from ocivendir import jsondoc  # noqa: PLC0415 - only here (json imports re); a deep document is invalid JSON

    try:
        statement = jsondoc.loads(payload)
    except ValueError:
        raise ValueError("the bundle's in-toto statement is not JSON") from None
    subjects = statement.get("subject") if isinstance(statement, dict) else None
    found = set()
    for subject in subjects if isinstance(subjects, list) else []:
        digest = subject.get("digest") if isinstance(subject, dict) else None
        if isinstance(digest, dict) and isinstance(digest.get("sha256"), str):
            found.add(digest["sha256"].lower())
    return frozenset(found)


def parse_bundle(data: bytes) -> SigstoreBundle:
    """A bundle from its JSON; ValueError saying what is missing or malformed."""
    import hashlib  # noqa: PLC0415

    from ocivendir import jsondoc  # noqa: PLC0415 - only here (json imports re); a deep document is invalid JSON

    try:
        doc = jsondoc.loads(data)
    except ValueError:
        raise ValueError("the Sigstore bundle is not JSON") from None
    if not isinstance(doc, dict):
        raise ValueError("the Sigstore bundle is not a JSON object")  # noqa: TRY004 - malformed content
    material = _object(doc, "verificationMaterial")
    if material.get("certificate") is not None:
        certificates: tuple[bytes, ...] = (_b64(_object(material, "certificate").get("rawBytes"), "certificate"),)
    else:
        chain = _object(material, "x509CertificateChain").get("certificates")
        certificates = tuple(_b64(c.get("rawBytes") if isinstance(c, dict) else None, "certificate")
                             for c in (chain if isinstance(chain, list) else []))  # fmt: skip
    listed_entries = material.get("tlogEntries")
    if listed_entries is not None and not isinstance(listed_entries, list):
        raise ValueError("the bundle's tlogEntries is not a list")
    entries = tuple(e for e in listed_entries or () if isinstance(e, dict))
    if doc.get("messageSignature") is not None:
        message = _object(doc, "messageSignature")
        digest = _object(message, "messageDigest")
        if digest.get("algorithm") != "SHA2_256":
            raise ValueError("the bundle's message digest is not SHA2_256")
        hashed = _b64(digest.get("digest"), "message digest")
        if len(hashed) != 32:  # noqa: PLR2004 - a SHA-256 digest
            raise ValueError(f"the bundle's message digest is {len(hashed)} bytes, not the 32 of a SHA-256 digest")
        return SigstoreBundle(signed=hashed, prehashed=True, signatures=(_b64(message.get("signature"), "signature"),),
                              subjects=frozenset({hashed.hex()}), entry_digest=hashed.hex(),
                              certificates=certificates, entries=entries)  # fmt: skip
    envelope = _object(doc, "dsseEnvelope")
    if not envelope:
        raise ValueError("the Sigstore bundle has neither a messageSignature nor a dsseEnvelope")
    payload_type = envelope.get("payloadType")
    if payload_type != IN_TOTO:
        raise ValueError(f"the bundle's DSSE payload type is {payload_type!r}, not {IN_TOTO}")
    payload = _b64(envelope.get("payload"), "DSSE payload")
    listed = envelope.get("signatures")
    signatures = tuple(_b64(s.get("sig") if isinstance(s, dict) else None, "DSSE signature")
                       for s in (listed if isinstance(listed, list) else []))  # fmt: skip
    return SigstoreBundle(signed=_pae(payload_type, payload), prehashed=False, signatures=signatures,
                          subjects=_statement_subjects(payload), entry_digest=hashlib.sha256(payload).hexdigest(),
                          certificates=certificates, entries=entries)  # fmt: skip


def _verifies(bundle: SigstoreBundle, key: PublicKeyTypes, hash_algorithm: str) -> bytes | None:
    """The signature of the bundle that verifies with `key`, if one does."""
    from cryptography.hazmat.primitives import hashes  # noqa: PLC0415 - cryptography only when verifying
    from cryptography.hazmat.primitives.asymmetric import ed25519  # noqa: PLC0415
    from cryptography.hazmat.primitives.asymmetric.utils import Prehashed  # noqa: PLC0415

    from ocivendir.sign.keys import signature_verifies, signature_verifies_with  # noqa: PLC0415

    for signature in bundle.signatures:
        if bundle.prehashed:
            if isinstance(key, ed25519.Ed25519PublicKey):  # Ed25519 signs messages, never their digests
                continue
            if signature_verifies_with(key, signature, bundle.signed, Prehashed(hashes.SHA256())):
                return signature
        elif signature_verifies(key, signature, bundle.signed, hash_algorithm):
            return signature
    return None


def bundle_key_problem(bundle: SigstoreBundle, key: PublicKeyTypes, hash_algorithm: str) -> str | None:
    """None when a signature of the bundle verifies with a key authority's key, else why not."""
    return None if _verifies(bundle, key, hash_algorithm) is not None else "the bundle's signature does not verify"


def bundle_signer(bundle: SigstoreBundle, root: TrustedRoot, *, check_sct: bool) -> Signer:
    """Who signed a keyless bundle, once it holds under the trusted root (`sign/keyless.signer`); ValueError if not."""
    from cryptography import x509  # noqa: PLC0415 - keyless only

    from ocivendir.sign.keyless import signer  # noqa: PLC0415
    from ocivendir.sign.rekor import rekor_entry  # noqa: PLC0415

    if not bundle.certificates:
        raise ValueError("the bundle carries no certificate")
    chain = [x509.load_der_x509_certificate(der) for der in bundle.certificates]

    def entry() -> Entry:
        if not bundle.entries:
            raise ValueError("the bundle carries no Rekor entry")
        return rekor_entry(bundle.entries[0])

    return signer(
        chain[0],
        lambda key: _verifies(bundle, key, "sha256"),
        entry,
        lambda: chain[1:],
        digest=bundle.entry_digest,
        root=root,
        check_sct=check_sct,
        what="the bundle's signature",
    )


def bundle_keyless_problem(
    bundle: SigstoreBundle, identities: tuple[Identity, ...], root: TrustedRoot, *, check_sct: bool
) -> str | None:
    """None when the bundle is a valid keyless signature by one of the identities under the trusted root."""
    try:
        return bundle_signer(bundle, root, check_sct=check_sct).problem(identities)
    except ValueError as exc:
        return str(exc)
