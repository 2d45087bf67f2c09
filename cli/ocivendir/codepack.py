"""Owns: the code pack — the package's modules compiled into one file that start-up reads once.

Importing a module from its own `.pyc` costs the path finder's search, seven system calls (stat, open, fstat, ioctl,
lseek, read, close) and importlib's bookkeeping; from the pack it costs a stat of its source and one `pread`. A warm
sync imports about 90 of ours (the pack saves it 7 % of its instructions). `scripts/bootstrap.sh` and `scripts/dist.sh`
write `ocivendir/__pycache__/codepack.<cache tag>.bin` (`build`), and
`ocivendir/__init__.py` puts a finder first on `sys.meta_path` that serves a module from it only when its source file
still has the size and modification time it had when packed (a pack built for the dist build, which ships no sources,
says so and is served as it is). Anything else — a module edited since, one added since, no pack, a pack for another
Python, a damaged pack — goes to the normal import system, as if there were no pack.

File: `OCVP`, importlib's magic number (the bytecode's Python), the header's length (4 bytes, little-endian), the
header (a marshalled dict: module name -> (path relative to the package's parent, mtime_ns, size, is package,
offset, length)), then each module's marshalled code object at its offset after the header.
"""

from __future__ import annotations

import marshal
import os
import sys
from _frozen_importlib import ModuleSpec  # importlib's own, loaded with the interpreter (importlib.machinery is not)
from _frozen_importlib_external import MAGIC_NUMBER
from _imp import _fix_co_filename  # type: ignore[attr-defined]  # typeshed has no stub; importlib calls it too

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence
    from types import CodeType, ModuleType
    from typing import TypeGuard

    _Entry = tuple[str, int, int, bool, int, int]

__all__ = ["UNCHECKED", "build", "install", "pack_path"]

_MAGIC = b"OCVP"
UNCHECKED = -1  # mtime_ns of an entry served without looking at a source (the dist build ships none)


def pack_path(package_dir: str) -> str:
    """Where the pack of the package at `package_dir` lives (the name says which Python's bytecode it holds)."""
    return f"{package_dir}/__pycache__/codepack.{sys.implementation.cache_tag}.bin"


# types.CodeType and types.ModuleType without importing types (the first compile() of a process costs 9M instructions)
_CODE = type(pack_path.__code__)
_MODULE = type(sys)


class PackFinder:
    """A meta path finder and loader serving fresh modules of one package from its pack."""

    def __init__(self, root: str, entries: dict[str, object], fd: int, base: int, body: int) -> None:
        """`root` is the directory holding the package; the code objects are read from `fd`, offsets from `base`.

        The descriptor stays open for the process's life: a module is one `pread`, and a pack rebuilt meanwhile
        (a new file renamed over the old) does not change what this run reads. An entry is checked (its shape, its
        code inside the pack's `body` bytes) when its module is first asked for: a run imports a third of them.
        """
        self._root = root
        self._table = entries
        self._entries: dict[str, _Entry] = {}  # the entries checked so far
        self._fd = fd
        self._base = base
        self._body = body

    def find_spec(
        self,
        name: str,
        path: Sequence[str] | None = None,  # noqa: ARG002 - the finder protocol
        target: ModuleType | None = None,  # noqa: ARG002
    ) -> ModuleSpec | None:
        """The module's spec when the pack holds it and its source is unchanged; None leaves it to the others."""
        entry = self._table.get(name)
        if not _valid(entry, self._body):
            return None
        relative, mtime_ns, size, package, _, _ = entry
        origin = f"{self._root}/{relative}"
        if mtime_ns != UNCHECKED:
            try:
                info = os.stat(origin)
            except OSError:
                return None
            if info.st_mtime_ns != mtime_ns or info.st_size != size:
                return None
        self._entries[name] = entry
        spec = ModuleSpec(name, self, origin=origin, is_package=package)  # type: ignore[arg-type]  # a Loader by protocol
        spec.has_location = True
        directory, _, file = origin.rpartition("/")
        # where importlib would keep the module's .pyc, said without its cache_from_source (the pack serves no -O)
        spec.cached = f"{directory}/__pycache__/{file[:-3]}.{sys.implementation.cache_tag}.pyc"
        if package:
            spec.submodule_search_locations = [directory]
        return spec

    def create_module(self, spec: ModuleSpec) -> ModuleType:
        """A module with its file attributes already set.

        importlib sets each attribute a module lacks after asking for it; each miss raised and formatted an
        AttributeError (three per module, 30 % of what importing an empty module costs).
        """
        module = _MODULE(spec.name)
        module.__file__ = spec.origin
        module.__cached__ = spec.cached  # type: ignore[attr-defined]  # a module attribute typeshed does not declare
        if spec.submodule_search_locations is not None:
            module.__path__ = spec.submodule_search_locations
        return module

    def exec_module(self, module: ModuleType) -> None:
        """Run the module's packed code in it."""
        exec(self.get_code(module.__name__), module.__dict__)  # noqa: S102 - the package's own compiled code

    def get_code(self, name: str) -> CodeType:
        """The module's code object (`runpy`, behind `python -m`, asks for it): packed, or compiled if damaged."""
        relative, mtime_ns, _, _, offset, length = self._entries[name]
        origin = f"{self._root}/{relative}"
        try:
            code = marshal.loads(os.pread(self._fd, length, self._base + offset))
        except (OSError, ValueError, EOFError, TypeError):
            code = None
        if not isinstance(code, _CODE):  # damaged since it was written: compile the (unchanged) source instead
            if mtime_ns == UNCHECKED:
                raise ImportError(f"the code pack's copy of {name} is damaged", name=name)
            with open(origin, "rb") as handle:
                code = compile(handle.read(), origin, "exec", dont_inherit=True)
        _fix_co_filename(code, origin)  # the path of this checkout, not the one the pack was built in
        return code

    def is_package(self, name: str) -> bool:
        """Whether the module is a package."""
        return self._entries[name][3]

    def get_source(self, name: str) -> str | None:
        """The module's source text where it ships (linecache asks when it cannot read the file itself)."""
        try:
            with open(f"{self._root}/{self._entries[name][0]}", "rb") as handle:
                return handle.read().decode()
        except (OSError, UnicodeDecodeError):
            return None


