"""Owns: giving child processes the environment the user gave us (a PyInstaller runtime hook, run before main).

PyInstaller's onedir bootloader puts its `_internal` directory first on `LD_LIBRARY_PATH` and restarts itself, so the
bundled OpenSSL and zlib are found. Children (the delegated `/vendir-real` and the `git`, `ssh` or credential helpers
it runs) must not load our libraries instead of their own: the variable is set back to what it was. This process
keeps its libraries, as the dynamic loader reads the variable only at start-up.
"""

from __future__ import annotations

import os

_original = os.environ.pop("LD_LIBRARY_PATH_ORIG", None)
if _original is None:
    os.environ.pop("LD_LIBRARY_PATH", None)
else:
    os.environ["LD_LIBRARY_PATH"] = _original
