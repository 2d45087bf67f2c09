"""Owns: the OCI image layout on disk.

Blob admission (verify, fsync, rename under a per-digest lock), the partial download a broken-off fetch leaves for the
next holder of that lock to resume (`tmp/<hex>.partial`), verified reads, and `index.json`.

A shared cache directory is writable by every caller, so nothing under it is trusted to be what its name says: blobs
are opened with O_NOFOLLOW and must be regular files (a symlink, FIFO or device planted in `blobs/sha256/` counts as a
missing blob and is unlinked, never read through), temp files are created with O_EXCL|O_NOFOLLOW and their mode and
fsync go through the descriptor, a partial is resumed only if it is a regular file of this user with one link (else it
is removed first), and `blobs/sha256/`, `tmp/` and `locks/` themselves must be real directories.

A write the filesystem refuses for lack of space, or because it is read-only or not this user's, is a
`CacheUnwritable` naming the file (`cache/unwritable.py`); a partial download cut short by a full filesystem is not
kept, since keeping it would keep the filesystem full.
"""

from __future__ import annotations

import errno
import hashlib
import os
import stat
from contextlib import contextmanager
from dataclasses import dataclass

from ocivendir import diag
from ocivendir.cache import verified
from ocivendir.cache.unwritable import NO_SPACE, unwritable
from ocivendir.errors import CacheError, DigestMismatch
from ocivendir.fs.locks import file_lock
from ocivendir.fs.paths import pure
from ocivendir.fs.remove import remove_file, remove_tree
from ocivendir.fs.swap import atomic_write
from ocivendir.oci.manifest import sha256_digest
from ocivendir.oci.reference import Digest

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Iterator
    from typing import IO

__all__ = ["LAYOUT_MARKER", "PARTIAL_SUFFIX", "BlobStore", "LayoutEntry", "NotABlob", "VerifyingReader"]

LAYOUT_MARKER = b'{"imageLayoutVersion":"1.0.0"}'
# OCI-layout readers (containers/image, so skopeo) only look at descriptors typed as OCI manifests or indexes; a
# Docker-typed manifest is listed under the OCI type so they find it. The blob's bytes are never changed.
_LAYOUT_TYPES = {
    "application/vnd.docker.distribution.manifest.v2+json": "application/vnd.oci.image.manifest.v1+json",
    "application/vnd.docker.distribution.manifest.list.v2+json": "application/vnd.oci.image.index.v1+json",
}
PARTIAL_SUFFIX = ".partial"
_CHUNK = 1 << 20
_log = diag.logger("ocivendir.cache")
_READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC  # NONBLOCK: a planted FIFO cannot hang open
_NEW_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC


class NotABlob(OSError):
    """What is at a blob's path is not a regular file (a symlink, FIFO, device or directory planted there)."""


@dataclass(frozen=True, kw_only=True)
class LayoutEntry:
    """One manifest named in index.json."""

    ref: str
    digest: Digest
    media_type: str
    size: int


class VerifyingReader:
    """A read-only stream over a blob that hashes what it yields; `finish` drains and checks it."""

    def __init__(self, handle: IO[bytes], digest: Digest, size: int, what: str) -> None:
        """Wrap an open blob file."""
        self._handle = handle
        self._hash = hashlib.sha256()
        self._size = size
        self._digest = digest
        self._read = 0
        self._what = what

    def read(self, n: int = -1) -> bytes:
        """Read and hash."""
        chunk = self._handle.read(n)
        self._hash.update(chunk)
        self._read += len(chunk)
        return chunk

    def readable(self) -> bool:
        """Streams are readable."""
        return True

    def finish(self) -> None:
        """Read what is left and raise DigestMismatch unless size and sha256 match."""
        while self.read(_CHUNK):
            pass
        if self._read != self._size or Digest(self._hash.hexdigest()) != self._digest:
            raise DigestMismatch(f"{self._what}: cached blob {self._digest} is corrupt (size {self._read})")


