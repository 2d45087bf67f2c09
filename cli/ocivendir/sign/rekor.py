"""Owns: Rekor's promise of inclusion — a signed entry timestamp (SET) and the entry it covers, checked offline.

cosign's classic keyless signatures carry Rekor's answer in the `dev.sigstore.cosign/bundle` annotation:
`{"SignedEntryTimestamp": b64, "Payload": {"body": b64, "integratedTime": n, "logIndex": n, "logID": hex}}`. As
cosign's VerifyBundle does, the SET must be the trusted root's Rekor key's signature (the one `logID` names, in force
at the integrated time) over the payload's canonical JSON (RFC 8785: keys sorted, no spaces), and the entry's body must
be the signature being verified: a `hashedrekord` v0.0.1 whose `spec.data.hash` is the sha256 of the payload,
whose `spec.signature.content` is the signature and whose `spec.signature.publicKey.content` is the signing
certificate (for a DSSE envelope, a `dsse` v0.0.1 whose `payloadHash` is the envelope payload's sha256 and whose
`signatures[]` hold this signature and certificate). The integrated time it proves is the signing time certificates
are checked at. A Sigstore bundle's `tlogEntries[]` (its `inclusionPromise`) is the same promise in protobuf-specs'
spelling (`rekor_entry`); its inclusion proof is not read (the SET is what cosign's offline verification checks).
Every failure is an EntryError (a ValueError) whose text says what did not hold.
"""

from __future__ import annotations

import binascii
from dataclasses import dataclass
from datetime import UTC, datetime

from ocivendir.sign import strictb64

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from cryptography.x509 import Certificate

    from ocivendir.sign.trustroot import TrustedRoot

__all__ = ["Entry", "EntryError", "classic_entry", "rekor_entry", "verify_entry"]


class EntryError(ValueError):
    """Rekor's promise is missing, malformed, not the trusted log's, or about another signature."""


@dataclass(frozen=True, kw_only=True)
class Entry:
    """A Rekor entry as promised: its body (JSON bytes), integrated time, index, log id, and the SET over them."""

    body: bytes
    integrated_time: int
    log_index: int
    log_id: bytes
    set_signature: bytes

    @property
    def when(self) -> datetime:
        """The integrated time, as an aware datetime."""
        return datetime.fromtimestamp(self.integrated_time, tz=UTC)


def _b64(text: object, what: str) -> bytes:
    if not isinstance(text, str):
        raise EntryError(f"the Rekor bundle's {what} is missing")
    decoded = strictb64.decode(text)
    if decoded is None:
        raise EntryError(f"the Rekor bundle's {what} is not base64")
    return decoded


_MAX_INT64 = (1 << 63) - 1  # Rekor's integratedTime and logIndex are int64
_MAX_TIME = 253402300799  # 9999-12-31T23:59:59Z: the last second a datetime holds


def _integer(value: object, what: str, limit: int = _MAX_INT64) -> int:
    if isinstance(value, str) and value.isascii() and value.isdecimal() and len(value) <= 19:  # noqa: PLR2004
        value = int(value)  # protobuf's JSON spells int64 as a string
    if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value <= limit:
        raise EntryError(f"the Rekor bundle's {what} is not a whole number from 0 to {limit}")
    return value


def classic_entry(annotation: str) -> Entry:
    """The entry of cosign's `dev.sigstore.cosign/bundle` annotation."""
    from ocivendir import jsondoc  # noqa: PLC0415 - only here (json imports re); a deep document is invalid JSON

    try:
        doc: Any = jsondoc.loads(annotation)
    except ValueError:
        raise EntryError("the Rekor bundle annotation is not JSON") from None
    payload = doc.get("Payload") if isinstance(doc, dict) else None
    if not isinstance(payload, dict):
        raise EntryError("the Rekor bundle annotation has no Payload")
    log_id = payload.get("logID")
    try:
        identity = bytes.fromhex(log_id) if isinstance(log_id, str) else None
    except ValueError:
        identity = None
    if identity is None:
        raise EntryError("the Rekor bundle's logID is not hexadecimal")
    return Entry(body=_b64(payload.get("body"), "body"),
                 integrated_time=_integer(payload.get("integratedTime"), "integratedTime", _MAX_TIME),
                 log_index=_integer(payload.get("logIndex"), "logIndex"), log_id=identity,
                 set_signature=_b64(doc.get("SignedEntryTimestamp"), "SignedEntryTimestamp"))  # fmt: skip


def rekor_entry(doc: dict[str, Any]) -> Entry:
    """The entry of a Sigstore bundle's `verificationMaterial.tlogEntries[]` item (protobuf-specs JSON)."""
    promise = doc.get("inclusionPromise")
    log_id = doc.get("logId")
    if not isinstance(promise, dict):
        raise EntryError("the bundle's log entry has no inclusionPromise (a signed entry timestamp)")
    if not isinstance(log_id, dict):
        raise EntryError("the bundle's log entry has no logId")
    return Entry(body=_b64(doc.get("canonicalizedBody"), "canonicalizedBody"),
                 integrated_time=_integer(doc.get("integratedTime"), "integratedTime", _MAX_TIME),
                 log_index=_integer(doc.get("logIndex"), "logIndex"), log_id=_b64(log_id.get("keyId"), "logId.keyId"),
                 set_signature=_b64(promise.get("signedEntryTimestamp"), "signedEntryTimestamp"))  # fmt: skip


