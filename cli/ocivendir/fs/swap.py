"""Owns: atomic file writes, staged directory swaps with roll-back, and recovery of killed runs.

A target is built in a sibling `.<name>.ocivendir-stage-<rand>` and swapped in by rename. A kill at any moment
leaves the target as its old tree, its new tree, or its old tree under a `-old-` sibling name that recovery
(`fs/swapping.py`) restores; leftovers of stages and blob directories are removed there too. Paths are
`str` (or any `os.PathLike[str]` given in); every path returned is a `str`.
"""

from __future__ import annotations

import os
import posixpath
import stat
from functools import cache

from ocivendir.fs.paths import split
from ocivendir.fs.remove import remove_file, remove_tree

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = [
    "atomic_write",
    "exchange",
    "fsync_dir",
    "new_sibling",
    "remove_tree",
    "sibling_prefix",
    "swap_in",
    "write_if_changed",
]

STAGE = "stage"
OLD = "old"
BLOBS = "blobs"
JOURNAL_TMP = "swaptmp"  # a swap journal being written (`fs/swapset.py`)
JOURNAL_MARK = ".ocivendir-swap-"  # in the name of a swap journal's copy
_RENAME_EXCHANGE = 2
_AT_FDCWD = -100


def sibling_prefix(target: str | os.PathLike[str], kind: str) -> str:
    """The name prefix of `target`'s sibling of `kind` (stage, old, blobs, swap journal being written)."""
    return f".{split(target)[1]}.ocivendir-{kind}-"


def new_sibling(target: str | os.PathLike[str], kind: str) -> str:
    """A fresh, not yet existing sibling path `.<name>.ocivendir-<kind>-<rand>` of target."""
    parent, name = split(target)
    sibling = f".{name}.ocivendir-{kind}-{os.urandom(6).hex()}"
    return sibling if parent == "." else posixpath.join(parent, sibling)


def fsync_dir(directory: str) -> None:
    """Make the renames and creations in `directory` durable (best effort: one that cannot be opened is let be)."""
    try:
        fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
    except OSError:
        pass


def atomic_write(path: str | os.PathLike[str], data: bytes, *, mode: int | None = None, durable: bool = True) -> None:
    """Replace `path` with `data` by temp sibling + fsync + rename, keeping its mode (or `mode` when new).

    `durable=False` skips both fsyncs, for a file whose loss or tearing in a crash is detected and costs nothing (the
    index's read memo): a rename stays atomic for every running process either way.
    """
    path = os.fspath(path)
    try:
        keep = stat.S_IMODE(os.stat(path).st_mode)
    except FileNotFoundError:
        keep = 0o600 if mode is None else mode
    tmp = new_sibling(path, "tmp")
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            if durable:
                os.fsync(handle.fileno())
        os.chmod(tmp, keep)
        os.replace(tmp, path)
    except OSError as exc:
        remove_file(tmp)
        if exc.filename is None and exc.errno is not None:  # a write or flush through the file object: name the file
            raise OSError(exc.errno, exc.strerror, tmp) from exc
        raise
    except BaseException:
        remove_file(tmp)
        raise
    if durable:
        fsync_dir(split(path)[0])


def write_if_changed(path: str | os.PathLike[str], data: bytes) -> bool:
    """Write only when the bytes differ; regular files atomically, anything else (`/dev/null`, a FIFO) in place.

    A regular file (or none yet) is replaced where its path resolves, so a link to it stays a link; what is not a
    regular file is written through its path as it is, which needs no resolving (kapp-controller's `/dev/null`).
    """
    try:
        info = os.stat(path)
    except FileNotFoundError:
        atomic_write(os.path.realpath(path), data)
        return True
    if not stat.S_ISREG(info.st_mode):
        with open(path, "wb") as handle:
            handle.write(data)
        return True
    path = os.path.realpath(path)
    with open(path, "rb") as handle:
        same = handle.read() == data
    if same:
        return False
    atomic_write(path, data)
    return True


def exchange(a: str, b: str) -> bool:
    """Exchange two paths in one step with renameat2(RENAME_EXCHANGE) where the kernel and libc have it."""
    renameat2 = _renameat2()
    if renameat2 is None:
        return False
    return bool(renameat2(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), _RENAME_EXCHANGE) == 0)


@cache
def _renameat2() -> Callable[..., int] | None:
    """Libc's renameat2 through ctypes, looked up once; None where it cannot be had (no ctypes, an old libc)."""
    try:
        import ctypes  # noqa: PLC0415 - only when a swap replaces a tree

        function: Callable[..., int] = ctypes.CDLL(None, use_errno=True).renameat2
    except (ImportError, AttributeError, OSError):
        return None
    function.restype = ctypes.c_int  # type: ignore[attr-defined]
    function.argtypes = (ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint)  # type: ignore[attr-defined]
    return function


def swap_in(stage: str | os.PathLike[str], target: str | os.PathLike[str], old: str | None = None) -> str | None:
    """Put `stage` in place of `target`; return where the old tree now is (`old`, else a fresh `-old-` sibling).

    On Linux the two trees are exchanged in one step; elsewhere the old tree is renamed aside first and renamed
    back if the second rename fails. The swap is atomic for every process, and not made durable: the tree's files are
    not fsynced (nor are vendir's and imgpkg's), so an fsync of the parent would make lasting only names whose bytes
    a power loss may still take, at the price of a journal commit on every warm call.
    """
    stage, target = os.fspath(stage), os.fspath(target)
    if not os.path.lexists(target):
        os.rename(stage, target)
        return None
    old = old or new_sibling(target, OLD)
    if exchange(stage, target):
        os.rename(stage, old)
    else:
        os.rename(target, old)
        try:
            os.rename(stage, target)
        except BaseException:
            os.rename(old, target)
            raise
    return old
