"""Owns: the signature policy model — Sigstore policy-controller's ClusterImagePolicy (v1beta1), parsed strictly.

A policy names images by globs (`sign/glob.py`) and authorities that may vouch for them: a public key (`key.data`,
PEM), keyless identities (`keyless.identities`, checked under the Sigstore trusted root), or a static verdict
(`static.action: pass|fail`). As in
policy-controller, every policy whose globs match an image must pass, and a policy passes when any one of its
authorities verifies the image; `mode: warn` turns a policy's failure into a warning. Fields policy-controller knows
but ocivendir does not implement (`spec.policy`, `spec.match`, `source`, `ctlog`, `attestations`, `secretRef`, `kms`,
...) and fields nobody knows are errors naming the field: a policy is never enforced in part.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

from ocivendir.errors import ConfigError
from ocivendir.goregexp import compile_go, go_search
from ocivendir.goyaml.load import DecodeError, load_documents
from ocivendir.sign.glob import Glob, compile_glob, glob_matches

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable
    from typing import Any

__all__ = ["API_VERSION", "Authority", "Identity", "ImagePolicy", "PolicySet", "parse_policies", "policy_set"]

API_VERSION = "policy.sigstore.dev/v1beta1"
KIND = "ClusterImagePolicy"
HASHES = frozenset({"sha224", "sha256", "sha384", "sha512"})
_UNSUPPORTED = {
    "spec": frozenset({"policy", "match"}),
    "authority": frozenset({"source", "ctlog", "attestations", "rfc3161timestamp"}),
    "key": frozenset({"secretRef", "kms"}),
    "keyless": frozenset({"ca-cert", "trustRootRef"}),
}
# `signatureFormat`: policy-controller's legacy (cosign's `.sig` images) and bundle (Sigstore bundles as referrers);
# unset, ocivendir reads both (the `.sig` image first); `simplesigning` is what earlier ocivendir versions accepted
_FORMATS = {
    "": frozenset({"legacy", "bundle"}),
    "legacy": frozenset({"legacy"}),
    "simplesigning": frozenset({"legacy"}),
    "bundle": frozenset({"bundle"}),
}
_KNOWN = {
    "document": frozenset({"apiVersion", "kind", "metadata", "spec", "status"}),
    "spec": frozenset({"images", "authorities", "mode"}),
    "image": frozenset({"glob"}),
    "authority": frozenset({"name", "key", "keyless", "static", "signatureFormat"}),
    "key": frozenset({"data", "hashAlgorithm"}),
    "keyless": frozenset({"url", "identities", "insecureIgnoreSCT"}),
    "identity": frozenset({"issuer", "subject", "issuerRegExp", "subjectRegExp"}),
    "static": frozenset({"action", "message"}),
}


@dataclass(frozen=True, kw_only=True)
class Identity:
    """A keyless signer: issuer and subject, each exact or a Go regular expression (searched, as cosign does)."""

    issuer: str = ""
    subject: str = ""
    issuer_regexp: str = ""
    subject_regexp: str = ""

    def matches(self, issuer: str, subject: str) -> bool:
        """Whether a certificate's OIDC issuer and subject are this identity's."""
        issuer_ok = issuer == self.issuer if self.issuer else go_search(self.issuer_regexp, issuer)
        subject_ok = subject == self.subject if self.subject else go_search(self.subject_regexp, subject)
        return issuer_ok and subject_ok


@dataclass(frozen=True, kw_only=True)
class Authority:
    """One way a policy may be satisfied: `key`, `keyless` or `static`."""

    name: str
    kind: str
    key_pem: str = ""
    hash_algorithm: str = "sha256"
    identities: tuple[Identity, ...] = ()
    check_sct: bool = True  # keyless: `insecureIgnoreSCT: true` turns it off
    formats: frozenset[str] = frozenset({"legacy", "bundle"})  # `signatureFormat`: which signatures may vouch
    action: str = ""  # static: pass or fail
    message: str = ""


@dataclass(frozen=True, kw_only=True)
class ImagePolicy:
    """One ClusterImagePolicy: the images it covers, who may vouch for them, and what a failure does."""

    name: str
    source: str
    globs: tuple[str, ...]
    authorities: tuple[Authority, ...]
    mode: str  # enforce or warn
    digest: str  # sha256 of its name and spec: a verdict reached under it is remembered under this
    patterns: tuple[Glob, ...] = field(default=(), compare=False, repr=False)

    def matches(self, image: str) -> bool:
        """Whether any of its globs matches an image reference."""
        return any(glob_matches(pattern, image) for pattern in self.patterns)


@dataclass(frozen=True, kw_only=True)
class PolicySet:
    """Every policy read from `--policy`; `matching` gives those that apply to an image."""

    policies: tuple[ImagePolicy, ...] = ()

    @property
    def keyless(self) -> tuple[tuple[ImagePolicy, Authority], ...]:
        """Every keyless authority, with its policy (they need a trusted root)."""
        return tuple((p, a) for p in self.policies for a in p.authorities if a.kind == "keyless")

    def matching(self, image: str) -> tuple[ImagePolicy, ...]:
        """The policies whose globs match an image reference, in the order they were read."""
        return tuple(policy for policy in self.policies if policy.matches(image))


class _Reader:
    """Field access with errors that name the file, the document and the field's path."""

    def __init__(self, source: str, number: int, name: str = "") -> None:
        self.source, self.number, self.name = source, number, name

    def fail(self, path: str, problem: str) -> ConfigError:
        where = f"policy '{self.name}'" if self.name else f"document {self.number}"
        return ConfigError(f"Reading signature policy '{self.source}' ({where}): {path}: {problem}")

    def mapping(self, value: Any, path: str, kind: str) -> dict[str, Any]:  # noqa: ANN401 - YAML data
        if not isinstance(value, dict):
            raise self.fail(path, "expected a mapping")
        for key in value:
            name = f"{path}.{key}" if path else str(key)
            if key in _UNSUPPORTED.get(kind, ()):
                raise self.fail(name, "this field is not supported by ocivendir")
            if key not in _KNOWN[kind]:
                raise self.fail(name, "unknown field")
        return value

    def text(self, doc: dict[str, Any], key: str, path: str, *, required: bool = False) -> str:
        value = doc.get(key)
        if value is None or value == "":
            if required:
                raise self.fail(f"{path}.{key}", "missing field")
            return ""
        if not isinstance(value, str):
            raise self.fail(f"{path}.{key}", "expected a string")
        return value

    def items(self, doc: dict[str, Any], key: str, path: str) -> list[Any]:
        value = doc.get(key)
        if not isinstance(value, list) or not value:
            raise self.fail(f"{path}.{key}", "missing field" if value is None else "expected a non-empty list")
        return value

    def regexp(self, pattern: str, path: str) -> str:
        try:
            compile_go(pattern)  # Go's regexp, as cosign compiles it: RE2, never backtracking
        except ValueError as exc:
            raise self.fail(path, f"invalid regular expression: {exc}") from None
        return pattern


