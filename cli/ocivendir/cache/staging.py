"""Owns: an archive's bytes copied into a staging directory — a tar's members or an OCI layout directory's files.

Each blob is copied while its sha256 is computed and kept only under the digest it really has: a member whose bytes
do not match the digest its name claims (`sha256-<hex>.tar.gz`, `blobs/sha256/<hex>`) fails the whole read, and so
does one that claims more bytes than the archive holds, or than the cache's file system has room for. A member path
that is absolute or climbs out (`..`), and a link, fail the read; the small documents that say what the archive holds
(`manifest.json`, `index.json`, `oci-layout`) are kept whole, up to MAX_DOCUMENT. What the documents mean is
`cache/archive.py`'s.
"""

from __future__ import annotations

import hashlib
import os
import stat

from ocivendir.errors import CacheError, DigestMismatch, OcivendirError, UnsafeArchive
from ocivendir.fs.tarread import Member, TarFormatError, TarReader
from ocivendir.oci.reference import Digest

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import IO

__all__ = ["MAX_DOCUMENT", "ArchiveInvalid", "Stager", "chunks", "read_small", "read_tar", "take_file"]

MAX_DOCUMENT = (
    128 << 20
)  # manifest.json / index.json, read whole: 10,000 images of imgpkg's descriptors take tens of MiB
_CHUNK = 1 << 20
_LAYER_PREFIX, _LAYER_SUFFIX = "sha256-", ".tar.gz"
_HEX = "0123456789abcdef"
_DOCUMENTS = frozenset({"manifest.json", "index.json", "oci-layout"})


class ArchiveInvalid(OcivendirError):
    """A malformed archive (raised as CacheError with the archive's name by `cache/archive.py`'s read_archive)."""

    code = "archive-invalid"


def _safe_name(name: str, where: str) -> str:
    """A member path without `./`; an absolute one, or one with `..`, fails."""
    text = name.replace("\\", "/")
    if text.startswith("/") or ".." in text.split("/"):
        raise UnsafeArchive(f"{where}: member '{name}' leaves the archive (absolute or '..' path); nothing imported")
    parts = [p for p in text.split("/") if p not in ("", ".")]
    return "/".join(parts)


def _blob_name(name: str) -> Digest | None:
    """The digest an archive member's name gives its bytes: `sha256-<hex>.tar.gz` or `blobs/sha256/<hex>`."""
    if name.startswith(_LAYER_PREFIX) and name.endswith(_LAYER_SUFFIX):
        hex_part = name[len(_LAYER_PREFIX) : -len(_LAYER_SUFFIX)]
    elif name.startswith("blobs/sha256/") and name.count("/") == 2:  # noqa: PLR2004
        hex_part = name.rpartition("/")[2]
    else:
        return None
    if len(hex_part) != 64 or hex_part.strip(_HEX):  # noqa: PLR2004 - sha256
        return None
    return Digest(hex_part)


class Stager:
    """Copies blobs into the stage while hashing them; a blob whose bytes do not match its name fails the read."""

    def __init__(self, stage: str, where: str, progress: Callable[[int], None]) -> None:
        """A stager into `stage` (an existing directory); `where` starts its errors, `progress` gets bytes done."""
        self.stage = stage
        self.where = where
        self.progress = progress
        self.counted_by_reader = False  # a tar's progress is its bytes read (`_Counting`), headers included
        self.staged: dict[Digest, int] = {}
        self.done = 0

    def take(self, digest: Digest, size: int, read: Callable[[int], bytes], name: str) -> None:
        """Copy `size` bytes from `read` to the stage as blob `digest`; other bytes, or another size, fail the read."""
        if digest in self.staged:
            raise ArchiveInvalid(f"{self.where}: blob {digest} appears twice ('{name}')")
        _room(self.stage, size, self.where)
        hasher = hashlib.sha256()
        path = os.path.join(self.stage, digest.hex)
        got = 0
        with open(
            os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600), "wb"
        ) as out:
            while chunk := read(_CHUNK):
                hasher.update(chunk)
                got += len(chunk)
                if got > size:
                    break
                out.write(chunk)
                self.done += len(chunk)
                if not self.counted_by_reader:
                    self.progress(self.done)
        if got != size or hasher.hexdigest() != digest.hex:
            raise DigestMismatch(
                f"{self.where}: '{name}' does not hold blob {digest} (sha256 or size differs); nothing imported"
            )
        self.staged[digest] = size


