"""Owns: what the resident server imports before its first fork — the modules warm calls use — and nothing more.

Every fork copies the parent's page tables and every page a worker touches is copied on write, so the parent's size
is paid on every call: measured on a warm digest-pinned kapp-controller sync, a parent holding the whole package and
every lazy import (33 MiB, 393 modules) cost each worker 11 ms of CPU, one holding what warm calls use (13-22 MiB)
7.8-9.5 ms. So the server loads what the warm paths of `vendir sync`, `ocivendir sync|pull|verify-relocation`, `imgpkg
pull` and `version` need — the click tree, the fast paths, the engines, the registry client with requests and TLS
for a tag's HEAD —
and leaves the rest (rich's live view on a terminal, SQLite when the read memo misses, the cold fetch's extras) to the
worker that needs it. Workers are reused now, and a module a call imports beyond this set retires its worker
(`server/leaks.py`), so what a cold sync or pull needs is here too. `tests/integration/test_server.py` runs
representative warm calls after `preload()` and fails when one of them still has to import a module.
"""

from __future__ import annotations

import gc
import importlib

__all__ = ["WARM", "preload"]

WARM = (
    "ocivendir.commands.root", "click._textwrap",  # click and every command; --help's wrapping
    "ocivendir.commands.vendirargs", "ocivendir.commands.syncrun", "ocivendir.commands.pullargs",
    "ocivendir.commands.pullrun", "ocivendir.commands.runtime",
    "ocivendir.engine.sync", "ocivendir.engine.pull", "ocivendir.engine.verify", "ocivendir.engine.sources",
    "ocivendir.engine.image", "ocivendir.engine.relocate", "ocivendir.engine.placement", "ocivendir.engine.access",
    "ocivendir.cache.memo", "ocivendir.cache.store", "ocivendir.cache.grants",
    "ocivendir.cache.partials", "ocivendir.cache.prune", "ocivendir.engine.stream",  # a cold fetch's
    "ocivendir.serial",  # a large blob's hashing thread and a large file's direct writer
    "ocivendir.registry.client", "ocivendir.registry.transport", "ocivendir.registry.connections",
    "ocivendir.registry.pools", "ocivendir.registry.challenge", "ocivendir.registry.auth",  # pools: requests, urllib3
    "ocivendir.registry.tlscontexts",  # any https registry: its context, and truststore's Go system roots
    "ocivendir.goyaml.emit", "ocivendir.goyaml.load", "ocivendir.vendir.config",
    "ocivendir.vendir.lockfile", "ocivendir.oci.imageslock", "ocivendir.oci.relocation", "ocivendir.oci.manifest",
    "ocivendir.fs.extract", "ocivendir.fs.swap", "ocivendir.fs.swapping",
    "ocivendir.fs.locks", "ocivendir.fs.tarread", "ocivendir.fs.gunzip",
    "ocivendir.fs.swapset",  # a sync of several directories
    "ocivendir.output", "ocivendir.reports", "ocivendir.results", "ocivendir.server.worker",
    "ssl", "yaml", "json", "zlib", "traceback", "difflib", "locale", "sqlite3",  # sqlite3: a tag records its answer
    "ctypes",  # renameat2, when a sync replaces a tree it laid down before
)  # fmt: skip


def preload() -> list[str]:
    """Import the warm set; freeze the heap so collections in workers never touch it. Returns what failed to import."""
    missing = []
    for name in WARM:
        try:
            importlib.import_module(name)
        except ImportError:
            missing.append(name)
    gc.collect()
    gc.freeze()
    return missing
