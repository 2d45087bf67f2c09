"""Owns: the keyless check of one signature — a Fulcio certificate, Rekor's promise, and an identity to match.

In cosign's order for a keyless signature (pkg/cosign/verify.go): the signature must verify with the certificate's
key; Rekor's signed entry timestamp must be the trusted root's and its entry must record this signature, payload and
certificate (`sign/rekor.py`); the certificate must chain to the trusted root at the integrated time, with its SCT
(`sign/fulcio.py`); and its issuer and one of its subject alternative names must match one of the authority's
identities (`issuer`/`subject` exactly, `issuerRegExp`/`subjectRegExp` searched, as policy-controller does). The
payload's digest is the caller's to compare, as for key signatures.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

TYPE_CHECKING = False
if TYPE_CHECKING:
    from datetime import datetime

    from cryptography.x509 import Certificate

    from ocivendir.sign.policy import Identity
    from ocivendir.sign.trustroot import TrustedRoot

__all__ = ["Signed", "certificate_problem", "keyless_problem"]


@dataclass(frozen=True, kw_only=True)
class Signed:
    """One signature as found: the payload, the signature, and for keyless ones the certificate, chain and bundle."""

    payload: bytes
    signature: bytes
    certificate: str = ""  # PEM (`dev.sigstore.cosign/certificate`)
    chain: str = ""  # PEM intermediates (`dev.sigstore.cosign/chain`)
    bundle: str = ""  # Rekor's answer, JSON (`dev.sigstore.cosign/bundle`)


def keyless_problem(
    signed: Signed, identities: tuple[Identity, ...], root: TrustedRoot, *, check_sct: bool
) -> str | None:
    """None when the signature is a valid keyless one by one of the identities, else why not."""
    from cryptography.hazmat.primitives import hashes  # noqa: PLC0415 - keyless only

    from ocivendir.sign.fulcio import load_certificates  # noqa: PLC0415
    from ocivendir.sign.keys import signature_verifies_with  # noqa: PLC0415
    from ocivendir.sign.rekor import classic_entry, verify_entry  # noqa: PLC0415

    if not signed.certificate:
        return "the signature carries no certificate"
    try:
        cert = load_certificates(signed.certificate, "certificate")[0]
        if not signature_verifies_with(cert.public_key(), signed.signature, signed.payload, hashes.SHA256()):
            return "the signature does not verify with its certificate's key"
        if not signed.bundle:
            return "the signature carries no Rekor bundle"
        entry = classic_entry(signed.bundle)
        verify_entry(entry, root, digest=hashlib.sha256(signed.payload).hexdigest(), signature=signed.signature,
                     public_pem=signed.certificate.encode())  # fmt: skip
        extra = load_certificates(signed.chain, "certificate chain") if signed.chain else []
    except ValueError as exc:
        return str(exc)
    return certificate_problem(cert, extra, entry.when, identities, root, check_sct=check_sct)


def certificate_problem(
    cert: Certificate,
    extra: list[Certificate],
    when: datetime,
    identities: tuple[Identity, ...],
    root: TrustedRoot,
    *,
    check_sct: bool,
) -> str | None:
    """None when the certificate is valid under the root at the signing time and names one of the identities."""
    from ocivendir.sign.fulcio import certificate_identity, verify_certificate  # noqa: PLC0415 - keyless only

    try:
        verify_certificate(cert, extra, root, when, check_sct=check_sct)
        issuer, subjects = certificate_identity(cert)
    except ValueError as exc:
        return str(exc)
    if any(identity.matches(issuer, subject) for identity in identities for subject in subjects):
        return None
    named = ", ".join(map(repr, subjects)) or "none"
    return f"the certificate's identity (issuer '{issuer}', subject {named}) matches none of the authority's identities"
