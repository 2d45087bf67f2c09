"""Owns: cosign's classic signature scheme — where signatures live and what a simple-signing payload must say.

cosign stores the signatures of `repo@sha256:<hex>` as the image `repo:sha256-<hex>.sig`: each layer is one
simple-signing payload (`application/vnd.dev.cosign.simplesigning.v1+json`) whose descriptor carries the base64
signature in the `dev.cosignproject.cosign/signature` annotation. The payload is JSON whose
`critical.image.docker-manifest-digest` must name the manifest being verified (the reference it records is not
checked, as cosign does not: a relocated copy keeps its signatures). A keyless signature's layer also carries its
Fulcio certificate, the certificate chain and Rekor's bundle in `dev.sigstore.cosign/certificate`, `.../chain` and
`.../bundle`.
"""

from __future__ import annotations

from ocivendir import jsondoc
from ocivendir.oci.reference import Digest, Reference, Repository
from ocivendir.sign import strictb64

TYPE_CHECKING = False
if TYPE_CHECKING:
    from ocivendir.oci.manifest import Descriptor

__all__ = [
    "BUNDLE_ANNOTATION",
    "CERTIFICATE_ANNOTATION",
    "CHAIN_ANNOTATION",
    "MAX_PAYLOAD",
    "MAX_SIGNATURES",
    "SIGNATURE_ANNOTATION",
    "SIMPLE_SIGNING",
    "payload_digest",
    "signature_bytes",
    "signature_tag",
]

SIGNATURE_ANNOTATION = "dev.cosignproject.cosign/signature"
CERTIFICATE_ANNOTATION = "dev.sigstore.cosign/certificate"
CHAIN_ANNOTATION = "dev.sigstore.cosign/chain"
BUNDLE_ANNOTATION = "dev.sigstore.cosign/bundle"
SIMPLE_SIGNING = "application/vnd.dev.cosign.simplesigning.v1+json"
MAX_PAYLOAD = 1 << 20  # a payload (or the config) is a few hundred bytes: a larger blob is not a signature's
MAX_SIGNATURES = 256  # signatures one image may carry: a hostile registry cannot make a run fetch more


def signature_tag(repo: Repository, digest: Digest) -> Reference:
    """`<repo>:sha256-<hex>.sig`, where cosign keeps the signatures of `repo@digest`."""
    return repo.tagged(f"{digest.tag_form}.sig")


def signature_bytes(layer: Descriptor) -> bytes | None:
    """The signature a layer's annotation carries (None when it has none or it is not base64)."""
    text = layer.annotations.get(SIGNATURE_ANNOTATION)
    if not text:
        return None
    return strictb64.decode(text)


def payload_digest(payload: bytes) -> str | None:
    """The manifest digest a simple-signing payload names (`critical.image.docker-manifest-digest`), else None."""
    try:
        doc = jsondoc.loads(payload)
    except ValueError:
        return None
    critical = doc.get("critical") if isinstance(doc, dict) else None
    image = critical.get("image") if isinstance(critical, dict) else None
    named = image.get("docker-manifest-digest") if isinstance(image, dict) else None
    return named if isinstance(named, str) else None
