"""Owns: removing a file or directory tree of any depth, without recursion and without following links.

`remove_file` is the one-file case: a file (or link) that may already be gone.

The walk holds one directory descriptor at a time (descending with `openat(name)`, climbing with `openat("..")`), so
neither Python's recursion limit, the open-file limit nor PATH_MAX bounds the depth it can remove: a stage left by a
layer nested thousands of levels deep is removed like any other. Directories without owner permissions are made
owner-writable first; a symlink is removed as a link, never followed.

Each climb is checked: the `..` reached must be the directory the walk came down through (its device and inode,
kept for every level). A directory of the tree that someone moved elsewhere while it was being emptied has another
parent now; climbing into that one would empty directories outside the tree that happen to share a name with the
tree's. The walk stops there instead, with an error, and removes nothing outside what it descended into.
"""

from __future__ import annotations

import errno
import os
import stat

from ocivendir.fs.paths import split

__all__ = ["remove_file", "remove_tree"]

_OWNER = 0o700
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def remove_file(path: str | os.PathLike[str]) -> None:
    """Unlink a file or link if it is there (`Path.unlink(missing_ok=True)`); any other failure is raised."""
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass


def remove_tree(path: str | os.PathLike[str]) -> None:
    """Remove `path` if it exists: a file or link by unlinking it, a directory with everything below it."""
    path = os.fspath(path)
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return
    if not stat.S_ISDIR(info.st_mode):
        remove_file(path)
        return
    above, name = split(path)
    parent = os.open(above, _DIR_FLAGS & ~os.O_NOFOLLOW)
    try:
        _remove_directory(parent, name)
    finally:
        os.close(parent)


def _open_dir(parent: int, name: str) -> int:
    try:
        return os.open(name, _DIR_FLAGS, dir_fd=parent)
    except PermissionError:
        os.chmod(name, _OWNER, dir_fd=parent)  # a directory we own but cannot read or search
        return os.open(name, _DIR_FLAGS, dir_fd=parent)


def _identity(directory: int) -> tuple[int, int]:
    info = os.fstat(directory)
    return info.st_dev, info.st_ino


def _empty_files(directory: int) -> list[str]:
    """Unlink every non-directory in `directory`; return the names of its subdirectories."""
    if stat.S_IMODE(os.fstat(directory).st_mode) & _OWNER != _OWNER:
        os.fchmod(directory, _OWNER)
    subdirectories = []
    with os.scandir(directory) as entries:
        for entry in entries:
            if entry.is_dir(follow_symlinks=False):
                subdirectories.append(entry.name)
                continue
            try:
                os.unlink(entry.name, dir_fd=directory)
            except FileNotFoundError:
                continue
    return subdirectories


def _remove_directory(parent: int, name: str) -> None:
    """Depth-first, one descriptor open at a time; each directory is listed once."""
    current = _open_dir(parent, name)
    came_through = [_identity(current)]  # each directory of the walk's path, from `name` down
    pending = [_empty_files(current)]
    path: list[str] = []
    try:
        while pending:
            if pending[-1]:
                child = pending[-1].pop()
                opened = _open_dir(current, child)
                os.close(current)
                current = opened
                came_through.append(_identity(current))
                path.append(child)
                pending.append(_empty_files(current))
                continue
            pending.pop()
            if not path:
                break
            above = os.open("..", _DIR_FLAGS & ~os.O_NOFOLLOW, dir_fd=current)
            os.close(current)
            current = above
            came_through.pop()
            if _identity(current) != came_through[-1]:
                moved = os.path.join(name, *path)
                raise OSError(errno.EXDEV, f"{moved} was moved out of the tree being removed: removal stopped")
            os.rmdir(path.pop(), dir_fd=current)
    finally:
        os.close(current)
    os.rmdir(name, dir_fd=parent)
