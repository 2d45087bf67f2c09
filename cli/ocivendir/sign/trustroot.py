"""Owns: the Sigstore trusted root — `trusted_root.json` (protobuf-specs `TrustedRoot`, JSON form) read from a file.

It names the certificate authorities keyless signatures chain to (Fulcio: `certificateAuthorities[].certChain`,
intermediates first, the root last, each valid for `validFor`), the transparency logs whose signed entry timestamps
are accepted (Rekor: `tlogs[]`) and the certificate transparency logs whose SCTs are (`ctlogs[]`), each log a public
key (`publicKey.rawBytes`, DER SubjectPublicKeyInfo, valid for `publicKey.validFor`) named by `logId.keyId`. Nothing
is fetched: the file is the whole trust (`--trusted-root` / `OCIVENDIR_TRUSTED_ROOT`). Field names are read in
protobuf's JSON spelling (`rawBytes`) or the proto's own (`raw_bytes`), as protobuf's JSON parsers accept both. A
file that cannot be read, is not JSON, or lacks what keyless verification needs is a ConfigError naming the file and
the field.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from datetime import UTC, datetime

from ocivendir.errors import ConfigError
from ocivendir.sign import strictb64

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from cryptography.hazmat.primitives.asymmetric.types import PublicKeyTypes
    from cryptography.x509 import Certificate

__all__ = ["Authority", "LogKey", "TrustedRoot", "parse_trusted_root", "read_trusted_root"]

MEDIA_TYPES = ("application/vnd.dev.sigstore.trustedroot+json;version=0.1",
               "application/vnd.dev.sigstore.trustedroot.v0.2+json")  # fmt: skip
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_NEVER = datetime.max.replace(tzinfo=UTC)


@dataclass(frozen=True, kw_only=True)
class _Validity:
    """When a key or an authority was in force (`validFor`: start, and end when it has one)."""

    start: datetime
    end: datetime

    def valid_at(self, when: datetime) -> bool:
        """Whether it was in force at a time."""
        return self.start <= when <= self.end


@dataclass(frozen=True, kw_only=True)
class LogKey(_Validity):
    """A transparency log's key: its id (sha256 of the DER key, as `logId.keyId`) and when it may have signed."""

    log_id: bytes
    key: PublicKeyTypes


@dataclass(frozen=True, kw_only=True)
class Authority(_Validity):
    """A certificate authority: its chain (intermediates first, the root last) and when it issued."""

    chain: tuple[Certificate, ...]


@dataclass(frozen=True, kw_only=True)
class TrustedRoot:
    """The parsed trusted root (a remembered verdict depends on its file's bytes: the gate hashes them)."""

    authorities: tuple[Authority, ...]
    tlogs: tuple[LogKey, ...]
    ctlogs: tuple[LogKey, ...]

    def tlog(self, log_id: bytes) -> LogKey | None:
        """The Rekor key a log id names, if the root trusts it."""
        return next((log for log in self.tlogs if log.log_id == log_id), None)

    def ctlog(self, log_id: bytes) -> LogKey | None:
        """The certificate transparency log key a log id names, if the root trusts it."""
        return next((log for log in self.ctlogs if log.log_id == log_id), None)


class _Reader:
    """Field access with errors that name the file and the field's path."""

    def __init__(self, source: str) -> None:
        self.source = source

    def fail(self, path: str, problem: str) -> ConfigError:
        return ConfigError(f"Reading Sigstore trusted root '{self.source}': {path}: {problem}")

    def get(self, doc: dict[str, Any], name: str, path: str, kind: type, *, required: bool = True) -> Any:  # noqa: ANN401
        snake = "".join(f"_{c.lower()}" if c.isupper() else c for c in name)
        value = doc.get(name, doc.get(snake))
        if value is None:
            if required:
                raise self.fail(f"{path}.{name}" if path else name, "missing field")
            return kind()
        if not isinstance(value, kind):
            raise self.fail(
                f"{path}.{name}" if path else name,
                f"expected {'a list' if kind is list else 'an object' if kind is dict else 'a string'}",
            )
        return value

    def der(self, doc: dict[str, Any], path: str) -> bytes:
        text = self.get(doc, "rawBytes", path, str)
        decoded = strictb64.decode(text)
        if decoded is None:
            raise self.fail(f"{path}.rawBytes", "not base64")
        return decoded

    def time(self, doc: dict[str, Any], name: str, path: str, default: datetime) -> datetime:
        text = self.get(doc, name, path, str, required=False)
        if not text:
            return default
        try:
            when = datetime.fromisoformat(text)
        except ValueError:
            raise self.fail(f"{path}.{name}", f"not an RFC 3339 time: {text!r}") from None
        return when if when.tzinfo is not None else when.replace(tzinfo=UTC)

    def span(self, doc: dict[str, Any], path: str) -> tuple[datetime, datetime]:
        valid = self.get(doc, "validFor", path, dict, required=False)
        return self.time(valid, "start", f"{path}.validFor", _EPOCH), self.time(
            valid, "end", f"{path}.validFor", _NEVER
        )