def _identity(reader: _Reader, raw: Any, path: str) -> Identity:  # noqa: ANN401 - YAML data
    doc = reader.mapping(raw, path, "identity")
    issuer, subject = reader.text(doc, "issuer", path), reader.text(doc, "subject", path)
    issuer_re, subject_re = reader.text(doc, "issuerRegExp", path), reader.text(doc, "subjectRegExp", path)
    for exact, pattern, what in ((issuer, issuer_re, "issuer"), (subject, subject_re, "subject")):
        if bool(exact) == bool(pattern):
            raise reader.fail(path, f"expected exactly one of {what} and {what}RegExp")
        if pattern:
            reader.regexp(pattern, f"{path}.{what}RegExp")
    return Identity(issuer=issuer, subject=subject, issuer_regexp=issuer_re, subject_regexp=subject_re)


def _key(reader: _Reader, raw: Any, name: str, path: str, formats: frozenset[str]) -> Authority:  # noqa: ANN401
    doc = reader.mapping(raw, path, "key")
    pem = reader.text(doc, "data", path, required=True)
    if "-----BEGIN PUBLIC KEY-----" not in pem:
        raise reader.fail(f"{path}.data", "expected a PEM public key (-----BEGIN PUBLIC KEY-----)")
    hash_algorithm = reader.text(doc, "hashAlgorithm", path) or "sha256"
    if hash_algorithm not in HASHES:
        raise reader.fail(f"{path}.hashAlgorithm", f"expected one of {', '.join(sorted(HASHES))}")
    return Authority(name=name, kind="key", key_pem=pem, hash_algorithm=hash_algorithm, formats=formats)


