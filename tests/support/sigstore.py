"""Test-only Sigstore: a fake Fulcio (root and intermediate CA), a Rekor key and a CT log key made here.

`Sigstore.make()` makes them; `trusted_root()` writes them as a `trusted_root.json` in protobuf-specs' JSON form;
`keyless()` signs a payload as cosign's keyless flow does — an ephemeral P-256 key, a Fulcio-shaped code-signing
certificate for an OIDC identity (issuer extension 1.3.6.1.4.1.57264.1.8, the subject as an e-mail or URI SAN, an
embedded SCT over the precertificate, RFC 6962) and Rekor's answer (a hashedrekord entry and its signed entry
timestamp over the canonical JSON of body, integratedTime, logID and logIndex) — and `push_keyless()` pushes it as
cosign's classic `.sig` image with the certificate, chain and bundle annotations.
"""

from __future__ import annotations

import base64
import datetime as dt
import hashlib
import json
import struct
from dataclasses import dataclass, field
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID, ObjectIdentifier

from tests.support.builders import Pusher, sha
from tests.support.cosign import OCI_MANIFEST, SIMPLE_SIGNING, payload, signature_manifest

NOW = dt.datetime.now(tz=dt.UTC).replace(microsecond=0)
ISSUER_V2 = ObjectIdentifier("1.3.6.1.4.1.57264.1.8")
SCT_LIST = ObjectIdentifier("1.3.6.1.4.1.11129.2.4.2")


def der(key: ec.EllipticCurvePublicKey) -> bytes:
    return key.public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)


def pem(cert: x509.Certificate) -> str:
    return cert.public_bytes(serialization.Encoding.PEM).decode()


def utf8(text: str) -> bytes:
    data = text.encode()
    assert len(data) < 128
    return bytes([0x0C, len(data)]) + data


def ca(name: str, key: ec.EllipticCurvePrivateKey, issuer: tuple[x509.Name, ec.EllipticCurvePrivateKey] | None,
       *, path_length: int | None) -> x509.Certificate:  # fmt: skip
    subject = x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, "sigstore.test"),
                         x509.NameAttribute(NameOID.COMMON_NAME, name)])  # fmt: skip
    issuer_name, signer = issuer or (subject, key)
    builder = (
        x509.CertificateBuilder().subject_name(subject).issuer_name(issuer_name).public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(NOW - dt.timedelta(days=365)).not_valid_after(NOW + dt.timedelta(days=365))
        .add_extension(x509.BasicConstraints(ca=True, path_length=path_length), critical=True)
        .add_extension(x509.KeyUsage(digital_signature=False, content_commitment=False, key_encipherment=False,
                                     data_encipherment=False, key_agreement=False, key_cert_sign=True, crl_sign=True,
                                     encipher_only=False, decipher_only=False), critical=True)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
    )  # fmt: skip
    if issuer is not None:
        builder = builder.add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(signer.public_key()), critical=False
        )
    return builder.sign(signer, hashes.SHA384())


@dataclass
class Keyless:
    """One keyless signature: what cosign puts in the `.sig` image's layer."""

    payload: bytes
    signature: bytes
    certificate: str
    chain: str
    bundle: str


