"""Owns: the keyless check of one signature — a Fulcio certificate, Rekor's promise, and an identity to match.

In cosign's order for a keyless signature (pkg/cosign/verify.go): the signature must verify with the certificate's
key; Rekor's signed entry timestamp must be the trusted root's and its entry must record this signature, payload and
certificate (`sign/rekor.py`); the certificate must chain to the trusted root at the integrated time, with its SCT
(`sign/fulcio.py`); and its issuer and one of its subject alternative names must match one of the authority's
identities (`issuer`/`subject` exactly, `issuerRegExp`/`subjectRegExp` searched, as policy-controller does). The
payload's digest is the caller's to compare, as for key signatures. `signer` is that sequence up to the identity, for
a classic signature (`keyless_signer`) and a Sigstore bundle (`sign/bundle.bundle_signer`) alike; its `Signer` is what
a verification keeps per item, so only the identity match runs again for each authority.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable

    from cryptography.hazmat.primitives.asymmetric.types import PublicKeyTypes
    from cryptography.x509 import Certificate

    from ocivendir.sign.policy import Identity
    from ocivendir.sign.rekor import Entry
    from ocivendir.sign.trustroot import TrustedRoot

__all__ = ["Signed", "Signer", "keyless_problem", "keyless_signer", "signer"]


@dataclass(frozen=True, kw_only=True)
class Signed:
    """One signature as found: the payload, the signature, and for keyless ones the certificate, chain and bundle."""

    payload: bytes
    signature: bytes
    certificate: str = ""  # PEM (`dev.sigstore.cosign/certificate`)
    chain: str = ""  # PEM intermediates (`dev.sigstore.cosign/chain`)
    bundle: str = ""  # Rekor's answer, JSON (`dev.sigstore.cosign/bundle`)


@dataclass(frozen=True, kw_only=True)
class Signer:
    """Who a valid keyless signature's certificate names: its OIDC issuer and subject alternative names."""

    issuer: str
    subjects: tuple[str, ...]

    def problem(self, identities: tuple[Identity, ...]) -> str | None:
        """None when one of an authority's identities matches the issuer and a subject, else why not."""
        if any(identity.matches(self.issuer, subject) for identity in identities for subject in self.subjects):
            return None
        named = ", ".join(map(repr, self.subjects)) or "none"
        return (f"the certificate's identity (issuer '{self.issuer}', subject {named}) matches none of the "
                "authority's identities")  # fmt: skip


def signer(
    cert: Certificate,
    signed_with: Callable[[PublicKeyTypes], bytes | None],
    entry: Callable[[], Entry],
    chain: Callable[[], list[Certificate]],
    *,
    digest: str,
    root: TrustedRoot,
    check_sct: bool,
    what: str,
) -> Signer:
    """The keyless sequence of a classic signature and a bundle alike: certificate, signature, entry, chain and SCT.

    `signed_with` gives the signature that verifies with the certificate's key (`what` names it when none does);
    `entry` Rekor's promise, which must be the trusted log's and record that signature, `digest` and the certificate;
    `chain` the intermediates the signature carries, through which the certificate must chain to the trusted root at
    the integrated time (with its SCT unless `check_sct` is off). ValueError saying which step did not hold.
    """
    from ocivendir.sign.fulcio import certificate_identity, verify_certificate  # noqa: PLC0415 - keyless only
    from ocivendir.sign.rekor import verify_entry  # noqa: PLC0415

    signature = signed_with(cert.public_key())
    if signature is None:
        raise ValueError(f"{what} does not verify with its certificate's key")
    promised = entry()
    verify_entry(promised, root, digest=digest, signature=signature, certificate=cert)
    verify_certificate(cert, chain(), root, promised.when, check_sct=check_sct)
    issuer, subjects = certificate_identity(cert)
    return Signer(issuer=issuer, subjects=subjects)


def keyless_signer(signed: Signed, root: TrustedRoot, *, check_sct: bool) -> Signer:
    """Who signed a classic keyless signature, once it holds under the trusted root; ValueError saying why not."""
    from cryptography.hazmat.primitives import hashes  # noqa: PLC0415 - keyless only

    from ocivendir.sign.fulcio import load_certificates  # noqa: PLC0415
    from ocivendir.sign.keys import signature_verifies_with  # noqa: PLC0415
    from ocivendir.sign.rekor import classic_entry  # noqa: PLC0415

    if not signed.certificate:
        raise ValueError("the signature carries no certificate")

    def signed_with(key: PublicKeyTypes) -> bytes | None:
        verifies = signature_verifies_with(key, signed.signature, signed.payload, hashes.SHA256())
        return signed.signature if verifies else None

    def entry() -> Entry:
        if not signed.bundle:
            raise ValueError("the signature carries no Rekor bundle")
        return classic_entry(signed.bundle)

    return signer(
        load_certificates(signed.certificate, "certificate")[0],
        signed_with,
        entry,
        lambda: load_certificates(signed.chain, "certificate chain") if signed.chain else [],
        digest=hashlib.sha256(signed.payload).hexdigest(),
        root=root,
        check_sct=check_sct,
        what="the signature",
    )


def keyless_problem(
    signed: Signed, identities: tuple[Identity, ...], root: TrustedRoot, *, check_sct: bool
) -> str | None:
    """None when the signature is a valid keyless one by one of the identities, else why not."""
    try:
        return keyless_signer(signed, root, check_sct=check_sct).problem(identities)
    except ValueError as exc:
        return str(exc)
