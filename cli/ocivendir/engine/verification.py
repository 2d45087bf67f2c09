"""Owns: reaching a signature verdict — reading an image's signatures and bundles, and each authority's answer.

The gate (`engine/signatures.py`) comes here only when no verdict is remembered. Every policy given must pass; a policy
passes when one of its authorities does (policy-controller's rules). A key authority passes when one of cosign's
signatures of the image (`sign/cosign.py`, fetched from the image's own repository through `Content`: verified against
their digests, cached and possessed like any content) verifies with its key and its payload names the manifest
digest; a keyless authority, when one is a valid keyless signature by one of its identities under the trusted root
(`sign/keyless.py`); when cosign's signatures do not suffice, the Sigstore bundles attached as referrers
(`engine/referrers.py`, `sign/bundle.py`) are read and checked the same way.
"""

from __future__ import annotations

from dataclasses import dataclass
from threading import Lock

from ocivendir.errors import NotFound, OcivendirError
from ocivendir.oci.manifest import Manifest
from ocivendir.sign.cosign import (
    BUNDLE_ANNOTATION,
    CERTIFICATE_ANNOTATION,
    CHAIN_ANNOTATION,
    MAX_PAYLOAD,
    MAX_SIGNATURES,
    payload_digest,
    signature_bytes,
    signature_tag,
)

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

    from ocivendir.engine.content import Content, Subject
    from ocivendir.engine.referrers import Bundles
    from ocivendir.sign.bundle import SigstoreBundle
    from ocivendir.sign.keyless import Signed, Signer
    from ocivendir.sign.keys import PublicKey
    from ocivendir.sign.policy import Authority, ImagePolicy
    from ocivendir.sign.trustroot import TrustedRoot

__all__ = ["PolicyOutcome", "Signatures", "Verifier", "read_signatures"]


@dataclass(frozen=True, kw_only=True)
class Signatures:
    """The cosign signatures found for an image, or why none could be read."""

    items: tuple[Signed, ...] = ()
    problem: str = ""


@dataclass(frozen=True, kw_only=True)
class PolicyOutcome:
    """One matching policy's answer for an image: passed, or the reason each authority gave."""

    policy: ImagePolicy
    passed: bool
    reasons: tuple[str, ...] = ()

    def describe(self, ref: str) -> str:
        """The failure, naming the image, the policy and its file, and each authority's reason."""
        why = "; ".join(self.reasons)
        return f"image '{ref}' is not allowed by signature policy '{self.policy.name}' ({self.policy.source}): {why}"


def read_signatures(content: Content, image: Subject) -> Signatures:
    """Cosign's signatures of an image, from `<repo>:sha256-<hex>.sig` (none when the tag does not exist)."""
    from ocivendir.sign.keyless import Signed  # noqa: PLC0415 - a warm run whose verdict is remembered reads none

    tag = signature_tag(image.repo, image.digest)
    try:
        digest = content.resolve(tag)
        raw, manifest = content.manifest(image.repo, digest)
        if not isinstance(manifest, Manifest):
            return Signatures(problem=f"'{tag}' is an index, not a signature image")
        if len(manifest.layers) > MAX_SIGNATURES or any(blob.size > MAX_PAYLOAD for blob in manifest.blobs):
            return Signatures(problem=f"'{tag}' is not a signature image: over {MAX_SIGNATURES} layers or a blob "
                                      f"over {MAX_PAYLOAD} bytes")  # fmt: skip
        layers = [(layer, sig) for layer in manifest.layers if (sig := signature_bytes(layer)) is not None]
        content.ensure_blobs(image.repo, manifest.blobs)  # the config too: the ref is recorded whole
        items = tuple(
            Signed(
                payload=content.store.read_verified(layer.digest, layer.size, f"signature payload of '{tag}'"),
                signature=sig,
                certificate=layer.annotations.get(CERTIFICATE_ANNOTATION, ""),
                chain=layer.annotations.get(CHAIN_ANNOTATION, ""),
                bundle=layer.annotations.get(BUNDLE_ANNOTATION, ""),
            )
            for layer, sig in layers
        )
        content.record(image.repo, digest, raw, manifest, "signature")
    except NotFound:
        return Signatures(problem=f"no signatures (no '{tag}' in the registry)")
    except OcivendirError as exc:
        return Signatures(problem=f"its signatures could not be read: {exc}")
    return Signatures(items=items)


