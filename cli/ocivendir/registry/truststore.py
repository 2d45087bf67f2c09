"""Owns: the system trust store, found and read as Go's crypto/x509 does on Linux (what vendir trusts).

Go's rules (`root_linux.go`, `loadOnDiskRoots` in `root.go`): `SSL_CERT_FILE`, else the first readable file of
`GO_CERT_FILES`; then every file of each directory of `SSL_CERT_DIR` (colon-separated), else of `GO_CERT_DIRS`,
skipping symlinks that point inside the same directory. A file that does not exist is no error; another read error
is remembered and reported only when no certificate was found at all. Only `CERTIFICATE` PEM blocks without headers
count. A bundled certifi file is never used: kapp-controller appends its custom CAs to the system bundle only.
Every path consulted is recorded with its identity as it was before it was read (`TrustStore.consulted`), so that a
context made from them can be kept while they stay the same (`registry/tlscontexts.py`).
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import ssl
from dataclasses import dataclass
from pathlib import Path

from ocivendir import diag
from ocivendir.fs.fileid import Identity, identity

__all__ = [
    "GO_CERT_DIRS",
    "GO_CERT_FILES",
    "Consulted",
    "TrustStore",
    "load_into",
    "path_identity",
    "read_trust_store",
    "report",
]

GO_CERT_FILES: tuple[str, ...] = (
    "/etc/ssl/certs/ca-certificates.crt",  # Debian, Ubuntu, Gentoo
    "/etc/pki/tls/certs/ca-bundle.crt",  # Fedora, RHEL 6, photon (kapp-controller appends its caCerts here)
    "/etc/ssl/ca-bundle.pem",  # OpenSUSE
    "/etc/pki/tls/cacert.pem",  # OpenELEC
    "/etc/pki/ca-trust/extracted/pem/tls-ca-bundle.pem",  # CentOS, RHEL 7
    "/etc/ssl/cert.pem",  # Alpine
)
GO_CERT_DIRS: tuple[str, ...] = ("/etc/ssl/certs", "/etc/pki/tls/certs")

_PEM_CERT = re.compile(rb"-----BEGIN CERTIFICATE-----\r?\n[A-Za-z0-9+/=\r\n]+-----END CERTIFICATE-----")
_ERRNO_GO = {errno.EACCES: "permission denied", errno.EISDIR: "is a directory", errno.ENOTDIR: "not a directory"}
_log = diag.logger("ocivendir.registry.truststore")


Consulted = tuple[tuple[str, Identity | None], ...]  # each path looked at, with its identity then (None: none there)


def path_identity(path: str | os.PathLike[str]) -> Identity | None:
    """The identity of what `path` names now, links followed (as they are when it is read), or None.

    `os.stat`, not pathlib's: a kept TLS context checks every file of Debian's /etc/ssl/certs on each call that uses
    it (149 paths: 0.45 ms against pathlib's 1.6 ms).
    """
    try:
        return identity(os.stat(path))  # noqa: PTH116 - 3x cheaper than pathlib, per file per call (above)
    except (OSError, ValueError):
        return None


@dataclass(frozen=True)
class TrustStore:
    """The unique certificates found, where they came from, Go's first read error (`None` when none), what was read."""

    certificates: tuple[bytes, ...]
    sources: tuple[Path, ...]
    first_error: str | None
    consulted: Consulted = ()

    @property
    def failed(self) -> bool:
        """True where Go's SystemCertPool fails: no certificate at all and a read error other than absence."""
        return not self.certificates and self.first_error is not None


def _go_error(op: str, path: Path, exc: OSError) -> str:
    op = "read" if exc.errno == errno.EISDIR else op  # Go opens a directory fine; reading it fails
    reason = _ERRNO_GO.get(exc.errno or 0, (exc.strerror or str(exc)).lower())
    return f"{op} {path}: {reason}"


class _Collector:
    """Accumulates certificates in first-seen order without duplicates, and Go's first error."""

    def __init__(self) -> None:
        self.certificates: dict[bytes, None] = {}
        self.sources: list[Path] = []
        self.first_error: str | None = None
        self.read: set[Path] = set()
        self.consulted: list[tuple[str, Identity | None]] = []

    def look(self, path: Path) -> None:
        """Record `path`'s identity before it is read: a change made after this gives it another one."""
        self.consulted.append((str(path), path_identity(path)))

    def note(self, op: str, path: Path, exc: OSError) -> None:
        if self.first_error is None and not isinstance(exc, FileNotFoundError):
            self.first_error = _go_error(op, path, exc)

    def read_once(self, path: Path) -> bytes:
        """The file's bytes, or nothing when the same file was read already (Debian's bundle sits in its dir)."""
        real = path.resolve()
        if real in self.read:
            return b""
        data = path.read_bytes()
        self.read.add(real)
        return data

    def add(self, path: Path, data: bytes) -> None:
        found = [match.group(0).replace(b"\r\n", b"\n") for match in _PEM_CERT.finditer(data)]
        if found:
            self.sources.append(path)
        self.certificates.update(dict.fromkeys(found))


def _read_first_file(files: tuple[Path, ...], collector: _Collector) -> None:
    for path in files:
        collector.look(path)
        try:
            data = collector.read_once(path)
        except OSError as exc:
            collector.note("open", path, exc)
            continue
        collector.add(path, data)
        return


def _unique_entries(directory: Path) -> list[Path]:
    """The directory's entries less the symlinks whose target has no slash (same-directory links, c_rehash's)."""
    return [path for path in sorted(directory.iterdir()) if not (path.is_symlink() and "/" not in str(path.readlink()))]


def _read_directories(directories: tuple[Path, ...], collector: _Collector) -> None:
    for directory in directories:
        collector.look(directory)  # its entries added, removed or renamed change its own identity
        try:
            entries = _unique_entries(directory)
        except OSError as exc:
            collector.note("open", directory, exc)
            continue
        for path in entries:
            collector.look(path)
            try:
                collector.add(path, collector.read_once(path))
            except OSError:
                continue  # Go ignores unreadable entries of a directory


def read_trust_store(
    cert_file: str | None = None,
    cert_dir: str | None = None,
    *,
    default_files: tuple[str, ...] = GO_CERT_FILES,
    default_dirs: tuple[str, ...] = GO_CERT_DIRS,
) -> TrustStore:
    """Read the roots Go would trust, given the values of SSL_CERT_FILE and SSL_CERT_DIR (empty = unset)."""
    files = (Path(cert_file),) if cert_file else tuple(Path(p) for p in default_files)
    dirs = tuple(Path(d) for d in cert_dir.split(":") if d) if cert_dir else tuple(Path(d) for d in default_dirs)
    collector = _Collector()
    _read_first_file(files, collector)
    _read_directories(dirs, collector)
    return TrustStore(
        tuple(collector.certificates), tuple(collector.sources), collector.first_error, tuple(collector.consulted)
    )


def report(store: TrustStore) -> None:
    """Say that no root could be loaded, as Go's SystemCertPool fails, when so (each time a context is used anew)."""
    if store.failed:
        _log.warning("x509: failed to load system roots and no roots provided; %s", store.first_error)


def load_into(
    context: ssl.SSLContext,
    cert_file: str | None = None,
    cert_dir: str | None = None,
    *,
    default_files: tuple[str, ...] = GO_CERT_FILES,
    default_dirs: tuple[str, ...] = GO_CERT_DIRS,
) -> TrustStore:
    """Add the system roots to `context`; when Go would fail to load them, say why (TLS then fails as unknown CA)."""
    store = read_trust_store(cert_file, cert_dir, default_files=default_files, default_dirs=default_dirs)
    try:
        context.load_verify_locations(cadata=b"\n".join(store.certificates).decode("ascii"))
    except (ssl.SSLError, ValueError):
        for certificate in store.certificates:  # one bad block must not hide the others (Go skips it)
            with contextlib.suppress(ssl.SSLError, ValueError):
                context.load_verify_locations(cadata=certificate.decode("ascii"))
    report(store)
    return store
