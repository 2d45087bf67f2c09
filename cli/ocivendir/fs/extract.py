"""Owns: safe application of image layers to a staging directory: OCI whiteouts, file and directory modes, links.

Every member is classified before anything is written for it. An absolute path, a `..` escape (with `\\` read as `/`), a
whiteout naming `.`, `..` or nothing, a path too deep or too long, a sparse member, or an image expanding past its
limits (fs/limits.py) makes the layer unsafe: the bytes counted are the data of every member, written or skipped, and
the extended headers that came with it. Only regular files and directories are ever created: every symlink and hardlink
(absolute ones included) and every device is skipped and counted, as imgpkg and vendir skip them, so nothing in a stage
is a link and nothing is written through one. Whiteouts hide lower layers' entries only, never an entry of their own
layer (OCI image spec), and every delete stays inside the stage.

Directories follow one of two rules (`TreePolicy.directories`):
- `parents` (imgpkg 0.43.1's `pull`): a directory is made only as the parent of an entry, `0777 &~ umask`; a directory
  entry never makes its own directory.
- `entries` (vendir 0.40.0's `sync`): a directory entry makes its directory, if it does not exist yet, with the file
  mode rule applied to the entry's mode (owner bits always kept, so the tree stays removable); parents made before
  their entry are `0777 &~ umask` and keep that mode.
"""

from __future__ import annotations

import os
import posixpath
import stat
from dataclasses import dataclass, field

from ocivendir.errors import UnsafeArchive
from ocivendir.fs.dropbehind import DropBehind
from ocivendir.fs.limits import DIRECTORY_BYTES, ExtractLimits, Tally, check_path, human
from ocivendir.fs.paths import pure
from ocivendir.fs.remove import remove_tree
from ocivendir.fs.tarread import Member, TarFormatError, TarReader

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Literal

    from ocivendir.fs.tarread import Readable

    DirectoryRule = Literal["parents", "entries"]

__all__ = ["ExtractStats", "TreePolicy", "apply_layer", "file_mode"]

_WHITEOUT = ".wh."
_OPAQUE = ".wh..wh..opq"
_CHUNK = 1 << 20


@dataclass(frozen=True)
class TreePolicy:
    """How layers become a tree: the umask, the directory rule and the expansion limits."""

    umask: int = 0o022
    directories: DirectoryRule = "parents"
    limits: ExtractLimits = field(default_factory=ExtractLimits)


@dataclass
class ExtractStats:
    """Counts for one image's extraction; the `layer_*` sets are reset per layer (whiteouts spare them)."""

    files: int = 0
    directories: int = 0
    skipped: int = 0
    tally: Tally = field(default_factory=lambda: Tally(ExtractLimits()))
    layer_paths: set[str] = field(default_factory=set)
    layer_parents: set[str] = field(default_factory=set)

    def mark(self, relative: str) -> None:
        """An entry of the current layer: its path and every ancestor are spared by this layer's whiteouts."""
        self.layer_paths.add(relative)
        parent = posixpath.dirname(relative)
        while parent and parent not in self.layer_parents:
            self.layer_parents.add(parent)
            parent = posixpath.dirname(parent)


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
    """The member path relative to the root, or UnsafeArchive if it is absolute, escapes, or is too deep or long."""
    cleaned = name.replace("\\", "/")
    if cleaned.startswith("/"):
        raise UnsafeArchive(f"{what}: refusing entry with absolute path '{name}'")
    normal = posixpath.normpath(cleaned)
    if normal == ".." or normal.startswith("../"):
        raise UnsafeArchive(f"{what}: refusing entry '{name}' that leaves the output directory")
    if normal == ".":
        return ""
    check_path(normal, name, what)
    return normal


def _real_directory(path: str) -> bool:
    """A directory, not a link to one (`Path.is_dir() and not Path.is_symlink()`)."""
    return os.path.isdir(path) and not os.path.islink(path)


