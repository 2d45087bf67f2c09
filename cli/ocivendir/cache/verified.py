"""Owns: the small blobs a process read from a cache and verified, kept in memory while their file stays the same.

A warm sync reads the same manifest and config blobs every call: open, three fstat, a seek, two reads and a close,
then a sha256 over the bytes, to hand back what it handed back the call before. A process serving calls keeps the
bytes of a blob of at most MAX_BLOB bytes once they verified against its digest, with the identity of the file they
were read from (`fs/fileid.py`: device, inode, size, mtime and ctime, from the descriptor they were read through,
once settled), and the next read of that blob is one `lstat`: the bytes are given again only while the file at the
blob's path is still that file. A blob rewritten, truncated, replaced, removed (a prune) or turned into anything but
a regular file is read and verified from disk again, where what is wrong with it is found as before. ctime cannot be
set by a caller: a file written to and given back its mtime is still another identity. A blob written within the
last two seconds (a cold call's) is not kept yet: a change within one tick of the kernel's clock could keep its
identity.

Keyed by the blob's path (the cache's root and the digest): only a read of the same cache's blob is answered, and the
callers check possession and grants before they read (`engine/content.py`), as before. Memory holds what a file
another process can change does not: bytes that verified.
"""

from __future__ import annotations

from collections import OrderedDict

from ocivendir.fs.fileid import Identity, current, identity, settled
from ocivendir.kept import recall, remember

TYPE_CHECKING = False
if TYPE_CHECKING:
    import os

__all__ = ["MAX_BLOB", "forget_all", "keep", "kept"]

MAX_BLOB = 64 << 10  # a manifest or an image config: larger blobs are always read from disk
_KEPT = 64  # blobs kept, the least recently used dropped first: at most 4 MiB in all
_blobs: OrderedDict[str, tuple[Identity, bytes]] = OrderedDict()  # per-process: keyed by the blob file's path


def kept(path: str) -> bytes | None:
    """The verified bytes kept for the blob at `path`, if the regular file there is still the one read."""
    found = recall(_blobs, path)
    return found[1] if found is not None and current(path) == found[0] else None


def keep(path: str, read_from: os.stat_result, data: bytes) -> None:
    """Keep `data`, which verified, read from the file `read_from` describes (fstat of the descriptor read)."""
    if len(data) <= MAX_BLOB and settled(read_from):
        remember(_blobs, path, (identity(read_from), data), _KEPT)


def forget_all() -> None:
    """Keep nothing (a test's fresh process)."""
    _blobs.clear()