class _Evidence:
    """An image's signatures and Sigstore bundles, each read and parsed on first need and once per run.

    A keyless item's certificate, signature, Rekor entry, chain and SCT are checked once (per SCT setting), whichever
    authorities ask: only the identity match runs per authority.
    """

    def __init__(self, content: Content, image: Subject) -> None:
        self.content, self.image = content, image
        self._signatures: Signatures | None = None
        self._bundles: Bundles | None = None
        self._parsed: tuple[SigstoreBundle | str, ...] | None = None
        self._signers: dict[tuple[int, bool], Signer | str] = {}

    def signatures(self) -> Signatures:
        if self._signatures is None:
            self._signatures = read_signatures(self.content, self.image)
        return self._signatures

    def bundles(self) -> Bundles:
        if self._bundles is None:
            from ocivendir.engine.referrers import read_bundles  # noqa: PLC0415 - only when no signature sufficed

            self._bundles = read_bundles(self.content, self.image)
        return self._bundles

    def parsed(self) -> tuple[SigstoreBundle | str, ...]:
        """Each bundle found, parsed, or why it does not parse."""
        if self._parsed is None:
            from ocivendir.sign.bundle import parse_bundle  # noqa: PLC0415 - bundles only

            def parse(raw: bytes) -> SigstoreBundle | str:
                try:
                    return parse_bundle(raw)
                except Exception as exc:  # noqa: BLE001 - a registry's bytes: whatever fails, this one does not count
                    return _unusable(exc)

            self._parsed = tuple(parse(raw) for raw in self.bundles().found)
        return self._parsed

    def signer(self, item: Signed | SigstoreBundle, check_sct: bool, check: Callable[[], Signer]) -> Signer | str:
        """Who signed a keyless item (`check`, run once per item and SCT setting), or why it is no valid one."""
        key = (id(item), check_sct)  # the items live as long as this evidence
        if key not in self._signers:
            try:
                self._signers[key] = check()
            except Exception as exc:  # noqa: BLE001 - a signer's certificate and entry: hostile, refused item by item
                self._signers[key] = _unusable(exc)
        return self._signers[key]


def _unusable(exc: Exception) -> str:
    """Why a hostile signature or bundle does not count: its own message, or what in it could not be handled."""
    return str(exc) if type(exc) is ValueError else f"it cannot be checked ({type(exc).__name__}: {exc})"


def _checked(verifies: Callable[[Any], str | None], item: object) -> str | None:
    """`verifies(item)`, where a failure to check a hostile item is a reason it does not verify, never the run's end."""
    try:
        return verifies(item)
    except Exception as exc:  # noqa: BLE001 - see above
        return _unusable(exc)


