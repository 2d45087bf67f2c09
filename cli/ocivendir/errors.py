"""Owns: ocivendir's error types, each with a stable code and the exit code it maps to."""

from __future__ import annotations

import errno
import os

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import ClassVar, Self

__all__ = [
    "BadReference",
    "CacheError",
    "CacheUnwritable",
    "ConfigError",
    "Denied",
    "DigestMismatch",
    "ImagesLockError",
    "IndexNotSupported",
    "IsABundle",
    "NotABundle",
    "NotFound",
    "OcivendirError",
    "RateLimited",
    "RegistryError",
    "RelocationUndetermined",
    "ResponseTimeout",
    "SignatureError",
    "SyncError",
    "TLSVerifyError",
    "Transient",
    "Unauthorized",
    "UnsafeArchive",
    "UnsupportedMediaType",
    "UsageError",
    "os_reason",
]


class OcivendirError(Exception):
    """Base of every error ocivendir reports; `commands.main()` maps it to an exit code."""

    code: ClassVar[str] = "error"
    exit_code: ClassVar[int] = 1

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        """Keep the message (which names the object at fault) and an optional hint."""
        super().__init__(message)
        self.message = message
        self.hint = hint

    def reworded(self, message: str, *, hint: str | None = None) -> Self:
        """This error, of its own type and with its other attributes, saying `message` (and `hint`) instead.

        Not `type(self)(message)`: a subclass may take other arguments than a message and a hint (`ResponseTimeout`).
        """
        other = type(self).__new__(type(self), message)
        other.__dict__.update(self.__dict__)
        other.message, other.hint = message, hint
        return other

    def __str__(self) -> str:
        """Render as imgpkg does: the hint in parentheses after the message."""
        if self.hint:
            return f"{self.message} (hint: {self.hint})"
        return self.message


class UsageError(OcivendirError):
    """Bad flags or flag combinations."""

    code = "usage"
    exit_code = 2


class ConfigError(OcivendirError):
    """Input files that cannot be used: YAML syntax, validation, missing secrets."""

    code = "config-invalid"
    exit_code = 2


class BadReference(OcivendirError):
    """A reference that does not follow the grammar."""

    code = "bad-reference"
    exit_code = 2


class RegistryError(OcivendirError):
    """A registry answered with an error, or could not be reached.

    `transport` is go-containerregistry's text for the same answer (`GET <url>: CODE: message`), when there was one;
    imgpkg mode frames it as imgpkg does. `top_fetch` marks a failure fetching the reference asked for itself.
    """

    code = "registry-error"
    transport: str | None = None
    top_fetch: bool = False


class Unauthorized(RegistryError):
    """401 after authenticating, or no credentials for a registry that needs them."""

    code = "unauthorized"


class Denied(RegistryError):
    """403: the credentials do not grant access."""

    code = "denied"


class NotFound(RegistryError):
    """404 for a manifest or blob."""

    code = "not-found"


class RateLimited(RegistryError):
    """429 with a wait longer than ocivendir is willing to honour."""

    code = "rate-limited"


class Transient(RegistryError):
    """Connection failures, timeouts and 5xx left after the retries."""

    code = "registry-unreachable"


class ResponseTimeout(Transient):
    """The registry accepted the request but sent no response headers within `waited` seconds."""

    def __init__(self, message: str, *, waited: float) -> None:
        """The message, and how long the client waited for the response headers."""
        super().__init__(message)
        self.waited = waited


class TLSVerifyError(RegistryError):
    """A certificate that does not verify."""

    code = "tls-verify"


class DigestMismatch(OcivendirError):
    """Fetched or cached bytes whose sha256 or size differ from the expected ones."""

    code = "digest-mismatch"


class UnsupportedMediaType(OcivendirError):
    """A manifest or layer media type ocivendir cannot read."""

    code = "unsupported-media-type"


class UnsafeArchive(OcivendirError):
    """A layer entry that would write outside the output directory."""

    code = "unsafe-archive"


class IndexNotSupported(OcivendirError):
    """An image index where one image was expected."""

    code = "index-not-supported"


class NotABundle(OcivendirError):
    """A plain image where a bundle was expected."""

    code = "not-a-bundle"


class IsABundle(OcivendirError):
    """A bundle where a plain image was expected."""

    code = "is-a-bundle"


class ImagesLockError(OcivendirError):
    """An `.imgpkg/images.yml` (or BundleLock, ImageLocations) that imgpkg would refuse."""

    code = "images-lock-invalid"


class RelocationUndetermined(OcivendirError):
    """Relocation could not be decided and no earlier verdict exists."""

    code = "relocation-undetermined"


class CacheError(OcivendirError):
    """The cache directory cannot be used."""

    code = "cache-error"


class CacheUnwritable(CacheError):
    """The cache cannot be written now (a read-only mount, a full filesystem, no permission); reading it still works."""


class SignatureError(OcivendirError):
    """An image or bundle about to be extracted is not allowed by a signature policy (`--policy`)."""

    code = "signature-invalid"


class SyncError(OcivendirError):
    """A sync failure that wraps a lower error with vendir's frames."""

    code = "sync-failed"


def os_reason(exc: OSError) -> str:
    """An OSError as one clear line — the path(s) it names, then what went wrong — never Python's `[Errno N] …`.

    `'/cache/blobs/sha256/ab…': is a directory`: the system's text in lower case, as Go prints it; a rename names
    both paths (`'a' -> 'b': …`); a full filesystem (or quota) names where it is mounted too. An OSError
    raised with a message of its own is that message.
    """
    if not exc.strerror:
        return str(exc.args[0]) if len(exc.args) == 1 else str(exc) or type(exc).__name__
    names = [n.decode(errors="replace") if isinstance(n, bytes) else str(n) for n in (exc.filename, exc.filename2)
             if n is not None]  # fmt: skip
    where = " -> ".join(f"'{name}'" for name in names)
    reason = exc.strerror.lower()
    if (
        exc.errno in _NO_SPACE and names and not names[-1].startswith("/dev/")
    ):  # a device (stdout: /dev/full) has no mount to free
        reason += f" (on the filesystem mounted at '{_mount_point(names[-1])}')"
    return f"{where}: {reason}" if where else reason


_NO_SPACE = frozenset({errno.ENOSPC, errno.EDQUOT})


def _mount_point(path: str) -> str:
    """The mount point of the filesystem holding `path` (or its nearest existing parent), as far as it can be told."""
    current = os.path.abspath(path)
    while not os.path.exists(current) and os.path.dirname(current) != current:
        current = os.path.dirname(current)
    try:
        device = os.stat(current).st_dev
        while (parent := os.path.dirname(current)) != current and os.stat(parent).st_dev == device:
            current = parent
    except OSError:
        pass
    return current