def _logs(reader: _Reader, doc: dict[str, Any], name: str) -> tuple[LogKey, ...]:
    from cryptography.exceptions import UnsupportedAlgorithm  # noqa: PLC0415 - keyless only
    from cryptography.hazmat.primitives.serialization import load_der_public_key  # noqa: PLC0415

    logs = []
    for number, item in enumerate(reader.get(doc, name, "", list, required=name == "tlogs")):
        path = f"{name}[{number}]"
        if not isinstance(item, dict):
            raise reader.fail(path, "expected an object")
        public = reader.get(item, "publicKey", path, dict)
        der = reader.der(public, f"{path}.publicKey")
        try:
            key = load_der_public_key(der)
        except (ValueError, TypeError, UnsupportedAlgorithm) as exc:  # a curve cryptography cannot use, too
            raise reader.fail(f"{path}.publicKey.rawBytes", f"not a public key: {exc}") from None
        start, end = reader.span(public, f"{path}.publicKey")
        log_id = reader.get(item, "logId", path, dict, required=False)
        if log_id:
            key_id = reader.der({"rawBytes": reader.get(log_id, "keyId", f"{path}.logId", str)}, f"{path}.logId")
        else:
            key_id = hashlib.sha256(der).digest()
        logs.append(LogKey(log_id=key_id, key=key, start=start, end=end))
    return tuple(logs)


def _authorities(reader: _Reader, doc: dict[str, Any]) -> tuple[Authority, ...]:
    from cryptography.x509 import load_der_x509_certificate  # noqa: PLC0415 - keyless only

    authorities = []
    for number, item in enumerate(reader.get(doc, "certificateAuthorities", "", list)):
        path = f"certificateAuthorities[{number}]"
        if not isinstance(item, dict):
            raise reader.fail(path, "expected an object")
        chain = reader.get(reader.get(item, "certChain", path, dict), "certificates", f"{path}.certChain", list)
        certificates = []
        for index, raw in enumerate(chain):
            where = f"{path}.certChain.certificates[{index}]"
            if not isinstance(raw, dict):
                raise reader.fail(where, "expected an object")
            try:
                certificates.append(load_der_x509_certificate(reader.der(raw, where)))
            except ValueError as exc:
                raise reader.fail(f"{where}.rawBytes", f"not a DER certificate: {exc}") from None
        if not certificates:
            raise reader.fail(f"{path}.certChain.certificates", "expected a non-empty list")
        start, end = reader.span(item, path)
        authorities.append(Authority(chain=tuple(certificates), start=start, end=end))
    if not authorities:
        raise reader.fail("certificateAuthorities", "expected a non-empty list")
    return tuple(authorities)


def parse_trusted_root(data: bytes, source: str) -> TrustedRoot:
    """A trusted root from the file's bytes; ConfigError naming the file and field when it is not one."""
    from ocivendir import jsondoc  # noqa: PLC0415 - only here (json imports re); a deep document is invalid JSON

    reader = _Reader(source)
    try:
        doc = jsondoc.loads(data)
    except (ValueError, UnicodeDecodeError) as exc:
        raise ConfigError(f"Reading Sigstore trusted root '{source}': not JSON: {exc}") from None
    if not isinstance(doc, dict):
        raise reader.fail("(document)", "expected a JSON object")
    media_type = reader.get(doc, "mediaType", "", str, required=False)
    if media_type and media_type not in MEDIA_TYPES:
        raise reader.fail("mediaType", f"expected {' or '.join(MEDIA_TYPES)}, found {media_type!r}")
    return TrustedRoot(
        authorities=_authorities(reader, doc),
        tlogs=_logs(reader, doc, "tlogs"),
        ctlogs=_logs(reader, doc, "ctlogs"),
    )


def read_trusted_root(path: str) -> bytes:
    """The trusted root file's bytes; ConfigError naming it when it cannot be read."""
    try:
        with open(path, "rb") as handle:  # noqa: PTH123 - pathlib costs the warm path its import
            return handle.read()
    except OSError as exc:
        raise ConfigError(f"Reading Sigstore trusted root '{path}': {exc.strerror}") from None
