"""Owns: `python -m ocivendir`, which imports nothing from the working directory once it runs.

`-m` puts the working directory first on `sys.path` (unless `-P`, `-I` or `PYTHONSAFEPATH` is given), so a checkout's
`click.py` or `yaml.py` would be imported in place of the real module. The entry drops that one entry before anything
else is imported. CPython's `runpy` imports a few standard modules (`importlib.machinery`, `contextlib`, ...) before
this module runs, which no code of ours can prevent: `python -P -m ocivendir` is the form the README documents.
"""

from __future__ import annotations

import os
import sys

__all__: list[str] = []


def _drop_working_directory() -> None:
    """Remove the entry `-m` put first on `sys.path`: the working directory (as `os.getcwd()` names it)."""
    if sys.flags.safe_path or not sys.path:
        return
    try:
        here = os.getcwd()  # noqa: PTH109 - pathlib would cost every run its import, for one string
    except OSError:  # a working directory that was removed: `-m` put nothing usable there either
        here = ""
    if sys.path[0] in {"", here}:
        del sys.path[0]


if __name__ == "__main__":
    _drop_working_directory()
    from ocivendir.commands import run  # only once the working directory is off sys.path

    run()