@dataclass
class Sigstore:
    """A fake Fulcio (root, intermediate), Rekor and CT log."""

    root_key: ec.EllipticCurvePrivateKey
    root: x509.Certificate
    intermediate_key: ec.EllipticCurvePrivateKey
    intermediate: x509.Certificate
    rekor: ec.EllipticCurvePrivateKey
    ctlog: ec.EllipticCurvePrivateKey
    log_index: list[int] = field(default_factory=lambda: [1000])

    @classmethod
    def make(cls, name: str = "fulcio") -> Sigstore:
        root_key, intermediate_key = ec.generate_private_key(ec.SECP384R1()), ec.generate_private_key(ec.SECP384R1())
        root = ca(f"{name} root", root_key, None, path_length=1)
        intermediate = ca(f"{name} intermediate", intermediate_key, (root.subject, root_key), path_length=0)
        return cls(root_key, root, intermediate_key, intermediate,
                   ec.generate_private_key(ec.SECP256R1()), ec.generate_private_key(ec.SECP256R1()))  # fmt: skip

    def trusted_root(self, path: Path, *, chain_in_root: bool = True) -> Path:
        """Write trusted_root.json (protobuf-specs JSON) naming this CA, Rekor key and CT log key."""

        def b64(data: bytes) -> str:
            return base64.b64encode(data).decode()

        def log(key: ec.EllipticCurvePrivateKey, url: str) -> dict[str, object]:
            raw = der(key.public_key())
            return {"baseUrl": url, "hashAlgorithm": "SHA2_256",
                    "publicKey": {"rawBytes": b64(raw), "keyDetails": "PKIX_ECDSA_P256_SHA_256",
                                  "validFor": {"start": "2021-01-12T11:53:27.000Z"}},
                    "logId": {"keyId": b64(hashlib.sha256(raw).digest())}}  # fmt: skip

        chain = [self.intermediate, self.root] if chain_in_root else [self.root]
        doc = {
            "mediaType": "application/vnd.dev.sigstore.trustedroot+json;version=0.1",
            "tlogs": [log(self.rekor, "https://rekor.test")],
            "certificateAuthorities": [{
                "subject": {"organization": "sigstore.test", "commonName": "fulcio"}, "uri": "https://fulcio.test",
                "certChain": {"certificates": [{"rawBytes": b64(c.public_bytes(serialization.Encoding.DER))}
                                               for c in chain]},
                "validFor": {"start": "2021-03-07T03:20:29.000Z"},
            }],
            "ctlogs": [log(self.ctlog, "https://ctfe.test")],
            "timestampAuthorities": [],
        }  # fmt: skip
        path.write_text(json.dumps(doc, indent=2))
        return path

    def certificate(self, key: ec.EllipticCurvePrivateKey, subject: str, issuer: str, *,
                    lifetime: tuple[dt.datetime, dt.datetime] | None = None) -> x509.Certificate:  # fmt: skip
        """A Fulcio-shaped leaf for `key` with an embedded SCT (built twice: the SCT signs the precertificate)."""
        start, end = lifetime or (NOW - dt.timedelta(minutes=1), NOW + dt.timedelta(minutes=9))
        name = x509.UniformResourceIdentifier(subject) if "://" in subject else x509.RFC822Name(subject)
        builder = (
            x509.CertificateBuilder().subject_name(x509.Name([])).issuer_name(self.intermediate.subject)
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(start).not_valid_after(end)
            .add_extension(x509.KeyUsage(digital_signature=True, content_commitment=False, key_encipherment=False,
                                         data_encipherment=False, key_agreement=False, key_cert_sign=False,
                                         crl_sign=False, encipher_only=False, decipher_only=False), critical=True)
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CODE_SIGNING]), critical=False)
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
            .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(self.intermediate_key.public_key()),
                           critical=False)
            .add_extension(x509.SubjectAlternativeName([name]), critical=True)
            .add_extension(x509.UnrecognizedExtension(ISSUER_V2, utf8(issuer)), critical=False)
        )  # fmt: skip
        precert = builder.sign(self.intermediate_key, hashes.SHA256())
        tbs = precert.tbs_certificate_bytes
        millis = int(start.timestamp() * 1000)
        signed = (struct.pack(">BBQH", 0, 0, millis, 1) + hashlib.sha256(der(self.intermediate_key.public_key())).digest()
                  + len(tbs).to_bytes(3, "big") + tbs + b"\x00\x00")  # fmt: skip
        signature = self.ctlog.sign(signed, ec.ECDSA(hashes.SHA256()))
        sct = (b"\x00" + hashlib.sha256(der(self.ctlog.public_key())).digest() + struct.pack(">Q", millis) + b"\x00\x00"
               + b"\x04\x03" + len(signature).to_bytes(2, "big") + signature)  # fmt: skip
        listed = len(sct).to_bytes(2, "big") + sct
        listed = len(listed).to_bytes(2, "big") + listed
        value = b"\x04" + (bytes([len(listed)]) if len(listed) < 128 else b"\x81" + bytes([len(listed)])) + listed
        cert = builder.add_extension(x509.UnrecognizedExtension(SCT_LIST, value), critical=False).sign(
            self.intermediate_key, hashes.SHA256()
        )
        assert cert.tbs_precertificate_bytes == tbs
        return cert

    def promise(self, entry: dict[str, object], *, integrated: dt.datetime | None = None,
                rekor: ec.EllipticCurvePrivateKey | None = None) -> tuple[dict[str, object], bytes]:  # fmt: skip
        """Rekor's answer for an entry: the payload (body, integratedTime, logID, logIndex) and its SET."""
        self.log_index[0] += 1
        promised: dict[str, object] = {
            "body": base64.b64encode(json.dumps(entry).encode()).decode(),
            "integratedTime": int((integrated or NOW).timestamp()),
            "logID": hashlib.sha256(der(self.rekor.public_key())).hexdigest(),
            "logIndex": self.log_index[0],
        }
        canonical = json.dumps(promised, sort_keys=True, separators=(",", ":")).encode()
        return promised, (rekor or self.rekor).sign(canonical, ec.ECDSA(hashes.SHA256()))

    def keyless(self, body: bytes, *, subject: str = "dev@example.com", issuer: str = "https://accounts.test",
                lifetime: tuple[dt.datetime, dt.datetime] | None = None, integrated: dt.datetime | None = None,
                rekor: ec.EllipticCurvePrivateKey | None = None) -> Keyless:  # fmt: skip
        """Sign `body` keylessly; `lifetime`/`integrated` move the certificate and log times, `rekor` forges the SET."""
        key = ec.generate_private_key(ec.SECP256R1())
        cert = self.certificate(key, subject, issuer, lifetime=lifetime)
        signature = key.sign(body, ec.ECDSA(hashes.SHA256()))
        cert_pem = pem(cert)
        entry = {"apiVersion": "0.0.1", "kind": "hashedrekord", "spec": {
            "data": {"hash": {"algorithm": "sha256", "value": hashlib.sha256(body).hexdigest()}},
            "signature": {"content": base64.b64encode(signature).decode(),
                          "publicKey": {"content": base64.b64encode(cert_pem.encode()).decode()}}}}  # fmt: skip
        promised, stamp = self.promise(entry, integrated=integrated, rekor=rekor)
        bundle = {"SignedEntryTimestamp": base64.b64encode(stamp).decode(), "Payload": promised}

        return Keyless(payload=body, signature=signature, certificate=cert_pem, chain=pem(self.intermediate) + pem(self.root),
                       bundle=json.dumps(bundle))  # fmt: skip


