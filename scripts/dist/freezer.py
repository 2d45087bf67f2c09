"""Owns: the freezer pin (pyproject's `dist` extra) and the check that the installed PyInstaller fits the build.

`freezer.py pin` prints the pinned PyInstaller version, `freezer.py requirements` the extra's requirements, and
`freezer.py check VERSION` exits 0 only when that version is installed and its Linux bootloader needs nothing but
glibc (PyPI's prebuilt one needs the system's libz.so.1).
"""

from __future__ import annotations

import re
import sys
import tomllib
from pathlib import Path

from elfcheck import GLIBC_FAMILY, needed

ROOT = Path(__file__).resolve().parents[2]


def requirements() -> list[str]:
    """The `dist` extra's requirements."""
    extras: list[str] = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]["dist"]
    return extras


def pin() -> str:
    """The version pinned as `pyinstaller==X` in the `dist` extra."""
    for requirement in requirements():
        match = re.fullmatch(r"pyinstaller==([0-9][0-9A-Za-z.]*)", requirement.replace(" ", ""))
        if match:
            return match.group(1)
    raise SystemExit("dist: pyproject's dist extra pins no pyinstaller==X")


def check(version: str) -> int:
    """0 when PyInstaller `version` is installed with a glibc-only bootloader, else 1 with the reason."""
    try:
        import PyInstaller  # noqa: PLC0415 - only present after the dist extra is installed
    except ImportError:
        print("dist: PyInstaller is not installed", file=sys.stderr)
        return 1
    if PyInstaller.__version__ != version:
        print(f"dist: PyInstaller {PyInstaller.__version__} installed, {version} pinned", file=sys.stderr)
        return 1
    from PyInstaller import HOMEPATH, PLATFORM  # noqa: PLC0415

    bootloader = Path(HOMEPATH) / "PyInstaller" / "bootloader" / PLATFORM / "run"
    extra = sorted(set(needed(bootloader)) - GLIBC_FAMILY) if bootloader.is_file() else ["(no bootloader)"]
    if extra:
        print(f"dist: the bootloader {bootloader} needs {' '.join(extra)} from the system", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    command = sys.argv[1] if len(sys.argv) > 1 else ""
    if command == "pin":
        print(pin())
    elif command == "requirements":
        print(" ".join(requirements()))
    elif command == "check" and len(sys.argv) == 3:  # noqa: PLR2004 - check VERSION
        sys.exit(check(sys.argv[2]))
    else:
        raise SystemExit("usage: freezer.py pin | check VERSION")