def _room(stage: str, size: int, where: str) -> None:
    """Fail before copying a blob that the cache's file system has no room for."""
    try:
        info = os.statvfs(stage)
    except OSError:
        return
    if size > info.f_bavail * info.f_frsize:
        raise CacheError(f"{where}: no room in the cache for a blob of {size} bytes; nothing imported",
                         hint="free space on the cache's file system, or prune it") from None  # fmt: skip


class _Counting:
    """A file's reader that reports the bytes read so far (a tar's progress: its members, headers and padding)."""

    def __init__(self, handle: IO[bytes], stager: Stager) -> None:
        self.handle = handle
        self.stager = stager
        self.read_so_far = 0
        stager.counted_by_reader = True

    def read(self, size: int = -1, /) -> bytes:
        data = self.handle.read(size)
        self.read_so_far += len(data)
        self.stager.progress(self.read_so_far)
        return data


def read_tar(path: str, stager: Stager, limit: int) -> dict[str, bytes]:
    """Stage every blob member of a tar; return its small documents (manifest.json, index.json, oci-layout)."""
    documents: dict[str, bytes] = {}
    try:
        with open(path, "rb") as handle:
            archive = TarReader(_Counting(handle, stager))
            holds = os.fstat(handle.fileno()).st_size
            for count, member in enumerate(archive, start=1):
                if count > limit:
                    raise ArchiveInvalid(f"{stager.where}: more than {limit} members")
                if member.size > holds:
                    raise ArchiveInvalid(f"{stager.where}: member '{member.name}' claims {member.size} bytes, more "
                                         f"than the archive's {holds}")  # fmt: skip
                _member(archive, member, stager, documents)
    except TarFormatError as exc:
        raise ArchiveInvalid(f"{stager.where}: not a readable tar archive: {exc}") from None
    except OSError as exc:
        raise ArchiveInvalid(f"{stager.where}: {exc.strerror or exc}") from None
    return documents


def _member(archive: TarReader, member: Member, stager: Stager, documents: dict[str, bytes]) -> None:
    """One tar member: a blob staged, a document kept, a link or escaping path refused, anything else skipped."""
    name = _safe_name(member.name, stager.where)
    if member.type in (b"1", b"2"):
        raise UnsafeArchive(f"{stager.where}: member '{member.name}' is a link; nothing imported")
    if not member.isreg():
        return
    digest = _blob_name(name)
    if digest is not None:
        stager.take(digest, member.size, archive.read, name)
    elif name in _DOCUMENTS:
        if name in documents:
            raise ArchiveInvalid(f"{stager.where}: '{name}' appears twice")
        if member.size > MAX_DOCUMENT:
            raise ArchiveInvalid(f"{stager.where}: '{name}' is larger than {MAX_DOCUMENT} bytes")
        documents[name] = b"".join(iter(lambda: archive.read(_CHUNK), b""))


def _open_file(path: str) -> int:
    """A regular file opened without following a link at its last component."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise OSError(f"{path} is not a regular file")
    os.set_blocking(fd, True)
    return fd


def read_small(path: str, limit: int, where: str) -> bytes:
    """A regular file's bytes, read whole; one larger than `limit` fails the read."""
    try:
        with os.fdopen(_open_file(path), "rb") as handle:
            data = handle.read(limit + 1)
    except OSError as exc:
        raise ArchiveInvalid(f"{where}: cannot read '{path}': {exc.strerror or exc}") from None
    if len(data) > limit:
        raise ArchiveInvalid(f"{where}: '{path}' is larger than {limit} bytes")
    return data


def take_file(layout: str, digest: Digest, size: int, stager: Stager) -> None:
    """Stage one blob of an OCI layout directory (a regular file, never a link)."""
    blob_path = os.path.join(layout, "blobs", "sha256", digest.hex)
    try:
        fd = _open_file(blob_path)
    except OSError as exc:
        raise ArchiveInvalid(f"{stager.where}: blob {digest} is not in the layout ({exc.strerror or exc})") from None
    with os.fdopen(fd, "rb") as handle:
        if os.fstat(handle.fileno()).st_size != size:
            raise DigestMismatch(f"{stager.where}: blob {digest} is not {size} bytes in the layout; nothing imported")
        stager.take(digest, size, handle.read, f"blobs/sha256/{digest.hex}")


def chunks(data: bytes) -> Callable[[int], bytes]:
    """A reader of `data` for `Stager.take` (a blob the archive carries inline)."""
    view = memoryview(data)
    at = [0]

    def read(size: int) -> bytes:
        chunk = bytes(view[at[0] : at[0] + size])
        at[0] += len(chunk)
        return chunk

    return read