def push_keyless(pusher: Pusher, repo: str, digest: str, signed: Keyless, *, tamper_payload: bool = False) -> str:
    """Push `signed` as cosign's classic `.sig` image of `repo@digest` (the payload altered after signing if asked)."""
    body = signed.payload + (b" " if tamper_payload else b"")
    config, manifest = signature_manifest([(body, signed.signature)])
    doc = json.loads(manifest)
    doc["layers"][0]["annotations"].update({
        "dev.sigstore.cosign/certificate": signed.certificate,
        "dev.sigstore.cosign/chain": signed.chain,
        "dev.sigstore.cosign/bundle": signed.bundle,
    })  # fmt: skip
    assert doc["layers"][0]["mediaType"] == SIMPLE_SIGNING
    pusher.blob(repo, config)
    pusher.blob(repo, body)
    tag = f"sha256-{digest.split(':', 1)[1]}.sig"
    pusher.manifest(repo, tag, json.dumps(doc, separators=(",", ":")).encode(), OCI_MANIFEST)
    return tag


def keyless_payload(pusher: Pusher, repo: str, digest: str) -> bytes:
    """The simple-signing payload cosign signs for `repo@digest`."""
    return payload(f"{pusher.registry.host}/{repo}", digest)


def keyless_policy(name: str, glob: str, identities: list[dict[str, str]], *, mode: str = "enforce",
                   extra: str = "") -> str:  # fmt: skip
    """A ClusterImagePolicy with one keyless authority for these identities."""
    listed = "".join(
        "      - {" + ", ".join(f"{key}: '{value}'" for key, value in identity.items()) + "}\n"
        for identity in identities
    )
    return (
        f"apiVersion: policy.sigstore.dev/v1beta1\nkind: ClusterImagePolicy\nmetadata:\n  name: {name}\nspec:\n"
        f'  mode: {mode}\n  images:\n  - glob: "{glob}"\n  authorities:\n  - name: keyless\n    keyless:\n'
        f"      url: https://fulcio.test\n{extra}      identities:\n{listed}"
    )


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


BUNDLE_TYPE = "application/vnd.dev.sigstore.bundle.v0.3+json"
OCI_INDEX = "application/vnd.oci.image.index.v1+json"
EMPTY = b"{}"


def statement(repo: str, digest: str) -> bytes:
    """The in-toto statement cosign's new bundle format signs for an image."""
    return json.dumps({
        "_type": "https://in-toto.io/Statement/v1",
        "subject": [{"name": repo, "digest": {"sha256": digest.split(":", 1)[1]}}],
        "predicateType": "https://sigstore.dev/cosign/sign/v1", "predicate": {},
    }).encode()  # fmt: skip


def pae(payload_type: str, payload: bytes) -> bytes:
    return b"DSSEv1 %d %b %d %b" % (len(payload_type), payload_type.encode(), len(payload), payload)


