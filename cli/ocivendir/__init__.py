"""Owns: the package version, the vendir and imgpkg versions it claims to be compatible with, the version line."""

from __future__ import annotations

__all__ = ["IMGPKG_COMPAT_VERSION", "VENDIR_COMPAT_VERSION", "__version__", "version_line"]

__version__ = "0.1.0"
# the vendir kapp-controller v0.53.1 ships in its image (its hack/dependencies.yml pins carvel-dev/vendir v0.41.1)
VENDIR_COMPAT_VERSION = "0.41.1"
IMGPKG_COMPAT_VERSION = "0.43.1"


def version_line(prog: str) -> str:
    """`vendir version 0.41.1+ocivendir.<ver>` in vendir mode (imgpkg's likewise), else `ocivendir <ver>`."""
    modes = {"vendir": VENDIR_COMPAT_VERSION, "imgpkg": IMGPKG_COMPAT_VERSION}
    if prog in modes:
        return f"{prog} version {modes[prog]}+ocivendir.{__version__}"
    return f"ocivendir {__version__}"