def _authority(reader: _Reader, raw: Any, number: int) -> Authority:  # noqa: ANN401 - YAML data
    path = f"spec.authorities[{number}]"
    doc = reader.mapping(raw, path, "authority")
    name = reader.text(doc, "name", path) or f"authority-{number}"
    kinds = [kind for kind in ("key", "keyless", "static") if doc.get(kind) is not None]
    if len(kinds) != 1:
        raise reader.fail(path, "expected exactly one of key, keyless and static")
    formats = _FORMATS.get(reader.text(doc, "signatureFormat", path))
    if formats is None:
        raise reader.fail(f"{path}.signatureFormat", "expected legacy or bundle")
    if kinds == ["key"]:
        return _key(reader, doc["key"], name, f"{path}.key", formats)
    if kinds == ["static"]:
        static = reader.mapping(doc["static"], f"{path}.static", "static")
        action = reader.text(static, "action", f"{path}.static", required=True)
        if action not in {"pass", "fail"}:
            raise reader.fail(f"{path}.static.action", "expected pass or fail")
        return Authority(
            name=name, kind="static", action=action, message=reader.text(static, "message", f"{path}.static")
        )
    keyless = reader.mapping(doc["keyless"], f"{path}.keyless", "keyless")
    where = f"{path}.keyless.identities"
    identities = tuple(
        _identity(reader, item, f"{where}[{i}]") for i, item in enumerate(reader.items(keyless, "identities", where))
    )
    ignore_sct = keyless.get("insecureIgnoreSCT", False)
    if not isinstance(ignore_sct, bool):
        raise reader.fail(f"{path}.keyless.insecureIgnoreSCT", "expected true or false")
    reader.text(keyless, "url", f"{path}.keyless", required=True)  # policy-controller: one of url and ca-cert
    return Authority(name=name, kind="keyless", identities=identities, check_sct=not ignore_sct, formats=formats)


def _policy(reader: _Reader, doc: dict[str, Any]) -> ImagePolicy:
    if doc.get("apiVersion") != API_VERSION:
        raise reader.fail("apiVersion", f"expected {API_VERSION}, found {doc.get('apiVersion')!r}")
    if doc.get("kind") != KIND:
        raise reader.fail("kind", f"expected {KIND}, found {doc.get('kind')!r}")
    metadata = doc.get("metadata")
    name = metadata.get("name") if isinstance(metadata, dict) else None
    if not isinstance(name, str) or not name:
        raise reader.fail("metadata.name", "missing field")
    reader.name = name
    spec = reader.mapping(doc.get("spec"), "spec", "spec")
    globs = []
    for number, item in enumerate(reader.items(spec, "images", "spec")):
        path = f"spec.images[{number}]"
        globs.append(reader.text(reader.mapping(item, path, "image"), "glob", path, required=True))
    try:
        patterns = tuple(compile_glob(glob) for glob in globs)
    except ValueError as exc:
        raise reader.fail("spec.images", str(exc)) from None
    authorities = tuple(_authority(reader, a, n) for n, a in enumerate(reader.items(spec, "authorities", "spec")))
    mode = reader.text(spec, "mode", "spec") or "enforce"
    if mode not in {"enforce", "warn"}:
        raise reader.fail("spec.mode", "expected enforce or warn")
    canonical = repr((name, spec))  # decoded values (str, bool, int, lists, dicts in document order): deterministic
    return ImagePolicy(name=name, source=reader.source, globs=tuple(globs), authorities=authorities, mode=mode,
                       digest=hashlib.sha256(canonical.encode()).hexdigest(), patterns=patterns)  # fmt: skip


def parse_policies(text: str, source: str) -> list[ImagePolicy]:
    """Every ClusterImagePolicy in a stream of YAML documents (empty documents are skipped).

    They are read as Kubernetes reads them (sigs.k8s.io/yaml, go-yaml v2: `goyaml/load.py`).
    """
    try:
        documents = list(load_documents(text))
    except DecodeError as exc:
        raise ConfigError(f"Reading signature policy '{source}': {exc}") from None
    policies = []
    for number, doc in enumerate(documents, start=1):
        if doc is None:
            continue
        reader = _Reader(source, number)
        policies.append(_policy(reader, reader.mapping(doc, "", "document")))
    return policies


def policy_set(policies: Iterable[ImagePolicy]) -> PolicySet:
    """A set of policies; two with one name are an error (policy-controller's names are unique)."""
    seen: dict[str, str] = {}
    chosen = []
    for policy in policies:
        if policy.name in seen:
            raise ConfigError(
                f"Reading signature policy '{policy.source}': policy '{policy.name}' is also defined in "
                f"'{seen[policy.name]}'"
            )
        seen[policy.name] = policy.source
        chosen.append(policy)
    return PolicySet(policies=tuple(chosen))