class BlobStore:
    """Blobs under `<root>/blobs/sha256/`, temp files under `<root>/tmp/`, locks under `<root>/locks/` (`str` paths)."""

    def __init__(self, root: str | os.PathLike[str]) -> None:
        """Use (and create) the layout at `root`."""
        self.root = pure(root)
        self.blobs = os.path.join(self.root, "blobs", "sha256")
        self.tmp = os.path.join(self.root, "tmp")
        self.locks = os.path.join(self.root, "locks")

    def ensure_layout(self) -> None:
        """Create the directories and the OCI layout marker files if absent (or empty).

        The marker and a new cache's empty `index.json` are written without fsync: they hold nothing to lose (the
        marker is a constant, `index.json` is written again, durably, with the first ref recorded), and the empty
        file a crash may leave of them is written again here. A new cache directory costs no sync for them.
        """
        try:
            for directory in (os.path.dirname(self.blobs), self.blobs, self.tmp, self.locks):
                if _is_directory(directory):  # every call but a new cache's first: one lstat
                    continue
                if os.path.islink(directory):  # planted: ocivendir never makes one; replaced, never followed
                    _log.warning("cache: replacing the symbolic link %s with a directory", directory)
                    remove_file(directory)
                os.makedirs(directory, 0o700, exist_ok=True)  # the mode applies to the last directory only
            if _empty(os.path.join(self.root, "oci-layout")):
                atomic_write(os.path.join(self.root, "oci-layout"), LAYOUT_MARKER, mode=0o644, durable=False)
            if _empty(os.path.join(self.root, "index.json")):
                self.write_index_json(lambda: (), durable=False)
        except OSError as exc:
            what = f"Cannot use cache directory '{self.root}'"
            raise unwritable(exc, what, self.root) or CacheError(f"{what}: {exc.strerror or exc}") from None

    def path(self, digest: Digest) -> str:
        """Where a blob lives."""
        return f"{self.blobs}/{digest.hex}"

    def has(self, digest: Digest, size: int | None = None) -> bool:
        """True if the blob is a regular file (with the expected size, when given); a symlink is not a blob."""
        try:
            info = os.lstat(self.path(digest))
        except FileNotFoundError:
            return False
        return stat.S_ISREG(info.st_mode) and (size is None or info.st_size == size)

    def _open(self, digest: Digest) -> IO[bytes]:
        """A blob opened for reading without following links; NotABlob (after unlinking it) if it is no file."""
        fd = self._open_fd(digest)[0]
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")

    def _open_fd(self, digest: Digest) -> tuple[int, os.stat_result]:
        """`_open`'s descriptor (still O_NONBLOCK, which a regular file's reads ignore) and the file's fstat then."""
        path = self.path(digest)
        try:
            fd = os.open(path, _READ_FLAGS)
        except OSError as exc:
            if isinstance(exc, FileNotFoundError):
                raise
            self._unlink_planted(path)
            raise NotABlob(f"{path} is not a regular file") from None
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            os.close(fd)
            self._unlink_planted(path)
            raise NotABlob(f"{path} is not a regular file")
        return fd, info

    def _unlink_planted(self, path: str) -> None:
        """Remove what is at a blob's path and is no regular file: a link or FIFO, or a directory with its contents."""
        try:
            remove_tree(path)  # never follows a link
        except OSError as exc:
            _log.debug("cache: cannot remove %s, which is not a blob: %s", path, exc.strerror or exc)

    def _new_tmp(self, digest: Digest) -> str:
        """A fresh temp file for a digest, made by this process (O_EXCL): nothing planted is written through."""
        tmp = f"{self.tmp}/{digest.hex}-{os.urandom(6).hex()}"
        os.close(os.open(tmp, _NEW_FLAGS, 0o600))
        return tmp

    def _publish(self, tmp: str, digest: Digest) -> None:
        """Sync and chmod a filled temp file through a descriptor (never a link), then rename it into place."""
        fd = os.open(tmp, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                raise NotABlob(f"{tmp} is not a regular file")
            os.fsync(fd)
            os.fchmod(fd, 0o644)
        finally:
            os.close(fd)
        target = self.path(digest)
        if os.path.isdir(target) and not os.path.islink(target):  # a directory there counts as a missing blob
            remove_tree(target)
        os.replace(tmp, target)

    def lock_path(self, name: str) -> str:
        """A lock file under `locks/`."""
        return f"{self.locks}/{name}"

    def admit(
        self,
        digest: Digest,
        size: int,
        fill: Callable[[str], None],
        reuse: Callable[[], bool] | None = None,
        *,
        resumable: bool = False,
    ) -> bool:
        """Make sure the blob is present; `fill(tmp)` writes and verifies it. True if it was fetched now.

        Runs under the digest's exclusive lock, so concurrent processes fetch a blob once; a temp file left by a
        killed run is removed by the next holder of the lock. A present blob is kept only when `reuse()` (asked under
        the lock) says the caller may have it; otherwise it is fetched again and the verified copy replaces it.

        `resumable`: `tmp` is the digest's partial file (`tmp/<hex>.partial`), which may hold the bytes an earlier
        attempt received; a failed `fill` leaves it for the next holder of the lock to resume from (`fill` empties
        it when its bytes must not be kept). A partial this process may not trust is removed first.
        """
        with self._writing(f"Cannot store blob {digest} in the cache"), file_lock(self.lock_path(f"blob-{digest.hex}")):
            if self.has(digest, size) and (reuse is None or reuse()):
                if resumable:
                    remove_file(self.partial_path(digest))  # a run killed after publishing, before removing it
                return False
            self._remove_stale(digest)
            with self._no_links(digest):
                tmp = self._usable_partial(digest, size) if resumable else self._new_tmp(digest)
                kept = resumable  # the bytes received, for the next holder of the lock to resume from
                try:
                    fill(tmp)
                    self._publish(tmp, digest)
                    kept = False
                except OSError as exc:
                    exc = _named(exc, tmp)
                    kept = kept and not (exc.errno in NO_SPACE and exc.filename == tmp)
                    raise exc from None
                finally:
                    if not kept or _empty(tmp):
                        remove_file(tmp)
            return True

    def partial_path(self, digest: Digest) -> str:
        """Where a download of `digest` keeps the bytes it received (one per digest, written under its lock)."""
        return f"{self.tmp}/{digest.hex}{PARTIAL_SUFFIX}"

    def _usable_partial(self, digest: Digest, size: int) -> str:
        """The partial's path, with whatever is there removed unless it may be resumed from.

        Resumable: a regular file of this user with one link, no longer than the blob. Anything else (a link, a FIFO,
        another user's file, a hard link to a file elsewhere) was not left by this user's download.
        """
        path = self.partial_path(digest)
        try:
            info = os.lstat(path)
        except FileNotFoundError:
            return path
        usable = stat.S_ISREG(info.st_mode) and info.st_nlink == 1 and info.st_size <= size
        if not usable or info.st_uid != os.geteuid():
            _log.debug("cache: not resuming from %s (not a partial download of this user's)", path)
            remove_tree(path)  # never follows a link
        return path

    def _remove_stale(self, digest: Digest) -> None:
        """Remove the temp files of `digest` a killed run left (`tmp/<hex>-*`; a partial download is kept)."""
        prefix = f"{digest.hex}-"
        try:
            names = os.listdir(self.tmp)
        except FileNotFoundError:
            return
        stale = [f"{self.tmp}/{name}" for name in names if name.startswith(prefix)]
        for path in stale:
            remove_file(path)

    @contextmanager
    def _writing(self, what: str) -> Iterator[None]:
        """A write the filesystem refuses (full, read-only, not this user's) is a CacheUnwritable saying `what`.

        Only a write under the cache's directory: a layer applied while it downloads writes into the target too.
        """
        try:
            yield
        except OSError as exc:
            name = exc.filename
            inside = name is None or (isinstance(name, str | bytes) and os.fsdecode(name).startswith(f"{self.root}/"))
            error = unwritable(exc, what, self.root) if inside else None
            if error is None:
                raise
            raise error from None

    @contextmanager
    def _no_links(self, digest: Digest) -> Iterator[None]:
        """A temp file that became a link (or other non-file) while it was written is a CacheError, not an errno."""
        try:
            yield
        except OSError as exc:
            if not isinstance(exc, NotABlob) and exc.errno != errno.ELOOP:
                raise
            raise CacheError(
                f"Cannot store blob {digest} in '{self.tmp}': its temp file was replaced by a link or other non-file "
                "while it was written (it was not followed)",
                hint="someone else who can write the cache directory is tampering with it",
            ) from None

    def admit_bytes(self, digest: Digest, data: bytes) -> bool:
        """Store bytes already in memory (a manifest), after checking their digest."""
        if sha256_digest(data) != digest:
            raise DigestMismatch(f"refusing to cache bytes that do not match {digest}")

        return self.admit(digest, len(data), lambda tmp: _write_tmp(tmp, data))

    def admit_fetched(
        self, digest: Digest, fetch: Callable[[], bytes], reuse: Callable[[], bool] | None = None
    ) -> tuple[bytes, bool]:
        """Single-flight for small blobs of unknown size (manifests); returns the bytes and whether they were fetched.

        Under the digest's lock: read it if present (and `reuse()` allows), else fetch, verify and store it.
        """
        with self._writing(f"Cannot store blob {digest} in the cache"), file_lock(self.lock_path(f"blob-{digest.hex}")):
            if self.has(digest) and (reuse is None or reuse()):
                try:
                    with self._open(digest) as handle:
                        data = handle.read()
                        if sha256_digest(data) == digest:
                            return data, False
                except OSError:
                    pass
            data = fetch()
            if sha256_digest(data) != digest:
                raise DigestMismatch(f"refusing to cache bytes that do not match {digest}")
            with self._no_links(digest):
                tmp = self._new_tmp(digest)
                try:
                    _write_tmp(tmp, data)
                    self._publish(tmp, digest)
                except OSError as exc:
                    raise _named(exc, tmp) from None
                finally:
                    remove_file(tmp)
            return data, True

    def read_verified(self, digest: Digest, size: int | None, what: str) -> bytes:
        """A small blob's bytes, re-hashed; a corrupt blob is deleted and DigestMismatch raised.

        One of another size than `size` is corrupt unread: a sparse file planted in a shared cache costs its planter
        nothing, and read whole it would take its size in memory. A small blob this process verified is given again
        from memory while its file is still the one read (`cache/verified.py`).
        """
        path = self.path(digest)
        if (known := verified.kept(path)) is not None and (size is None or len(known) == size):
            return known
        try:
            fd, info = self._open_fd(digest)
            with os.fdopen(fd, "rb", buffering=0) as raw:  # unbuffered: no terminal check nor buffer around it
                data = raw.readall() if size is None or info.st_size == size else None
        except FileNotFoundError:
            raise DigestMismatch(f"{what}: cached blob {digest} is missing") from None
        except NotABlob:
            raise DigestMismatch(f"{what}: cached blob {digest} is not a regular file") from None
        if data is None or sha256_digest(data) != digest or (size is not None and len(data) != size):
            self.delete(digest)
            raise DigestMismatch(f"{what}: cached blob {digest} is corrupt")
        verified.keep(path, info, data)
        return data

    @contextmanager
    def open_verified(self, digest: Digest, size: int, what: str) -> Iterator[VerifyingReader]:
        """Stream a blob while hashing it; at the end the digest is checked and a corrupt blob deleted."""
        try:
            handle = self._open(digest)
        except FileNotFoundError:
            raise DigestMismatch(f"{what}: cached blob {digest} is missing") from None
        except NotABlob:
            raise DigestMismatch(f"{what}: cached blob {digest} is not a regular file") from None
        with handle:
            reader = VerifyingReader(handle, digest, size, what)
            try:
                yield reader
                reader.finish()
            except DigestMismatch:
                self.delete(digest)
                raise
            except Exception as exc:
                # a reader that fails half-way (gzip CRC, a broken tar) may be reading a damaged blob: re-hash it, so
                # the caller can drop and refetch it in this run instead of failing until `cache verify --repair`
                problem = self.problem(digest, size)
                if problem is None:
                    raise
                self.delete(digest)
                raise DigestMismatch(f"{what}: cached blob {digest} is {problem} ({exc})") from None

    def problem(self, digest: Digest, size: int | None) -> str | None:
        """Why a blob file is not the blob it should be (missing, not a file, truncated, corrupt), or None."""
        path = self.path(digest)
        try:
            info = os.lstat(path)
        except FileNotFoundError:
            return "missing"
        if not stat.S_ISREG(info.st_mode):
            return "not a regular file"
        if size is not None and info.st_size != size:
            return f"truncated ({info.st_size} of {size} bytes)"
        hasher = hashlib.sha256()
        try:
            handle = self._open(digest)
        except OSError:
            return "not a regular file"
        with handle:
            while chunk := handle.read(_CHUNK):
                hasher.update(chunk)
        return None if hasher.hexdigest() == digest.hex else "corrupt (sha256 differs)"

    def delete(self, digest: Digest, keep: Callable[[], bool] | None = None) -> None:
        """Remove a blob file (under its lock), unless `keep()`, asked under the lock, says it is needed again."""
        with file_lock(self.lock_path(f"blob-{digest.hex}")):
            if keep is not None and keep():
                return
            remove_tree(self.path(digest))  # a file, a link, or a directory planted in its place

    def write_index_json(self, entries: Callable[[], Iterable[LayoutEntry]], *, durable: bool = True) -> None:
        """Rewrite index.json (temp + rename under its own lock) with one descriptor per entry; `durable`: fsynced.

        `entries()` is asked under the lock, so of two processes writing at once the later one writes what the index
        holds then (a list read before the lock could be older than the file the other one just wrote).
        """
        import json  # noqa: PLC0415 - index.json is written on a cold run only; json imports re

        listed = os.path.join(self.root, "index.json")
        with self._writing(f"Cannot write '{listed}'"), file_lock(self.lock_path("index-json")):
            manifests = [
                {
                    "mediaType": _LAYOUT_TYPES.get(e.media_type, e.media_type),
                    "digest": str(e.digest),
                    "size": e.size,
                    "annotations": {"org.opencontainers.image.ref.name": e.ref},
                }
                for e in sorted(entries(), key=lambda e: e.ref)
            ]
            doc = {"schemaVersion": 2, "mediaType": "application/vnd.oci.image.index.v1+json", "manifests": manifests}
            try:
                atomic_write(listed, json.dumps(doc, indent=1).encode() + b"\n", mode=0o644, durable=durable)
            except OSError as exc:
                raise _named(exc, listed) from None


def _named(exc: OSError, path: str) -> OSError:
    """The error with the path it was about, when it names none (a write through a descriptor): errors name paths."""
    if exc.filename is not None or not exc.errno or type(exc).__module__ != "builtins":  # a library's own: as it is
        return exc
    return OSError(exc.errno, exc.strerror, path)  # OSError picks the subclass for the errno


def _is_directory(path: str) -> bool:
    """A directory itself (not a link to one) is at `path`."""
    try:
        return stat.S_ISDIR(os.lstat(path).st_mode)
    except FileNotFoundError:
        return False


def _empty(path: str) -> bool:
    """Nothing worth keeping there: no file, or an empty one."""
    try:
        return os.lstat(path).st_size == 0
    except FileNotFoundError:
        return True


def _write_tmp(tmp: str, data: bytes) -> None:
    """Write into a temp file this process created, never through a link put in its place."""
    with os.fdopen(os.open(tmp, os.O_WRONLY | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC), "wb") as handle:
        handle.write(data)