def bundle(*, digest: str, statement_of: bytes | None = None, key: ec.EllipticCurvePrivateKey | None = None,
           sigstore: Sigstore | None = None, subject: str = "dev@example.com", issuer: str = "https://accounts.test",
           tamper: bool = False) -> bytes:  # fmt: skip
    """A Sigstore bundle v0.3: a message signature over the manifest digest, or (`statement_of`) a DSSE envelope.

    Signed by `key` (verification material: a key hint) or keylessly by `sigstore` (a certificate and a Rekor entry).
    """
    from cryptography.hazmat.primitives.asymmetric.utils import Prehashed  # noqa: PLC0415

    signer = key or ec.generate_private_key(ec.SECP256R1())
    hashed = bytes.fromhex(digest.split(":", 1)[1])
    if statement_of is None:
        signature = signer.sign(hashed, ec.ECDSA(Prehashed(hashes.SHA256())))
        content: dict[str, object] = {"messageSignature": {
            "messageDigest": {"algorithm": "SHA2_256", "digest": b64(hashed)}, "signature": b64(signature)}}  # fmt: skip
    else:
        signature = signer.sign(pae("application/vnd.in-toto+json", statement_of), ec.ECDSA(hashes.SHA256()))
        content = {"dsseEnvelope": {"payload": b64(statement_of), "payloadType": "application/vnd.in-toto+json",
                                    "signatures": [{"sig": b64(signature), "keyid": ""}]}}  # fmt: skip
    if tamper:
        signed = bytearray(signature)
        signed[len(signed) // 2] ^= 1
        field_ = content.get("messageSignature") or content["dsseEnvelope"]["signatures"][0]  # type: ignore[index]
        field_["signature" if "signature" in field_ else "sig"] = b64(bytes(signed))
    material: dict[str, object] = {"publicKey": {"hint": "test"}}
    if sigstore is not None:
        cert = sigstore.certificate(signer, subject, issuer)
        cert_pem = b64(pem(cert).encode())
        if statement_of is None:
            entry: dict[str, object] = {"apiVersion": "0.0.1", "kind": "hashedrekord", "spec": {
                "data": {"hash": {"algorithm": "sha256", "value": hashed.hex()}},
                "signature": {"content": b64(signature), "publicKey": {"content": cert_pem}}}}  # fmt: skip
        else:
            entry = {"apiVersion": "0.0.1", "kind": "dsse", "spec": {
                "payloadHash": {"algorithm": "sha256", "value": hashlib.sha256(statement_of).hexdigest()},
                "envelopeHash": {"algorithm": "sha256", "value": "0" * 64},
                "signatures": [{"signature": b64(signature), "verifier": cert_pem}]}}  # fmt: skip
        promised, stamp = sigstore.promise(entry)
        material = {
            "certificate": {"rawBytes": b64(cert.public_bytes(serialization.Encoding.DER))},
            "tlogEntries": [{
                "logIndex": str(promised["logIndex"]),
                "logId": {"keyId": b64(bytes.fromhex(str(promised["logID"])))},
                "kindVersion": {"kind": entry["kind"], "version": "0.0.1"},
                "integratedTime": str(promised["integratedTime"]),
                "inclusionPromise": {"signedEntryTimestamp": b64(stamp)},
                "canonicalizedBody": promised["body"],
            }],
        }  # fmt: skip
    return json.dumps({"mediaType": BUNDLE_TYPE, "verificationMaterial": material, **content}).encode()


def attach_bundle(pusher: Pusher, repo: str, digest: str, data: bytes, *, tag_schema: bool = True) -> tuple[str, bytes]:
    """Push `data` as an OCI 1.1 referrer of `repo@digest` (cosign's layout), and the referrers tag listing it.

    `tag_schema=False` leaves out the tag `sha256-<hex>` (for a registry whose referrers API answers instead).
    Returns the referrer's manifest digest and the referrers index.
    """
    pusher.blob(repo, EMPTY)
    pusher.blob(repo, data)
    manifest = json.dumps({
        "schemaVersion": 2, "mediaType": OCI_MANIFEST, "artifactType": BUNDLE_TYPE,
        "config": {"mediaType": "application/vnd.oci.empty.v1+json", "digest": sha(EMPTY), "size": len(EMPTY)},
        "layers": [{"mediaType": BUNDLE_TYPE, "digest": sha(data), "size": len(data)}],
        "subject": {"mediaType": OCI_MANIFEST, "digest": digest, "size": 0},
        "annotations": {"dev.sigstore.bundle.content": "dsse-envelope"},
    }, separators=(",", ":")).encode()  # fmt: skip
    referrer = pusher.manifest(repo, sha(manifest), manifest, OCI_MANIFEST)
    index = json.dumps(
        {
            "schemaVersion": 2,
            "mediaType": OCI_INDEX,
            "manifests": [
                {"mediaType": OCI_MANIFEST, "digest": referrer, "size": len(manifest), "artifactType": BUNDLE_TYPE}
            ],
        }
    ).encode()
    if tag_schema:
        pusher.manifest(repo, f"sha256-{digest.split(':', 1)[1]}", index, OCI_INDEX)
    return referrer, index
