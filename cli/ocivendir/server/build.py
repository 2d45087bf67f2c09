"""Owns: the build id — 16 hex digits that change whenever the code a server would run changes.

A client and a server of different builds never meet: the id is part of the socket's name. The self-contained build
reads it from `BUILD_ID` next to its executable (written by `scripts/dist.sh`, which compiles the same id into the
native client); an installed or editable package hashes its version, the interpreter and the size and mtime of each of
its modules (about 150 stat calls, a millisecond).
"""

from __future__ import annotations

import hashlib
import os
import sys

from ocivendir import __version__

__all__ = ["build_id"]

_LENGTH = 16


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
    digest = hashlib.sha256(f"{__version__}\0{sys.version}\0{sys.executable}\0".encode())
    package = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    _hash_tree(digest, package, "")
    return digest.hexdigest()[:_LENGTH]


def _hash_tree(digest: hashlib._Hash, top: str, relative: str) -> None:
    with os.scandir(os.path.join(top, relative)) as entries:
        found = sorted(entries, key=lambda entry: entry.name)
    for entry in found:
        name = os.path.join(relative, entry.name)
        if entry.is_dir(follow_symlinks=False):
            if entry.name != "__pycache__":
                _hash_tree(digest, top, name)
        elif entry.name.endswith(".py"):
            info = entry.stat(follow_symlinks=False)
            digest.update(f"{name}\0{info.st_size}\0{info.st_mtime_ns}\0".encode())