def install(package_dir: str) -> None:
    """Serve the package at `package_dir` from its pack, if it has a usable one for this Python (and not under -O)."""
    if sys.flags.optimize:  # the pack holds code compiled as it is without -O: asserts, docstrings, __debug__
        return
    try:
        fd = os.open(pack_path(package_dir), os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return
    header = _header(fd)
    if header is None:
        os.close(fd)
        return
    entries, base, body = header
    sys.meta_path.insert(0, PackFinder(package_dir.rpartition("/")[0], entries, fd, base, body))


def _header(fd: int) -> tuple[dict[str, object], int, int] | None:
    """The pack's table of modules, where the code begins and its size; None when it is not a pack of this Python's."""
    try:
        head, size = os.pread(fd, 12, 0), os.fstat(fd).st_size
        base = 12 + int.from_bytes(head[8:12], "little")
        if (
            head[:8] != _MAGIC + MAGIC_NUMBER or base > size
        ):  # pread allocates what it is asked for: never past the file
            return None
        entries = marshal.loads(os.pread(fd, base - 12, 12))
        body = size - base
    except (OSError, ValueError, EOFError, TypeError):
        return None
    if not isinstance(entries, dict):
        return None
    return entries, base, body


def _valid(entry: object, body: int) -> TypeGuard[_Entry]:
    """An entry of the right shape whose code lies inside the pack."""
    if not (isinstance(entry, tuple) and len(entry) == 6):  # noqa: PLR2004 - the entry's fields
        return False
    relative, mtime_ns, size, package, offset, length = entry
    fields = (isinstance(relative, str), isinstance(package, bool), *(isinstance(n, int) for n in (mtime_ns, size)))
    return (
        all(fields) and isinstance(offset, int) and isinstance(length, int) and 0 <= offset <= offset + length <= body
    )


def build(package_dir: str, *, unchecked: bool = False, target: str | None = None) -> str:
    """Compile every module of the package at `package_dir` into its pack (or `target`); return the pack's path.

    `unchecked`: entries are served without looking at their sources (for a build that ships none).
    """
    root = package_dir.rpartition("/")[0]
    entries: dict[str, _Entry] = {}
    blobs: list[bytes] = []
    offset = 0
    for directory, subdirs, files in os.walk(package_dir):  # top-down: the pruning below applies to the walk
        subdirs[:] = sorted(d for d in subdirs if d != "__pycache__")  # and a sorted walk writes the same file
        for file in sorted(f for f in files if f.endswith(".py")):
            path = f"{directory}/{file}"
            relative = path[len(root) + 1 :]
            package = file == "__init__.py"
            name = relative.rpartition("/")[0] if package else relative[:-3]
            with open(path, "rb") as handle:
                source = handle.read()
            info = os.stat(path)
            blob = marshal.dumps(compile(source, path, "exec", dont_inherit=True))
            mtime_ns, size = (UNCHECKED, UNCHECKED) if unchecked else (info.st_mtime_ns, info.st_size)
            entries[name.replace("/", ".")] = (relative, mtime_ns, size, package, offset, len(blob))
            blobs.append(blob)
            offset += len(blob)
    header = marshal.dumps(entries)
    target = target or pack_path(package_dir)
    os.makedirs(target.rpartition("/")[0], exist_ok=True)
    tmp = f"{target}.{os.getpid()}.tmp"
    with open(tmp, "wb") as handle:
        handle.write(_MAGIC + MAGIC_NUMBER + len(header).to_bytes(4, "little") + header + b"".join(blobs))
    os.replace(tmp, target)
    return target