class _Layer:
    """One layer being applied to a stage. Nothing in a stage is a link, and `_parents` checks every component."""

    def __init__(self, stage: str, policy: TreePolicy, stats: ExtractStats, what: str) -> None:
        self.stage = stage
        self.policy = policy
        self.implicit_mode = 0o777 & ~policy.umask
        self.stats = stats
        self.what = what
        self.known: set[str] = set()  # directories checked or made in this layer, until something is removed

    def _at(self, relative: str) -> str:
        """The path of a normalised member path in the stage (`""` is the stage itself)."""
        return f"{self.stage}/{relative}" if relative else self.stage

    def _remove(self, path: str) -> None:
        if _real_directory(path):
            self.known.clear()  # directories below it were checked; only removing a directory invalidates that
        remove_tree(path)

    def _mkdir(self, path: str, mode: int) -> None:
        """Make a directory, its block on disk counted against the size limit first (a directory already there: not)."""
        self.stats.tally.reserve(f"{path[len(self.stage) + 1 :]}/", DIRECTORY_BYTES, self.what)
        try:
            os.mkdir(path, mode)
        except BaseException:
            self.stats.tally.release(DIRECTORY_BYTES)
            raise
        os.chmod(path, mode)
        self.stats.directories += 1

    def _parents(self, relative: str, *, create: bool) -> bool:
        """Make (or with create=False, only check) every ancestor a real directory; False if one is missing."""
        parent = posixpath.dirname(relative)
        if not parent or parent in self.known:
            return True
        current = ""
        for part in parent.split("/"):
            current = posixpath.join(current, part) if current else part
            if current in self.known:
                continue
            path = self._at(current)
            try:
                info = os.lstat(path)
            except FileNotFoundError:
                info = None
            if info is not None and not stat.S_ISDIR(info.st_mode):
                if not create:
                    return False
                self._remove(path)
                info = None
            if info is None:
                if not create:
                    return False
                if current not in self.stats.layer_paths:  # made for a path, not for an entry (counted already)
                    self.stats.tally.entry(self.what)
                self._mkdir(path, self.implicit_mode)
            self.known.add(current)
        return True

    def _clear_for(self, relative: str, *, keep_directory: bool) -> str:
        """The entry's path with its parents made and whatever a lower layer left there removed (a dir may stay)."""
        self._parents(relative, create=True)
        target = self._at(relative)
        try:
            info = os.lstat(target)
        except FileNotFoundError:
            return target
        if not (keep_directory and stat.S_ISDIR(info.st_mode)):
            self._remove(target)
        return target

    def whiteout(self, relative: str) -> None:
        """`.wh.<name>` hides the lower layers' `<name>`; `.wh..wh..opq` hides every lower entry of its directory."""
        directory, name = posixpath.split(relative)
        if name == _OPAQUE:
            base = self._at(directory)
            if self._parents(posixpath.join(directory, "x"), create=False) and _real_directory(base):
                for child in sorted(os.listdir(base)):
                    self._hide_lower(posixpath.join(directory, child) if directory else child)
            return
        hidden = name[len(_WHITEOUT) :]
        if hidden in {"", ".", ".."}:
            raise UnsafeArchive(f"{self.what}: refusing whiteout '{relative}' that names '{hidden or directory}'")
        victim = posixpath.join(directory, hidden) if directory else hidden
        if self._parents(victim, create=False):
            self._hide_lower(victim)

    def _hide_lower(self, relative: str) -> None:
        """Remove what lower layers put at `relative`, sparing this layer's own entries (iteratively)."""
        pending = [relative]
        while pending:
            current = pending.pop()
            path = self._at(current)
            if current in self.stats.layer_paths or current in self.stats.layer_parents:
                if _real_directory(path):
                    pending.extend(f"{current}/{child}" for child in os.listdir(path))
                continue
            if os.path.lexists(path):
                self._remove(path)

    def skipped(self, relative: str) -> None:
        """A link or device: not created, but it replaces what a lower layer had there, and has parents."""
        self._clear_for(relative, keep_directory=False)
        self.stats.skipped += 1

    def directory(self, relative: str, member: Member) -> None:
        mode = file_mode(member.mode, self.policy.umask) | 0o700
        if self.policy.directories == "entries":
            self._parents(relative, create=True)
            try:  # the common case, nothing there yet: made at once (mkdir never follows a link at its path)
                self._mkdir(self._at(relative), mode)
            except FileExistsError:
                pass
            else:
                self.known.add(relative)
                return
        target = self._clear_for(relative, keep_directory=True)
        if self.policy.directories == "entries" and not os.path.exists(target):
            self._mkdir(target, mode)
        if os.path.exists(target):
            self.known.add(relative)

    def regular(self, relative: str, member: Member, data: TarReader) -> None:
        self._parents(relative, create=True)
        target = self._at(relative)
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
        try:  # the common case, nothing there yet; O_EXCL fails on anything there, a link (even dangling) too
            fd = os.open(target, flags, 0o600)
        except FileExistsError:  # what a lower layer left there goes first
            target = self._clear_for(relative, keep_directory=False)
            fd = os.open(target, flags, 0o600)
        behind = DropBehind(fd, 0, member.size)  # a large file's pages: not read again in this run
        try:  # the descriptor itself, not a file object: that would cost three more system calls a file
            while chunk := data.view(_CHUNK):  # a view of the inflated bytes: copied once, into the file
                behind.write(chunk)
            behind.flush()
            os.fchmod(fd, file_mode(member.mode, self.policy.umask))  # on the descriptor: no path lookup, no link
            os.utime(fd, (member.mtime, member.mtime))
        except OSError as exc:  # a write through the descriptor names no path (a full filesystem): this file's
            if exc.filename is not None or not exc.errno or type(exc).__module__ != "builtins":
                raise
            raise OSError(exc.errno, exc.strerror, target) from None
        finally:
            try:
                behind.close()  # no thread of the file's is left writing
            finally:
                os.close(fd)
        self.stats.files += 1