class Verifier:
    """One run's verification: the keys policies name and the trusted root, each loaded on first use."""

    def __init__(self, trusted_root: str | None, root_bytes: bytes | None, parsed: TrustedRoot | None = None) -> None:
        """A verifier for the trusted root at this path, whose bytes the gate has read (and parsed, if it did)."""
        self.trusted_root, self._root_bytes = trusted_root, root_bytes
        self._keys: dict[str, PublicKey] = {}  # by the PEM text of the key
        self._parsed = parsed  # else parsed when a keyless authority is first evaluated
        self._lock = Lock()

    def evaluate(self, content: Content, image: Subject, policies: tuple[ImagePolicy, ...]) -> list[PolicyOutcome]:
        """Each policy's outcome; signatures and bundles are read once, and only if an authority needs them."""
        evidence = _Evidence(content, image)
        outcomes = []
        for policy in policies:
            reasons = []
            for authority in policy.authorities:
                reason = self._authority(policy, authority, str(image.digest), evidence)
                if reason is None:
                    outcomes.append(PolicyOutcome(policy=policy, passed=True))
                    break
                reasons.append(f"authority '{authority.name}': {reason}")
            else:
                outcomes.append(PolicyOutcome(policy=policy, passed=False, reasons=tuple(reasons)))
        return outcomes

    def _authority(self, policy: ImagePolicy, authority: Authority, digest: str, evidence: _Evidence) -> str | None:
        """None when the authority vouches for the image, else why not: cosign's signatures first, then bundles."""
        if authority.kind == "static":  # policy-controller's words
            return None if authority.action == "pass" else f"disallowed by static policy: {authority.message}"
        reasons = []
        if "legacy" in authority.formats:
            found = evidence.signatures()
            if not found.items:
                reasons.append(found.problem or "the signature image holds no cosign signature")
            elif (
                reason := self._signed_by(found, self._verifier(policy, authority, evidence), authority, digest)
            ) is None:
                return None
            else:
                reasons.append(reason)
        if "bundle" in authority.formats:
            bundles = evidence.bundles()
            if not bundles.found:
                reasons.append(bundles.problem)
            elif (
                bundled := self._bundled(evidence.parsed(), self._bundle_verifier(policy, authority, evidence), digest)
            ) is None:
                return None
            else:
                reasons.append(bundled)
        return "; ".join(reasons)

    @staticmethod
    def _bundled(
        parsed: tuple[SigstoreBundle | str, ...], verifies: Callable[[SigstoreBundle], str | None], digest: str
    ) -> str | None:
        """None when one Sigstore bundle verifies and speaks for the digest, else why none does."""
        problems = []
        for bundle in parsed:
            if isinstance(bundle, str):
                problems.append(bundle)
                continue
            problem = _checked(verifies, bundle)
            if problem is None and bundle.names(digest):
                return None
            problems.append(problem or f"a Sigstore bundle verifies, but it does not name {digest}")
        return f"no valid Sigstore bundle ({len(parsed)} checked: {'; '.join(dict.fromkeys(problems))})"

    @staticmethod
    def _signed_by(
        found: Signatures, verifies: Callable[[Signed], str | None], authority: Authority, digest: str
    ) -> str | None:
        """None when one signature verifies and its payload names the digest, else why none does."""
        other, problems = None, []
        for signed in found.items:
            problem = _checked(verifies, signed)
            if problem is None:
                named = payload_digest(signed.payload)
                if named == digest:
                    return None
                other = named or "no digest"
            else:
                problems.append(problem)
        if other is not None:
            return f"a signature verifies, but its payload names {other}, not {digest}"
        if authority.kind == "key":
            return f"no signature verifies with its key ({len(found.items)} checked)"
        return f"no valid keyless signature ({len(found.items)} checked: {'; '.join(dict.fromkeys(problems))})"

    def _bundle_verifier(
        self, policy: ImagePolicy, authority: Authority, evidence: _Evidence
    ) -> Callable[[SigstoreBundle], str | None]:
        """The authority's check of one Sigstore bundle: None when it vouches for it, else why not."""
        from ocivendir.sign.bundle import bundle_key_problem, bundle_signer  # noqa: PLC0415 - bundles only

        if authority.kind == "keyless":
            root, sct = self._trusted(), authority.check_sct
            return lambda bundle: _identity_problem(
                evidence.signer(bundle, sct, lambda: bundle_signer(bundle, root, check_sct=sct)), authority
            )
        key = self._key(policy, authority)
        return lambda bundle: bundle_key_problem(bundle, key, authority.hash_algorithm)

    def _verifier(
        self, policy: ImagePolicy, authority: Authority, evidence: _Evidence
    ) -> Callable[[Signed], str | None]:
        """The authority's check of one signature: None when it vouches for it, else why not."""
        if authority.kind == "keyless":
            from ocivendir.sign.keyless import keyless_signer  # noqa: PLC0415 - cryptography only when verifying

            root, sct = self._trusted(), authority.check_sct
            return lambda signed: _identity_problem(
                evidence.signer(signed, sct, lambda: keyless_signer(signed, root, check_sct=sct)), authority
            )
        from ocivendir.sign.keys import signature_verifies  # noqa: PLC0415 - cryptography only when verifying

        key = self._key(policy, authority)
        return lambda signed: (
            None if signature_verifies(key, signed.signature, signed.payload, authority.hash_algorithm) else "no"
        )

    def _trusted(self) -> TrustedRoot:
        """The trusted root, parsed when a keyless authority is first evaluated (ConfigError if it is not one)."""
        from ocivendir.sign.trustroot import parse_trusted_root  # noqa: PLC0415 - keyless only

        with self._lock:
            if self._parsed is None:
                self._parsed = parse_trusted_root(self._root_bytes or b"", str(self.trusted_root))
            return self._parsed

    def _key(self, policy: ImagePolicy, authority: Authority) -> PublicKey:
        from ocivendir.sign.keys import load_public_key  # noqa: PLC0415 - cryptography only when verifying

        with self._lock:  # by the key itself: two authorities may share a name (and did share one key by it)
            if authority.key_pem not in self._keys:
                where = f"signature policy '{policy.name}' ({policy.source}), authority '{authority.name}'"
                self._keys[authority.key_pem] = load_public_key(authority.key_pem, where)
            return self._keys[authority.key_pem]


def _identity_problem(signer: Signer | str, authority: Authority) -> str | None:
    """None when a valid keyless item's signer is one of the authority's identities, else why not."""
    return signer if isinstance(signer, str) else signer.problem(authority.identities)
