"""Owns: Fulcio signing certificates — their chain to the trusted root, their SCT, and the identity they carry.

As cosign checks a keyless signature's certificate (pkg/cosign/verify.go, with sigstore-python's verifier for the
chain): it must chain, through the trusted root's intermediates or those the signature carries, to a root the
trusted root lists, with every certificate valid at the signing time (Rekor's integrated time) and the authority in
force then; it must allow digital signatures and code signing; unless the authority says `insecureIgnoreSCT`, it must
embed a certificate transparency SCT that a CT log of the trusted root signed over the precertificate (RFC 6962,
3.2). Its identity is the OIDC issuer (Fulcio's extension 1.3.6.1.4.1.57264.1.8, else the older .1.1) and its
subject alternative names (e-mail, URI, DNS, and Fulcio's username otherName .1.7). Every failure is a ValueError
whose text says what did not hold.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import struct

TYPE_CHECKING = False
if TYPE_CHECKING:
    from datetime import datetime

    from cryptography.x509 import Certificate

    from ocivendir.sign.trustroot import TrustedRoot

__all__ = ["certificate_identity", "load_certificates", "pem_certificates", "verify_certificate"]

ISSUER_V1 = "1.3.6.1.4.1.57264.1.1"  # the OIDC issuer, raw bytes
ISSUER_V2 = "1.3.6.1.4.1.57264.1.8"  # the OIDC issuer, a DER UTF8String
USERNAME = "1.3.6.1.4.1.57264.1.7"  # an otherName SAN: a DER UTF8String
_UTF8_STRING = 0x0C


def load_certificates(pem: str, what: str) -> list[Certificate]:
    """The PEM certificates of an annotation; ValueError naming it when there are none or one does not parse."""
    from cryptography.x509 import load_pem_x509_certificates  # noqa: PLC0415 - keyless only

    try:
        return load_pem_x509_certificates(pem.encode("utf-8"))
    except (ValueError, UnicodeEncodeError) as exc:
        raise ValueError(f"the {what} is not a PEM certificate: {exc}") from None


def pem_certificates(pem: bytes) -> list[Certificate]:
    """The certificates PEM text holds (none when it holds none, or one of them does not parse)."""
    from cryptography.x509 import load_pem_x509_certificates  # noqa: PLC0415 - keyless only

    try:
        return load_pem_x509_certificates(pem)
    except ValueError:
        return []


def _der_utf8(data: bytes) -> str:
    """A DER UTF8String's text (Fulcio's v2 extensions and the username otherName)."""
    if len(data) < 2 or data[0] != _UTF8_STRING:  # noqa: PLR2004 - a tag and a length
        raise ValueError("not a DER UTF8String")
    length, start = data[1], 2
    if length & 0x80:
        size = length & 0x7F
        length, start = int.from_bytes(data[2 : 2 + size], "big"), 2 + size
    if start + length != len(data):
        raise ValueError("a DER UTF8String of the wrong length")
    return data[start:].decode("utf-8")


def certificate_identity(cert: Certificate) -> tuple[str, tuple[str, ...]]:
    """The certificate's OIDC issuer and its subject alternative names (the subjects an identity may match)."""
    from cryptography import x509  # noqa: PLC0415 - keyless only

    issuer = ""
    for extension in cert.extensions:
        oid = extension.oid.dotted_string
        if oid in {ISSUER_V1, ISSUER_V2} and isinstance(extension.value, x509.UnrecognizedExtension):
            raw = extension.value.value
            text = _der_utf8(raw) if oid == ISSUER_V2 else raw.decode("utf-8", "replace")
            if oid == ISSUER_V2 or not issuer:
                issuer = text
    subjects: list[str] = []
    try:
        names = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        return issuer, ()
    for kind in (x509.RFC822Name, x509.UniformResourceIdentifier, x509.DNSName):
        subjects += names.get_values_for_type(kind)
    for other in names.get_values_for_type(x509.OtherName):
        if other.type_id.dotted_string == USERNAME:
            subjects.append(_der_utf8(other.value))
    return issuer, tuple(subjects)


