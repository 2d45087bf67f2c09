"""Owns: sha256 and HMAC-SHA256 — every hash ocivendir computes goes through here.

`hashlib` loads OpenSSL on import (~11M instructions, a few milliseconds): more than a warm sync spends hashing its
few small cached blobs. CPython's own sha256 (`_sha256`; `_sha2` from 3.12) costs nothing to load but hashes ~7x
slower than OpenSSL with the CPU's SHA extensions. So a run hashes with the built-in until the bytes it has hashed
with it would have paid for loading OpenSSL (`BUILTIN_BUDGET`), and with OpenSSL from then on, or when the size to
hash is not known in advance (a download). Both give the same digests; only the cost differs.

HMAC-SHA256 (RFC 2104) is built on the same sha256, so fingerprinting a credential does not load `hmac` and OpenSSL.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from _hashlib import _HashObject as Hasher
    from collections.abc import Callable

__all__ = ["BUILTIN_BUDGET", "hmac_sha256_hex", "new_sha256", "sha256_hex"]

BUILTIN_BUDGET = 512 * 1024  # bytes: hashing them with the built-in costs about what loading OpenSSL does
_BLOCK = 64  # sha256's block size (RFC 2104's B)
_IPAD = int.from_bytes(b"\x36" * _BLOCK)
_OPAD = int.from_bytes(b"\x5c" * _BLOCK)


def _builtin() -> Callable[[], Hasher] | None:
    """CPython's own sha256 constructor, or None in a build without it (named imports, so freezers bundle it)."""
    try:
        from _sha256 import sha256  # type: ignore[import-not-found]  # noqa: PLC0415 - 3.11
    except ImportError:
        try:
            from _sha2 import sha256  # type: ignore[import-not-found]  # noqa: PLC0415 - 3.12 and later
        except ImportError:
            return None
    constructor: Callable[[], Hasher] = sha256
    return constructor


class _Chooser:
    """Which implementation the next hasher gets: the built-in while the run's budget lasts, then OpenSSL."""

    def __init__(self) -> None:
        self.remaining = BUILTIN_BUDGET
        self.builtin: Callable[[], Hasher] | None = None
        self.looked = False

    def constructor(self, size: int | None) -> Callable[[], Hasher]:
        if not self.looked:
            self.builtin, self.looked = _builtin(), True
        if self.builtin is not None and size is not None and size <= self.remaining:
            self.remaining -= size  # threads may race here: the budget is a cost estimate, never a correctness rule
            return self.builtin
        import hashlib  # noqa: PLC0415 - OpenSSL only for large or unsized content, or without a built-in sha256

        return hashlib.sha256


_CHOOSER = _Chooser()


def new_sha256(size: int | None = None) -> Hasher:
    """A fresh sha256 hasher for about `size` bytes (None: unknown, maybe large)."""
    return _CHOOSER.constructor(size)()


def _sha256(data: bytes) -> Hasher:
    hasher = new_sha256(len(data))
    hasher.update(data)
    return hasher


def sha256_hex(data: bytes) -> str:
    """The lower-case hex sha256 of some bytes."""
    return _sha256(data).hexdigest()


def hmac_sha256_hex(key: bytes, message: bytes) -> str:
    """HMAC-SHA256 of `message` under `key` (RFC 2104), lower-case hex: what `hmac.new(key, message, sha256)` gives."""
    if len(key) > _BLOCK:
        key = _sha256(key).digest()
    padded = int.from_bytes(key.ljust(_BLOCK, b"\0"))
    inner = _sha256((padded ^ _IPAD).to_bytes(_BLOCK) + message).digest()
    return _sha256((padded ^ _OPAD).to_bytes(_BLOCK) + inner).hexdigest()
