"""Owns: the package version and the vendir version ocivendir claims to be compatible with."""

from __future__ import annotations

__all__ = ["VENDIR_COMPAT_VERSION", "__version__"]

__version__ = "0.1.0"
VENDIR_COMPAT_VERSION = "0.41.0"
