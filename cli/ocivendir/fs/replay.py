"""Owns: small layers a process that serves calls keeps in memory as read — their members and data — and replays.

A warm sync lays the same cached layer into a fresh directory every call: open the blob, hash it, inflate it, parse
every tar header, then write the files. A process serving calls keeps what the tar reader gave for a small layer
(every member's header fields and the data of the members whose data was read) once the whole blob was verified, and
the next call's extraction reads the same members from memory: `fs/extract.py` applies them exactly as it applies a
stream's (paths, limits, whiteouts, modes and mtimes are all decided there, every time), so the tree is the same.
Only the bytes are not read, hashed and inflated again — they were verified in this process, and memory is not a
file another process can change. The blob must still be in the cache and held by the repository (the caller checks
that first, as before), and its file the one that was verified: same device, inode, size, mtime and ctime, once
settled (`fs/fileid.py`; a blob truncated, rewritten or replaced is read from disk again, where its damage is found as
before, and one written within the last two seconds is not kept yet).

Kept only for layers whose members and data come to at most MAX_LAYER bytes, at most MAX_TOTAL bytes in all, the least
recently used dropped first; keyed by the layer's digest (content-addressed: the bytes are all the members depend on).
A member costs MEMBER_COST bytes besides its name, link name and data: a small blob can inflate to a million empty
members, and what they take in memory must count against the bounds as data does.
"""

from __future__ import annotations

import io
from collections import OrderedDict
from threading import Lock

from ocivendir.fs.fileid import Identity, current
from ocivendir.fs.tarread import Member, TarReader

TYPE_CHECKING = False
if TYPE_CHECKING:
    from ocivendir.fs.tarread import Readable

__all__ = ["MAX_LAYER", "MAX_TOTAL", "Recording", "Replay", "forget_all", "recall", "remember"]

MAX_LAYER = 1 << 20
MAX_TOTAL = 16 << 20
MEMBER_COST = 512  # a member's objects in memory, about a tar header block's size
_LOCK = Lock()  # per-process: guards _layers
_Kept = tuple[tuple[Member, bytes], ...]
# the blob file's identity when it verified, what its tar stream gave, and what that costs
_layers: OrderedDict[str, tuple[Identity, _Kept, int]] = OrderedDict()  # per-process: keyed by the layer's digest
_total = 0  # per-process: the cost of everything in _layers
_FIELDS = ("name", "linkname", "type", "mode", "size", "mtime", "sparse", "header_bytes")


def _cost(member: Member) -> int:
    """What keeping a member costs besides its data: MEMBER_COST and its names."""
    return MEMBER_COST + len(member.name) + len(member.linkname)


def _copy(member: Member) -> Member:
    """A member of its own, field for field (extraction must not share one between calls)."""
    fresh = Member(member.name, member.linkname, member.type, member.mode, member.size, member.mtime)
    fresh.sparse, fresh.header_bytes = member.sparse, member.header_bytes
    return fresh


class Recording(TarReader):
    """A tar reader that keeps every member it returns and the data read of it (until MAX_LAYER is passed)."""

    def __init__(self, stream: Readable) -> None:
        """Read `stream` as TarReader does."""
        super().__init__(stream)
        self._kept: list[tuple[Member, list[bytes]]] | None = []
        self._bytes = 0

    def next(self) -> Member | None:
        """The next member, kept."""
        member = super().next()
        if member is not None and self._kept is not None:
            self._bytes += _cost(member)
            if self._bytes > MAX_LAYER:
                self._kept = None  # too many members to keep
            else:
                self._kept.append((_copy(member), []))
        return member

    def view(self, size: int = 1 << 20) -> memoryview:
        """The current member's next data, kept."""
        chunk = super().view(size)
        if self._kept is not None and chunk:
            self._bytes += len(chunk)
            if self._bytes > MAX_LAYER:
                self._kept = None  # too large to keep
            else:
                self._kept[-1][1].append(bytes(chunk))
        return chunk

    def kept(self) -> _Kept | None:
        """What was read, once the archive was read to its end (None when it was not, or was too large)."""
        if self._kept is None or not self._ended:
            return None
        return tuple((member, b"".join(parts)) for member, parts in self._kept)


class Replay(TarReader):
    """The members and data a `Recording` kept, given again as the tar reader gave them (each member a copy)."""

    def __init__(self, kept: _Kept) -> None:
        """Replay `kept`."""
        super().__init__(io.BytesIO(b""))
        self._pending = iter(kept)
        self._data = memoryview(b"")

    def next(self) -> Member | None:
        """The next member (a copy), or None at the end."""
        found = next(self._pending, None)
        if found is None:
            return None
        self.members += 1
        self._data = memoryview(found[1])
        return _copy(found[0])

    def view(self, size: int = 1 << 20) -> memoryview:
        """The current member's next data."""
        chunk, self._data = self._data[:size], self._data[size:]
        return chunk


def recall(key: str, blob: str) -> Replay | None:
    """A replay of the layer kept under `key`, if its blob file at `blob` is still the one that was verified."""
    with _LOCK:
        found = _layers.pop(key, None)
        if found is None or current(blob) != found[0]:
            _total_less(found)
            return None
        _layers[key] = found
    return Replay(found[1])


def remember(key: str, blob: str, kept: _Kept | None) -> None:
    """Keep what a verified read of the blob at `blob` gave under `key` (nothing when None)."""
    global _total  # noqa: PLW0603 - the memo's running cost, under _LOCK
    found = current(blob, settled_only=True)
    if kept is None or found is None:
        return
    cost = sum(_cost(member) + len(data) for member, data in kept)
    with _LOCK:
        _total_less(_layers.pop(key, None))
        _layers[key] = (found, kept, cost)
        _total += cost
        while _total > MAX_TOTAL:
            _total_less(_layers.popitem(last=False)[1])


def _total_less(dropped: tuple[Identity, _Kept, int] | None) -> None:
    """Take a dropped layer's cost off the running total (under _LOCK)."""
    global _total  # noqa: PLW0603 - the memo's running cost, under _LOCK
    if dropped is not None:
        _total -= dropped[2]


def forget_all() -> None:
    """Keep nothing (a process starting afresh)."""
    global _total  # noqa: PLW0603 - the memo's running cost, under _LOCK
    with _LOCK:
        _layers.clear()
        _total = 0
