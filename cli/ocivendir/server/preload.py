"""Owns: what the resident server imports before its first fork, so a worker starts with nothing left to import.

Every module of the package, and what they load lazily.

`tests/unit/test_server_preload.py` runs representative calls after `preload()` and fails when one of them still
has to import a module: add it to `_LAZY` then.
"""

from __future__ import annotations

import gc
import importlib
import pkgutil

import ocivendir

__all__ = ["preload"]

# What the package's modules import inside functions (the in-process warm path avoided them at start-up).
_LAZY = (
    "base64", "binascii", "bz2", "codecs", "ctypes",
    "concurrent.futures", "contextlib", "copy", "datetime", "email.utils",
    "errno", "fnmatch", "getpass", "glob", "gzip", "hashlib", "hmac", "http.client", "ipaddress", "json", "locale",
    "logging", "lzma", "math", "pathlib", "platform", "queue", "random", "re", "secrets", "shlex", "shutil", "sqlite3",
    "ssl", "stat", "string", "struct", "subprocess", "tarfile", "tempfile", "textwrap", "threading", "traceback",
    "unicodedata", "urllib.parse", "uuid", "yaml", "zlib",
    "click", "platformdirs", "rich.console", "rich.live", "rich.progress", "rich.table", "rich.text",
)  # fmt: skip
_SKIP = ("ocivendir.__main__", "ocivendir.commands._docgen")


def preload() -> list[str]:
    """Import the package and its lazy imports; freeze the heap so workers share it copy-on-write. Returns misses."""
    missing = []
    for info in pkgutil.walk_packages(ocivendir.__path__, "ocivendir."):
        if info.name not in _SKIP:
            importlib.import_module(info.name)
    for name in _LAZY:
        try:
            importlib.import_module(name)
        except ImportError:
            missing.append(name)
    from ocivendir.hashing import sha256_hex  # noqa: PLC0415

    sha256_hex(b"")  # resolves which sha256 the run starts with (it loads CPython's built-in one)
    gc.collect()
    gc.freeze()
    return missing
