"""Owns: the package version and the vendir and imgpkg versions ocivendir claims to be compatible with."""

from __future__ import annotations

__all__ = ["IMGPKG_COMPAT_VERSION", "VENDIR_COMPAT_VERSION", "__version__"]

__version__ = "0.1.0"
VENDIR_COMPAT_VERSION = "0.41.0"
IMGPKG_COMPAT_VERSION = "0.43.1"
