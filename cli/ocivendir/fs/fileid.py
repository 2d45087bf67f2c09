"""Owns: a file's identity, for what a process keeps in memory of a file only while the file stays the same.

The identity is (device, inode, size, mtime, ctime). A change to a file's data or metadata sets its ctime, which no
caller can set back; a file replaced by rename has another inode. But the kernel stamps times with a coarse clock (one
scheduler tick before Linux 6.13; two seconds on some filesystems): a change made within the same tick as the one
before can leave every field as it was. So an identity counts only once it is settled — its ctime at least SETTLED
in the past when it was taken, as git treats a "racily clean" index entry: any later change then gets a later ctime.
A file written just now is read from disk again until it has settled.
"""

from __future__ import annotations

import os
import stat
import time

__all__ = ["SETTLED_NS", "Identity", "current", "device_inode", "identity", "settled"]

SETTLED_NS = 2_000_000_000  # the coarsest timestamp granularity of a Linux filesystem (FAT's two seconds)
Identity = tuple[int, int, int, int, int]


def identity(info: os.stat_result) -> Identity:
    """The identity in a stat result."""
    return (info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns)


def device_inode(info: os.stat_result) -> str:
    """An open file's name as a reused worker's leak check compares descriptors: `device:inode` (numbers are reused)."""
    return f"{info.st_dev}:{info.st_ino}"


def settled(info: os.stat_result) -> bool:
    """Whether a file so described may be kept by its identity: its last change is SETTLED_NS in the past."""
    return time.time_ns() - info.st_ctime_ns >= SETTLED_NS


def current(path: str, *, settled_only: bool = False) -> Identity | None:
    """The identity of the regular file at `path` now (a link there is not followed), or None.

    With `settled_only`, None too while the file has not settled: what is about to be kept by it.
    """
    try:
        info = os.lstat(path)
    except OSError:
        return None
    if not stat.S_ISREG(info.st_mode) or (settled_only and not settled(info)):
        return None
    return identity(info)
