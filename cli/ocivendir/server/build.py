"""Owns: the build id — 16 hex digits that change whenever the code a server would run changes.

A client and a server of different builds never meet: the id is part of the socket's name. The self-contained build
reads it from `BUILD_ID` next to its executable (written by `scripts/dist.sh`, which compiles the same id into the
native client); an installed or editable package checksums its version, the interpreter, the size and mtime of each
of its modules (about 150 stat calls, a millisecond) and what each site-packages directory on sys.path holds (its
entries, and the mtime of each distribution's metadata: 0.2 ms more). An identity, not a secret (who may use a
server is the socket directory's and SO_PEERCRED's business), so two CRC-32s do, from `zlib`: `hashlib` would load
OpenSSL on every call of the Python client (4 ms, a third of an interpreter's start-up).
"""

from __future__ import annotations

import os
import sys
import zlib

from ocivendir import __version__

__all__ = ["build_id"]

_LENGTH = 16
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
    _describe_tree(parts, os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "")
    _describe_site_packages(parts)
    described = "".join(parts).encode()
    return f"{zlib.crc32(described):08x}{zlib.adler32(described):08x}"


def _describe_site_packages(parts: list[str]) -> None:
    """The dependencies: each site-packages directory's entries, and the mtime of its metadata and `.pth` files.

    It changes whenever a package is installed, upgraded, reinstalled or removed (each install writes a dist-info
    directory of its own), so a server never runs another click or PyYAML than its clients would. Bytecode is not
    named: an interpreter that writes it creates `__pycache__` there on its first import of a top-level module, and
    that changed the directory's own mtime (a server then retired for a build that had not changed).
    """
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
            parts.append(f"{entry.name}\0{stamp}\0")


def _describe_tree(parts: list[str], top: str, relative: str) -> None:
    with os.scandir(os.path.join(top, relative)) as entries:
        found = sorted(entries, key=lambda entry: entry.name)
    for entry in found:
        name = os.path.join(relative, entry.name)
        if entry.is_dir(follow_symlinks=False):
            if entry.name != "__pycache__":
                _describe_tree(parts, top, name)
        elif entry.name.endswith(".py"):
            info = entry.stat(follow_symlinks=False)
            parts.append(f"{name}\0{info.st_size}\0{info.st_mtime_ns}\0")
