"""Owns: safe application of image layers to a staging directory, with imgpkg's file modes and OCI whiteouts.

Every member is classified before anything is written. An absolute path, a `..` escape (with `\\` read as `/`), or a
link whose target is absolute or leaves the tree makes the layer unsafe; links inside the tree and devices are
skipped and counted, as imgpkg does. Our own containment checks are the gate; `tarfile.data_filter` is an extra
check where the interpreter has it (3.11.4+), never the source of modes.
"""

from __future__ import annotations

import os
import posixpath
import tarfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from ocivendir.errors import UnsafeArchive
from ocivendir.fs.swap import remove_tree

__all__ = ["ExtractStats", "apply_layer", "file_mode"]

_WHITEOUT = ".wh."
_OPAQUE = ".wh..wh..opq"
_CHUNK = 1 << 20


@dataclass
class ExtractStats:
    """Counts for one extraction; `layer_paths` is reset per layer for OCI opaque whiteouts."""

    files: int = 0
    directories: int = 0
    skipped: int = 0
    layer_paths: set[str] = field(default_factory=set)


def file_mode(tar_mode: int, umask: int) -> int:
    """Imgpkg's rule: user bits copied to group and other unless any group/other bit is set; minus the umask.

    setuid, setgid and sticky bits are always dropped.
    """
    mode = tar_mode & 0o777
    if not mode & 0o077:
        user = mode & 0o700
        mode = user | user >> 3 | user >> 6
    return mode & ~umask


def _normalise(name: str, what: str) -> str:
    """The member path relative to the root, or UnsafeArchive if it is absolute or escapes."""
    cleaned = name.replace("\\", "/")
    if cleaned.startswith("/"):
        raise UnsafeArchive(f"{what}: refusing entry with absolute path '{name}'")
    normal = posixpath.normpath(cleaned)
    if normal == ".." or normal.startswith("../"):
        raise UnsafeArchive(f"{what}: refusing entry '{name}' that leaves the output directory")
    return "" if normal == "." else normal


def _check_link(member: tarfile.TarInfo, path: str, what: str) -> None:
    target = member.linkname.replace("\\", "/")
    if target.startswith("/"):
        raise UnsafeArchive(f"{what}: refusing link '{member.name}' to absolute path '{member.linkname}'")
    base = posixpath.dirname(path) if member.issym() else ""
    resolved = posixpath.normpath(posixpath.join(base, target))
    if resolved == ".." or resolved.startswith("../"):
        raise UnsafeArchive(f"{what}: refusing link '{member.name}' to '{member.linkname}' outside the output")


class _Layer:
    """One layer being applied to a stage."""

    def __init__(self, stage: Path, umask: int, stats: ExtractStats, what: str) -> None:
        self.stage = stage
        self.root = Path(os.path.realpath(stage))
        self.dir_mode = 0o777 & ~umask
        self.umask = umask
        self.stats = stats
        self.what = what

    def _contained(self, relative: str) -> Path:
        target = self.stage / relative
        parent = Path(os.path.realpath(target.parent))
        if not parent.is_relative_to(self.root):
            raise UnsafeArchive(f"{self.what}: refusing entry '{relative}' under a link that leaves the output")
        return target

    def _make_parents(self, relative: str) -> None:
        current = self.stage
        for part in Path(relative).parts[:-1]:
            current = current / part
            if current.is_symlink() or (current.exists() and not current.is_dir()):
                remove_tree(current)
            if not current.exists():
                current.mkdir(mode=self.dir_mode)
                current.chmod(self.dir_mode)
                self.stats.directories += 1

    def whiteout(self, relative: str) -> None:
        directory, name = posixpath.split(relative)
        if name == _OPAQUE:
            base = self._contained(posixpath.join(directory, "x")).parent
            if base.is_dir():
                for child in base.iterdir():
                    if posixpath.join(directory, child.name).lstrip("/") not in self.stats.layer_paths:
                        remove_tree(child)
            return
        victim = self._contained(posixpath.join(directory, name[len(_WHITEOUT) :]))
        remove_tree(victim)

    def directory(self, relative: str) -> None:
        target = self._contained(relative)
        self._make_parents(relative)
        if target.is_symlink() or (target.exists() and not target.is_dir()):
            remove_tree(target)
        if not target.exists():
            target.mkdir(mode=self.dir_mode)
            target.chmod(self.dir_mode)
            self.stats.directories += 1

    def regular(self, relative: str, member: tarfile.TarInfo, data: IO[bytes]) -> None:
        target = self._contained(relative)
        self._make_parents(relative)
        if target.is_dir() and not target.is_symlink():
            remove_tree(target)
        target.unlink(missing_ok=True)
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
        fd = os.open(target, flags, 0o600)
        with os.fdopen(fd, "wb") as out:
            while chunk := data.read(_CHUNK):
                out.write(chunk)
        target.chmod(file_mode(member.mode, self.umask))
        os.utime(target, (member.mtime, member.mtime), follow_symlinks=False)
        self.stats.files += 1


def _extra_filter_check(member: tarfile.TarInfo, stage: Path, what: str) -> None:
    data_filter = getattr(tarfile, "data_filter", None)
    if data_filter is None:
        return  # Python < 3.11.4 (Debian 12's 3.11.2): our own checks above are the gate
    try:
        data_filter(member, str(stage))
    except tarfile.FilterError as exc:
        raise UnsafeArchive(f"{what}: refusing entry '{member.name}': {exc}") from None


def apply_layer(stream: IO[bytes], stage: Path, *, umask: int, stats: ExtractStats, what: str) -> None:
    """Apply one uncompressed tar stream on top of `stage`, in OCI changeset order."""
    layer = _Layer(stage, umask, stats, what)
    stats.layer_paths = set()
    try:
        archive = tarfile.open(fileobj=stream, mode="r|", bufsize=_CHUNK)  # noqa: SIM115 - closed below; streaming
    except tarfile.TarError as exc:
        raise UnsafeArchive(f"{what}: not a tar archive: {exc}") from None
    try:
        for member in archive:
            _apply_member(layer, archive, member)
    except tarfile.TarError as exc:
        raise UnsafeArchive(f"{what}: corrupt tar archive: {exc}") from None
    finally:
        archive.close()


def _apply_member(layer: _Layer, archive: tarfile.TarFile, member: tarfile.TarInfo) -> None:  # noqa: PLR0911 - one exit per member kind
    relative = _normalise(member.name, layer.what)
    if member.issym() or member.islnk():
        _check_link(member, relative, layer.what)
        layer.stats.skipped += 1
        return
    if member.ischr() or member.isblk() or member.isfifo():
        layer.stats.skipped += 1
        return
    if not relative:
        return  # the root entry '.': the stage root keeps the directory rule
    if posixpath.basename(relative).startswith(_WHITEOUT):
        layer.whiteout(relative)
        return
    layer.stats.layer_paths.add(relative)
    if member.isdir():
        layer.directory(relative)
        return
    if not member.isreg():
        layer.stats.skipped += 1
        return
    _extra_filter_check(member, layer.stage, layer.what)
    data = archive.extractfile(member)
    if data is None:  # pragma: no cover - a regular member always has data
        return
    layer.regular(relative, member, data)