def apply_layer(
    stream: Readable | TarReader, stage: str | os.PathLike[str], *, policy: TreePolicy, stats: ExtractStats, what: str
) -> None:
    """Apply one uncompressed tar stream (or a tar reader over one) on top of `stage`, in OCI changeset order."""
    layer = _Layer(pure(stage), policy, stats, what)
    stats.layer_paths = set()
    stats.layer_parents = set()
    archive = stream if isinstance(stream, TarReader) else TarReader(stream)
    try:
        for member in archive:
            _apply_member(layer, archive, member)
    except TarFormatError as exc:
        problem = "corrupt tar archive" if archive.members else "not a tar archive"
        raise UnsafeArchive(f"{what}: {problem}: {exc}") from None


def _apply_member(layer: _Layer, archive: TarReader, member: Member) -> None:
    layer.stats.tally.entry(layer.what)
    relative = _normalise(member.name, layer.what)
    if member.sparse:
        raise UnsafeArchive(f"{layer.what}: refusing sparse entry '{member.name}' ({human(member.size)} declared)")
    counted = member.header_bytes + (member.size if member.has_data() else 0)  # decompressed, written or not
    if counted:  # extended headers and data, written or skipped: they count against the limit either way
        layer.stats.tally.reserve(relative or member.name, counted, layer.what)
    if posixpath.basename(relative).startswith(_WHITEOUT):
        layer.whiteout(relative)
        return
    if not relative:
        return  # the root entry '.': the stage root keeps its mode
    layer.stats.mark(relative)
    if member.isdir():
        layer.directory(relative, member)
        return
    if not member.isreg():
        layer.skipped(relative)  # symlinks, hardlinks, devices, fifos, unknown types: never created
        return
    layer.regular(relative, member, archive)
