"""Owns: the bounds on what one image may expand to on disk, and on the shape of its member paths.

Checked while extracting, member by member, before anything is written for the member: the total bytes and entries of
one image's layers (`--max-extract-size`, the entry limit), the depth and length of each path, and the size and number
of the extended headers a member carries and of the pax records in them. The bytes counted are every member's data,
written or skipped (a device or a type nobody knows may carry data too), and its extended headers: whatever the tar
stream makes the extractor inflate; and a block (`DIRECTORY_BYTES`) for each directory made, named or implied by a
path (not one a layer names again), which is what a directory takes on disk with no data at all (100,000 of them in a
0.9 MiB layer took 393 MiB).
A bound that is hit refuses the layer with the unsafe-archive error, so a gzip bomb or a path nested thousands of
levels deep costs at most the limit, never the disk or the interpreter's stack.
"""

from __future__ import annotations

from dataclasses import dataclass

from ocivendir.errors import UnsafeArchive

__all__ = [
    "DEFAULT_MAX_ENTRIES",
    "DEFAULT_MAX_EXTRACT_SIZE",
    "DIRECTORY_BYTES",
    "ExtractLimits",
    "Tally",
    "check_declared",
    "check_path",
    "human",
]

DEFAULT_MAX_EXTRACT_SIZE = 4 << 30
DEFAULT_MAX_ENTRIES = 1_000_000
MAX_DEPTH = 256  # path components
MAX_NAME = 255  # bytes in one component (NAME_MAX)
MAX_PATH = 2048  # bytes in a member path, well under PATH_MAX once joined to the output directory
MAX_HEADER = 1 << 20  # bytes in one pax or GNU long-name header
MAX_HEADER_CHAIN = 16  # extended headers in a row before one member (pax, GNU long names: a chain that never ends)
DIRECTORY_BYTES = 4096  # a directory's own block on disk, counted against the size limit as data is
MAX_PAX_RECORDS = 64  # pax records (per-member and global) read for one member: path, times, ids, names, xattrs…
_SIZE_HINT = "raise --max-extract-size (OCIVENDIR_MAX_EXTRACT_SIZE) if the image is meant to be this large"


@dataclass(frozen=True)
class ExtractLimits:
    """How much one image (all of its layers) may expand to."""

    max_bytes: int = DEFAULT_MAX_EXTRACT_SIZE
    max_entries: int = DEFAULT_MAX_ENTRIES


def human(size: int) -> str:
    """`4 GiB`, `512 MiB`, `10 KiB`, `7 B`: the largest binary unit that keeps a whole number when possible."""
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if size >= 1 << shift:
            value = size / (1 << shift)
            return f"{value:.0f} {unit}" if value == int(value) else f"{value:.1f} {unit}"
    return f"{size} B"


@dataclass
class Tally:
    """What an image's layers have expanded to so far, checked against its limits."""

    limits: ExtractLimits
    entries: int = 0
    bytes: int = 0

    def entry(self, what: str) -> None:
        """Count one member of any kind, or a directory made as the parent of one."""
        self.entries += 1
        if self.entries > self.limits.max_entries:
            raise UnsafeArchive(f"{what}: more than {self.limits.max_entries} entries; refusing to extract further")

    def release(self, size: int) -> None:
        """Take back what `reserve` counted for something that was not written after all (a directory already there)."""
        self.bytes -= size

    def reserve(self, name: str, size: int, what: str) -> None:
        """Count a regular member's declared size before any of its bytes are written."""
        if self.bytes + size > self.limits.max_bytes:
            raise UnsafeArchive(
                f"{what}: entry '{name}' ({human(size)}) would expand the image past the limit of "
                f"{human(self.limits.max_bytes)} ({human(self.bytes)} written so far)",
                hint=_SIZE_HINT,
            )
        self.bytes += size


def check_declared(sizes: list[int], limits: ExtractLimits, what: str) -> None:
    """Refuse, before any layer is downloaded, layers whose declared sizes add up past the extraction limit.

    A compressed layer is never much larger than what it expands to (gzip adds a few bytes per 32 KiB block), so an
    image whose layers declare more than the limit plus 1 % and 1 MiB of slack could only be refused after the
    download: a lying registry would otherwise fill the cache with as many bytes as its manifest declares.
    """
    declared = sum(sizes)
    allowed = limits.max_bytes + limits.max_bytes // 100 + (1 << 20)
    if declared > allowed:
        raise UnsafeArchive(
            f"{what}: its layers declare {human(declared)}, more than the extraction limit of "
            f"{human(limits.max_bytes)} allows; refusing to download them",
            hint=_SIZE_HINT,
        )


def check_path(relative: str, original: str, what: str) -> None:
    """Refuse a member path that is too deep or too long, or a component longer than a file name may be."""
    parts = relative.split("/")
    if len(parts) > MAX_DEPTH:
        raise UnsafeArchive(f"{what}: refusing entry '{original[:80]}…' nested {len(parts)} levels deep "
                            f"(at most {MAX_DEPTH})")  # fmt: skip
    encoded = relative.encode("utf-8", "surrogateescape")
    if len(encoded) > MAX_PATH:
        raise UnsafeArchive(f"{what}: refusing entry '{original[:80]}…' with a path of {len(encoded)} bytes "
                            f"(at most {MAX_PATH})")  # fmt: skip
    for part in parts:
        if len(part.encode("utf-8", "surrogateescape")) > MAX_NAME:
            raise UnsafeArchive(f"{what}: refusing entry '{original[:80]}…' with a name longer than {MAX_NAME} bytes")
