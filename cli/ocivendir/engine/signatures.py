"""Owns: the signature gate — is an image or bundle about to be extracted allowed by the signature policies?

Every policy whose globs match the image's digest reference (`registry/repo@sha256:<hex>`, what policy-controller
matches once a tag is resolved) must pass (`engine/verification.py` decides how). An `enforce` failure is a
SignatureError (exit 1) raised before the caller extracts anything; a `warn` failure is a warning. A pass is
remembered in the cache index per (digest reference, the matching policies' digests, the trusted root's digest when
one of them is keyless), and so is a pass or an image no policy matches per (digest reference, the digest of the
policy files' bytes, the trusted root's digest): a warm run with the same files neither parses a policy nor checks a
signature, and asks the registry nothing. Failures are never remembered, so a signature pushed later is found on the
next run. The policy files are parsed once per cache and content (a remembered `parsed` mark), so a malformed one is
still refused before any request.
"""

from __future__ import annotations

import hashlib
from threading import Lock

from ocivendir.cache.unwritable import best_effort
from ocivendir.errors import SignatureError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from ocivendir.cache.index import CacheIndex
    from ocivendir.engine.content import Content, Subject
    from ocivendir.engine.verification import PolicyOutcome, Verifier
    from ocivendir.sign.policy import ImagePolicy, PolicySet
    from ocivendir.sign.source import PolicySource
    from ocivendir.sign.trustroot import TrustedRoot

__all__ = ["FAILED", "UNMATCHED", "VERIFIED", "WARNED", "SignatureGate", "verdict_key"]

VERIFIED = "verified"  # every matching policy passed
UNMATCHED = "unmatched"  # no policy matches the image
WARNED = "warned"  # a warn policy failed, no enforce policy did
FAILED = "failed"  # an enforce policy failed
PARSED = "parsed"  # the mark: these policy files (with this trusted root) parsed without error
_FILES = "files:"  # a verdict remembered under the policy files' digest, not the matching policies'
_MARK = "policy-files"  # the index row (ref) of the parsed marks


def verdict_key(policies: tuple[ImagePolicy, ...]) -> str:
    """What a remembered verdict depends on: the digests of the policies that match (any edit re-verifies)."""
    return hashlib.sha256("\n".join(sorted(policy.digest for policy in policies)).encode()).hexdigest()


class SignatureGate:
    """The run's policy files, parsed on first need, the trusted root's bytes, and the verifier (on first use)."""

    def __init__(self, source: PolicySource, trusted_root: str | None = None) -> None:
        """A gate for the policy files (a run without `--policy` has none) and the trusted root's path."""
        self.source = source
        self.trusted_root = trusted_root
        self._root_bytes: bytes | None = None  # read now: a trusted root that cannot be read fails before a request
        if trusted_root is not None:
            from ocivendir.sign.trustroot import read_trusted_root  # noqa: PLC0415 - only with --trusted-root

            self._root_bytes = read_trusted_root(trusted_root)
        self._root_any = hashlib.sha256(self._root_bytes).hexdigest() if self._root_bytes is not None else ""
        self._policies: PolicySet | None = None
        self._root: TrustedRoot | None = None  # parsed by validate() when a keyless authority will need it
        self._verifier: Verifier | None = None
        self._lock = Lock()

    def validate(self, index: CacheIndex | None) -> None:
        """Parse the policy files and, for keyless authorities, the trusted root: ConfigError before any request.

        Skipped when the index remembers that these files (with this trusted root) parsed.
        """
        if index is not None and index.signature_verdict(_MARK, _FILES + self.source.digest, self._root_any) == PARSED:
            return
        if self.policies().keyless and self._root_bytes is not None:
            from ocivendir.sign.trustroot import parse_trusted_root  # noqa: PLC0415 - keyless only

            self._root = parse_trusted_root(self._root_bytes, str(self.trusted_root))
        if index is not None:
            files, root = _FILES + self.source.digest, self._root_any
            best_effort(lambda: index.put_signature_verdict(_MARK, files, root, PARSED), "parsed policies")

    def policies(self) -> PolicySet:
        """The policies, parsed on first use."""
        with self._lock:
            if self._policies is None:
                self._policies = self.source.parse(trusted_root=self.trusted_root is not None)
            return self._policies

    def check(self, content: Content, image: Subject) -> None:
        """Raise SignatureError unless every matching enforce policy passes; warn for each failing warn policy."""
        _, failed = self.verdict(content, image)
        for outcome in failed:
            if outcome.policy.mode == "warn":
                content.warn(f"{outcome.describe(image.ref)} (mode: warn, so it is used anyway)")
        enforced = [outcome for outcome in failed if outcome.policy.mode == "enforce"]
        if enforced:
            raise SignatureError("; ".join(outcome.describe(image.ref) for outcome in enforced))

    def verdict(self, content: Content, image: Subject) -> tuple[str, list[PolicyOutcome]]:
        """VERIFIED, UNMATCHED, WARNED or FAILED, with the failed policies' outcomes; a pass is remembered."""
        index, files = content.index, _FILES + self.source.digest
        if index is not None:
            remembered = index.signature_verdict(image.ref, files, self._root_any)
            if remembered in {VERIFIED, UNMATCHED}:
                return remembered, []
        verdict, failed = self._reached(content, image)
        if index is not None and verdict in {VERIFIED, UNMATCHED}:
            root = self._root_any
            best_effort(lambda: index.put_signature_verdict(image.ref, files, root, verdict), image.ref)
        return verdict, failed

    def passed_before(self, index: CacheIndex | None, ref: str) -> bool:
        """Whether `ref` (`registry/repo@sha256:<hex>`) passed these policy files, as the index remembers it.

        Nothing is fetched or verified now: a lazy content kept from an earlier sync may stay only when this holds.
        """
        if index is None:
            return False
        return index.signature_verdict(ref, _FILES + self.source.digest, self._root_any) in {VERIFIED, UNMATCHED}

    def _reached(self, content: Content, image: Subject) -> tuple[str, list[PolicyOutcome]]:
        """The verdict from the parsed policies: remembered per matching policies, else verified now."""
        matched = self.policies().matching(image.ref)
        if not matched:
            return UNMATCHED, []
        key = verdict_key(matched)
        keyless = any(a.kind == "keyless" for policy in matched for a in policy.authorities)
        root = self._root_any if keyless else ""
        index = content.index
        if index is not None and index.signature_verdict(image.ref, key, root) == VERIFIED:
            return VERIFIED, []
        failed = [outcome for outcome in self._verify().evaluate(content, image, matched) if not outcome.passed]
        if not failed:
            if index is not None:
                best_effort(lambda: index.put_signature_verdict(image.ref, key, root, VERIFIED), image.ref)
            return VERIFIED, []
        return (FAILED if any(o.policy.mode == "enforce" for o in failed) else WARNED), failed

    def _verify(self) -> Verifier:
        from ocivendir.engine.verification import Verifier  # noqa: PLC0415 - only when no verdict is remembered

        with self._lock:
            if self._verifier is None:
                self._verifier = Verifier(self.trusted_root, self._root_bytes, self._root)
            return self._verifier