def _canonical(entry: Entry) -> bytes:
    """What the SET signs: the payload's RFC 8785 form (four keys in code-point order, integers, ASCII strings)."""
    body = binascii.b2a_base64(entry.body, newline=False).decode("ascii")
    return (f'{{"body":"{body}","integratedTime":{entry.integrated_time},'
            f'"logID":"{entry.log_id.hex()}","logIndex":{entry.log_index}}}').encode()  # fmt: skip


def _body_matches(body: bytes, payload_sha256: str, signature: bytes, cert: Certificate) -> str | None:
    """None when the entry's body records this signature, payload digest and certificate, else why not."""
    from ocivendir import jsondoc  # noqa: PLC0415 - only here (json imports re); a deep document is invalid JSON

    try:
        doc = jsondoc.loads(body)
    except ValueError:
        return "the Rekor entry's body is not JSON"
    kind = (doc.get("kind"), doc.get("apiVersion")) if isinstance(doc, dict) else None
    spec = doc["spec"] if isinstance(doc, dict) and isinstance(doc.get("spec"), dict) else {}
    if kind == ("dsse", "0.0.1"):
        return _dsse_matches(spec, payload_sha256, signature, cert)
    if kind == ("hashedrekord", "0.0.1"):
        return _hashedrekord_matches(spec, payload_sha256, signature, cert)
    return "the Rekor entry is neither a hashedrekord nor a dsse v0.0.1 (the kinds ocivendir reads)"


def _hashedrekord_matches(spec: dict[str, Any], payload_sha256: str, signature: bytes, cert: Certificate) -> str | None:
    """A hashedrekord v0.0.1 body: the payload's sha256, this signature, and this certificate."""
    data, sig = spec.get("data"), spec.get("signature")
    hashed = data.get("hash") if isinstance(data, dict) else None
    if not isinstance(hashed, dict) or hashed.get("algorithm") != "sha256" or hashed.get("value") != payload_sha256:
        return "the Rekor entry records another payload digest"
    key = sig.get("publicKey") if isinstance(sig, dict) else None
    try:
        if _b64(sig.get("content") if isinstance(sig, dict) else None, "entry signature") != signature:
            return "the Rekor entry records another signature"
        recorded = _b64(key.get("content") if isinstance(key, dict) else None, "entry public key")
    except EntryError as exc:
        return str(exc)
    return None if _same_certificate(recorded, cert) else "the Rekor entry records another certificate"


def _dsse_matches(spec: dict[str, Any], payload_sha256: str, signature: bytes, cert: Certificate) -> str | None:
    """A dsse v0.0.1 body: the envelope payload's sha256, and this signature by this certificate among its own."""
    hashed = spec.get("payloadHash")
    if not isinstance(hashed, dict) or hashed.get("algorithm") != "sha256" or hashed.get("value") != payload_sha256:
        return "the Rekor entry records another payload digest"
    listed = spec.get("signatures")
    for item in listed if isinstance(listed, list) else []:
        try:
            if (isinstance(item, dict) and _b64(item.get("signature"), "entry signature") == signature
                    and _same_certificate(_b64(item.get("verifier"), "entry verifier"), cert)):  # fmt: skip
                return None
        except EntryError:
            continue
    return "the Rekor entry records another signature or certificate"


def _same_certificate(recorded: bytes, certificate: Certificate) -> bool:
    """Whether the entry's PEM text holds this certificate and nothing else (compared as certificates, by DER)."""
    from ocivendir.sign.fulcio import pem_certificates  # noqa: PLC0415 - cryptography only when verifying

    return pem_certificates(recorded) == [certificate]


def verify_entry(entry: Entry, root: TrustedRoot, *, digest: str, signature: bytes, certificate: Certificate) -> None:
    """Raise EntryError unless the SET is the trusted Rekor's and the entry records this signature.

    `digest` is the hex sha256 the entry must record: of the payload, of the signed message, or of a DSSE payload.
    """
    from ocivendir.sign.keys import signature_verifies_with  # noqa: PLC0415 - cryptography only when verifying

    log = root.tlog(entry.log_id)
    if log is None:
        raise EntryError(f"the Rekor bundle names a log the trusted root does not list ({entry.log_id.hex()})")
    if not log.valid_at(entry.when):
        raise EntryError(f"the trusted root's Rekor key was not in force at {entry.when:%Y-%m-%dT%H:%M:%SZ}")
    if not signature_verifies_with(log.key, entry.set_signature, _canonical(entry), None):
        raise EntryError("the Rekor bundle's signed entry timestamp does not verify with the trusted root's log key")
    problem = _body_matches(entry.body, digest, signature, certificate)
    if problem is not None:
        raise EntryError(problem)
