"""Owns: who may be served a cached manifest — credential fingerprints keyed by a per-cache secret.

A shared cache records, per manifest and repository, the principals that could read it: `anonymous`, or
`hmac-sha256:<hex>`, an HMAC of the credential under a random key kept in the cache (`grants.key`, mode 0600). The
secret itself is never stored, nor a plain hash that a low-entropy password could be guessed from.
"""

from __future__ import annotations

import hashlib
import hmac
import os
from threading import Lock

from ocivendir.fs.paths import pure, split
from ocivendir.fs.remove import remove_file

TYPE_CHECKING = False
if TYPE_CHECKING:
    from ocivendir.registry.credentials import Credential

__all__ = ["ANONYMOUS_PRINCIPAL", "Fingerprints", "is_principal"]

ANONYMOUS_PRINCIPAL = "anonymous"
_KEY_BYTES = 32
_HMAC_PREFIX = "hmac-sha256:"


def is_principal(value: object) -> bool:
    """True for a value ocivendir writes as a principal."""
    if not isinstance(value, str) or value == ANONYMOUS_PRINCIPAL:
        return value == ANONYMOUS_PRINCIPAL
    hex_part = value.removeprefix(_HMAC_PREFIX)
    return hex_part != value and len(hex_part) == 64 and not hex_part.strip("0123456789abcdef")  # noqa: PLR2004


class Fingerprints:
    """Credential fingerprints under the cache's key, created (0600) on first need."""

    def __init__(self, key_path: str | os.PathLike[str]) -> None:
        """Use the key at `key_path`; nothing is read or written until a fingerprint is needed."""
        self._path = pure(key_path)
        self._key: bytes | None = None
        self._lock = Lock()

    def _load(self) -> bytes:
        with self._lock:
            if self._key is None:
                self._key = self._read() or self._create()
            return self._key

    def _read(self) -> bytes | None:
        try:
            if os.path.isfile(self._path) and not os.path.islink(self._path):
                with open(self._path, "rb") as handle:
                    data = handle.read()
                if len(data) == _KEY_BYTES:
                    return data
        except OSError:
            pass
        return None

    def _create(self) -> bytes:
        """A new random key, published without clobbering one another process made at the same moment."""
        parent, name = split(self._path)
        tmp = os.path.join(parent, f".{name}-{os.urandom(6).hex()}")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            os.write(fd, os.urandom(_KEY_BYTES))
            os.fsync(fd)
        finally:
            os.close(fd)
        try:
            try:
                os.link(tmp, self._path)
            except FileExistsError:
                pass
            existing = self._read()
            if existing is None:  # a malformed key in its place: replace it (grants made with it stop matching)
                os.replace(tmp, self._path)
                existing = self._read()
        finally:
            remove_file(tmp)
        if existing is None:
            msg = f"cannot create the cache key {self._path}"
            raise OSError(msg)
        return existing

    def principal(self, registry: str, credential: Credential, *, certificate: str = "") -> str:
        """`anonymous` for no credential, else the credential's keyed fingerprint (bound to the registry).

        `certificate`: the client certificate file the caller presents to the registry (registries.yaml's `tls`),
        part of the fingerprint by its bytes; one that cannot be read is fingerprinted by its path (never anonymous).
        """
        parts: tuple[str, ...] = (credential.username, credential.password, credential.identity_token,
                                  credential.registry_token)  # fmt: skip
        if not any(parts) and not certificate:
            return ANONYMOUS_PRINCIPAL
        if certificate:  # only then a part more: fingerprints made before certificates counted still match
            parts = (*parts, _certificate_digest(certificate))
        message = "\0".join((registry, *parts)).encode()
        return _HMAC_PREFIX + hmac.new(self._load(), message, hashlib.sha256).hexdigest()


def _certificate_digest(path: str) -> str:
    """The sha256 of a client certificate file's bytes (its first MiB), or its path when it cannot be read."""
    try:
        with open(path, "rb") as cert:
            return hashlib.sha256(cert.read(1 << 20)).hexdigest()
    except OSError:
        return f"unreadable {path}"
