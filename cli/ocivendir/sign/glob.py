"""Owns: policy-controller's image globs (`spec.images[].glob`), exactly as its pkg/apis/glob decides them.

`*` matches any run of characters but `/`, `**` any run at all; `.` is literal; the glob must match the whole
reference. The reference is first written as go-containerregistry's `Name()` (Docker Hub's `index.docker.io/library/`
spelled out, `:latest` added to a bare repository); if that fails to match, the reference as given is tried (their
deprecated fallback). A lone `*` means `index.docker.io/library/*` and `*/*` means `index.docker.io/*/*`.
"""

from __future__ import annotations

import re

from ocivendir.errors import BadReference
from ocivendir.oci.reference import parse_reference

__all__ = ["compile_glob", "glob_matches"]

_VALID = re.compile(r"[a-zA-Z0-9_:/*.@-]+")
_ALIASES = {"*/*": "index.docker.io/*/*", "*": "index.docker.io/library/*"}


def compile_glob(glob: str) -> re.Pattern[str]:
    """The glob as a regular expression, or ValueError naming it when it holds characters a glob may not."""
    glob = _ALIASES.get(glob, glob)
    if not _VALID.fullmatch(glob):
        raise ValueError(f"invalid glob {glob!r}")
    pattern = glob.replace(".", r"\.").replace("**", "#").replace("*", "[^/]*").replace("#", ".*")
    return re.compile(pattern)


def glob_matches(pattern: re.Pattern[str], image: str) -> bool:
    """Whether a compiled glob matches an image reference (an invalid reference matches nothing)."""
    try:
        name = str(parse_reference(image))
    except BadReference:
        return False
    return bool(pattern.fullmatch(name)) or (name != image and bool(pattern.fullmatch(image)))