def _chain(cert: Certificate, extra: list[Certificate], root: TrustedRoot, when: datetime) -> list[Certificate]:
    """The verified chain above `cert` (its issuer first), built with cryptography's X.509 path validation."""
    from cryptography import x509  # noqa: PLC0415 - keyless only
    from cryptography.x509.verification import (  # noqa: PLC0415
        Criticality,
        ExtensionPolicy,
        PolicyBuilder,
        Store,
        VerificationError,
    )

    authorities = [authority for authority in root.authorities if authority.valid_at(when)]
    if not authorities:
        raise ValueError(f"no certificate authority of the trusted root was in force at {when:%Y-%m-%dT%H:%M:%SZ}")
    roots = [authority.chain[-1] for authority in authorities]
    intermediates = [c for authority in authorities for c in authority.chain[:-1]] + extra
    # Fulcio certificates are for code signing, not client authentication (as sigstore-python relaxes it)
    ca_policy = ExtensionPolicy.webpki_defaults_ca().may_be_present(
        x509.ExtendedKeyUsage, Criticality.NON_CRITICAL, None
    )
    ee_policy = ExtensionPolicy.webpki_defaults_ee().may_be_present(
        x509.ExtendedKeyUsage, Criticality.NON_CRITICAL, None
    )
    verifier = (
        PolicyBuilder().store(Store(roots)).time(when).extension_policies(ca_policy=ca_policy, ee_policy=ee_policy)
        .build_client_verifier()
    )  # fmt: skip
    try:
        return list(verifier.verify(cert, intermediates).chain[1:])
    except (VerificationError, x509.UnsupportedGeneralNameType) as exc:
        raise ValueError(f"the certificate does not chain to the trusted root at the signing time: {exc}") from None


_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
_MILLISECOND = dt.timedelta(milliseconds=1)


def _verify_sct(cert: Certificate, issuer: Certificate, root: TrustedRoot) -> None:
    """An SCT embedded in the certificate, signed by a CT log of the trusted root (RFC 6962 precertificate entry)."""
    from cryptography import x509  # noqa: PLC0415 - keyless only
    from cryptography.hazmat.primitives import serialization  # noqa: PLC0415

    from ocivendir.sign.keys import signature_verifies_with  # noqa: PLC0415

    try:
        scts = cert.extensions.get_extension_for_class(x509.PrecertificateSignedCertificateTimestamps).value
    except x509.ExtensionNotFound:
        raise ValueError("the certificate embeds no SCT (insecureIgnoreSCT: true skips this check)") from None
    issuer_key = issuer.public_key().public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    tbs = cert.tbs_precertificate_bytes
    problems = []
    for sct in scts:
        log = root.ctlog(sct.log_id)
        if log is None:
            problems.append(f"SCT of an unknown CT log {sct.log_id.hex()}")
            continue
        # cryptography gives the SCT's time as a naive UTC datetime: its .timestamp() would read it as local time
        millis = (sct.timestamp.replace(tzinfo=dt.UTC) - _EPOCH) // _MILLISECOND
        extensions = sct.extension_bytes
        signed = (struct.pack(">BBQH", 0, 0, millis, 1) + hashlib.sha256(issuer_key).digest()
                  + len(tbs).to_bytes(3, "big") + tbs + len(extensions).to_bytes(2, "big") + extensions)  # fmt: skip
        if signature_verifies_with(log.key, sct.signature, signed, sct.signature_hash_algorithm):
            return
        problems.append(f"SCT of CT log {sct.log_id.hex()} does not verify")
    raise ValueError("the certificate's SCT is not valid: " + "; ".join(problems))


def verify_certificate(
    cert: Certificate, extra: list[Certificate], root: TrustedRoot, when: datetime, *, check_sct: bool
) -> None:
    """Raise ValueError unless `cert` is a Fulcio code-signing certificate valid at `when` under the trusted root."""
    from cryptography import x509  # noqa: PLC0415 - keyless only

    if not cert.not_valid_before_utc <= when <= cert.not_valid_after_utc:
        raise ValueError(
            f"the certificate was not valid at the signing time {when:%Y-%m-%dT%H:%M:%SZ} (valid "
            f"{cert.not_valid_before_utc:%Y-%m-%dT%H:%M:%SZ} to {cert.not_valid_after_utc:%Y-%m-%dT%H:%M:%SZ})"
        )
    chain = _chain(cert, extra, root, when)
    try:
        usage = cert.extensions.get_extension_for_class(x509.KeyUsage).value
        extended = cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    except x509.ExtensionNotFound:
        raise ValueError("the certificate lacks key usage or extended key usage") from None
    if not usage.digital_signature or x509.oid.ExtendedKeyUsageOID.CODE_SIGNING not in extended:
        raise ValueError("the certificate is not for digital signatures and code signing")
    if check_sct:
        _verify_sct(cert, chain[0], root)
