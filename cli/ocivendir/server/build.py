"""Owns: the build id — 16 hex digits that change whenever the code a server would run changes.

A client and a server of different builds never meet: the id is part of the socket's name. The self-contained build
reads it from `BUILD_ID` next to its executable (written by `scripts/dist.sh`, which compiles the same id into the
native client); an installed or editable package checksums its version, the interpreter and what each site-packages
directory on sys.path holds (its entries, and the mtime of each distribution's metadata: 0.2 ms), and, unless it was
installed there with its metadata, the size and mtime of each of its modules (about 150 stat calls, 0.75 ms more: an
editable install's modules are edited in place, an installed one's are written by the installer, which writes the
distribution's metadata anew each time, upgrade or reinstall). An identity, not a secret (who may use a
server is the socket directory's and SO_PEERCRED's business), so the description read as one big number, modulo the
largest 64-bit prime, does: any change of one stretch of it changes the remainder. Every checksum module is an
extension the Python client would load on every call (`zlib` 0.25 ms, `hashlib` with OpenSSL 4 ms).
"""

from __future__ import annotations

import os
import sys

from ocivendir import __version__

__all__ = ["build_id"]

_LENGTH = 16
_PRIME = (1 << 64) - 59  # the largest prime below 2**64: the remainder is 16 hex digits
_METADATA = (".dist-info", ".egg-info", ".egg-link", ".pth")  # what an install, upgrade or removal always rewrites


def build_id() -> str:
    """This program's build id."""
    if getattr(sys, "frozen", False):
        try:
            with open(os.path.join(os.path.dirname(sys.executable), "BUILD_ID"), encoding="ascii") as file:
                text = file.read().strip()
        except OSError:
            text = ""
        if len(text) == _LENGTH and all(c in "0123456789abcdef" for c in text):
            return text
    parts = [f"{__version__}\0{sys.version}\0{sys.executable}\0"]
    package = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    if os.path.dirname(package) not in _describe_site_packages(parts):
        parts += _describe_tree(package)
    described = "".join(parts).encode(errors="surrogateescape")
    return f"{int.from_bytes(described, 'big') % _PRIME:016x}"


def _describe_site_packages(parts: list[str]) -> set[str]:
    """The dependencies: each site-packages directory's entries, and the mtime of its metadata and `.pth` files.

    It changes whenever a package is installed, upgraded, reinstalled or removed (each install writes a dist-info
    directory of its own), so a server never runs another click or PyYAML than its clients would. Bytecode is not
    named: an interpreter that writes it creates `__pycache__` there on its first import of a top-level module, and
    that changed the directory's own mtime (a server then retired for a build that had not changed).

    Returned: the directories (absolute) that hold this version's own metadata, where ocivendir was installed.
    """
    ours = (f"ocivendir-{__version__}.dist-info", f"ocivendir-{__version__}.egg-info")
    installed = set()
    for directory in sys.path:
        if os.path.basename(directory) not in {"site-packages", "dist-packages"}:
            continue
        try:
            with os.scandir(directory) as entries:
                found = sorted(entries, key=lambda entry: entry.name)
        except OSError:
            continue
        parts.append(f"{directory}\0")
        for entry in found:
            if entry.name == "__pycache__":
                continue
            stamp = 0
            if entry.name.endswith(_METADATA):
                try:
                    stamp = entry.stat(follow_symlinks=False).st_mtime_ns
                except OSError:
                    continue
                if entry.name in ours:
                    installed.add(os.path.abspath(directory))
            parts.append(f"{entry.name}\0{stamp}\0")
    return installed


def _describe_tree(top: str) -> list[str]:
    """Each module under `top` (bytecode directories aside): its path there, size and mtime, sorted by path."""
    found = []
    cut = len(top) + 1
    directories = [top]
    while directories:
        with os.scandir(directories.pop()) as entries:
            for entry in entries:
                if entry.is_dir(follow_symlinks=False):
                    if entry.name != "__pycache__":
                        directories.append(entry.path)
                elif entry.name.endswith(".py"):
                    info = entry.stat(follow_symlinks=False)
                    found.append(f"{entry.path[cut:]}\0{info.st_size}\0{info.st_mtime_ns}\0")
    found.sort()
    return found
