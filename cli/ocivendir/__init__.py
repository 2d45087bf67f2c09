"""Owns: the package version and the vendir and imgpkg versions ocivendir claims to be compatible with."""

from __future__ import annotations

__all__ = ["IMGPKG_COMPAT_VERSION", "VENDIR_COMPAT_VERSION", "__version__"]

__version__ = "0.1.0"
# the vendir kapp-controller v0.53.1 ships in its image (its hack/dependencies.yml pins carvel-dev/vendir v0.41.1)
VENDIR_COMPAT_VERSION = "0.41.1"
IMGPKG_COMPAT_VERSION = "0.43.1"
