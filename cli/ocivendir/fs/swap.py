"""Owns: atomic file writes, staged directory swaps with roll-back, and recovery of killed runs.

A target is built in a sibling `.<name>.ocivendir-stage-<rand>` and swapped in by rename. A kill at any moment
leaves the target as its old tree, its new tree, or its old tree under a `-old-` sibling name that `recover`
restores; leftovers of stages and blob directories are removed by `recover` too.
"""

from __future__ import annotations

import contextlib
import os
import stat
from pathlib import Path

from ocivendir.fs.remove import remove_tree

__all__ = [
    "atomic_write",
    "new_sibling",
    "recover",
    "remove_tree",
    "swap_in",
    "unswap",
    "write_if_changed",
]

STAGE = "stage"
OLD = "old"
BLOBS = "blobs"
_RENAME_EXCHANGE = 2
_AT_FDCWD = -100


def _sibling_prefix(target: Path, kind: str) -> str:
    return f".{target.name}.ocivendir-{kind}-"


def new_sibling(target: Path, kind: str) -> Path:
    """A fresh, not yet existing sibling path `.<name>.ocivendir-<kind>-<rand>` of target."""
    return target.parent / f"{_sibling_prefix(target, kind)}{os.urandom(6).hex()}"


def _fsync_dir(directory: Path) -> None:
    with contextlib.suppress(OSError):
        fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def atomic_write(path: Path, data: bytes, *, mode: int | None = None) -> None:
    """Replace `path` with `data` by temp sibling + fsync + rename, keeping its mode (or `mode` when new)."""
    try:
        keep = stat.S_IMODE(path.stat().st_mode)
    except FileNotFoundError:
        keep = 0o600 if mode is None else mode
    tmp = path.parent / f".{path.name}.ocivendir-tmp-{os.urandom(6).hex()}"
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        tmp.chmod(keep)
        tmp.replace(path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    _fsync_dir(path.parent)


def write_if_changed(path: Path, data: bytes) -> bool:
    """Write only when the bytes differ; regular files atomically, anything else (`/dev/null`, a FIFO) in place."""
    path = Path(os.path.realpath(path))
    try:
        info = path.stat()
    except FileNotFoundError:
        atomic_write(path, data)
        return True
    if stat.S_ISREG(info.st_mode):
        if path.read_bytes() == data:
            return False
        atomic_write(path, data)
        return True
    with path.open("wb") as handle:
        handle.write(data)
    return True


def _exchange(a: Path, b: Path) -> bool:
    """Swap two paths in one step with renameat2(RENAME_EXCHANGE) where the kernel and libc have it."""
    import ctypes  # noqa: PLC0415 - only when a swap replaces a tree

    try:
        libc = ctypes.CDLL(None, use_errno=True)  # the C library already loaded into this process
        renameat2 = libc.renameat2
    except (OSError, AttributeError):
        return False
    result = renameat2(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), _RENAME_EXCHANGE)
    return bool(result == 0)


def swap_in(stage: Path, target: Path) -> Path | None:
    """Put `stage` in place of `target`; return where the old tree now is (to delete once all swaps succeeded).

    On Linux the two trees are exchanged in one step; elsewhere the old tree is renamed aside first and renamed
    back if the second rename fails.
    """
    if not target.exists() and not target.is_symlink():
        stage.rename(target)
        _fsync_dir(target.parent)
        return None
    old = new_sibling(target, OLD)
    if _exchange(stage, target):
        stage.rename(old)
    else:
        target.rename(old)
        try:
            stage.rename(target)
        except BaseException:
            old.rename(target)
            raise
    _fsync_dir(target.parent)
    return old


def unswap(target: Path, old: Path | None, stage: Path) -> None:
    """Undo a `swap_in`: put the old tree back and the new one back at `stage`."""
    if old is None:
        target.rename(stage)
        return
    if not _exchange(old, target):
        target.rename(stage)
        old.rename(target)
        return
    old.rename(stage)


def recover(target: Path, keep: Path | None = None) -> None:
    """Clean up after a killed run on `target` (call under the target's lock); `keep` is this run's own."""
    parent = target.parent
    if not parent.is_dir():
        return
    for kind in (OLD, STAGE, BLOBS):
        prefix = _sibling_prefix(target, kind)
        for leftover in sorted(parent.glob(f"{glob_escape(prefix)}*")):
            if leftover == keep:
                continue
            if kind == OLD and not target.exists() and not target.is_symlink():
                leftover.rename(target)
            else:
                remove_tree(leftover)


def glob_escape(text: str) -> str:
    """Escape glob metacharacters in a literal name."""
    return "".join(f"[{c}]" if c in "*?[" else c for c in text)
