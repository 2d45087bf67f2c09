"""Owns: the build's system-library contract, checked over every ELF file of a build directory.

Every ELF file may need from the system only glibc-family libraries (libc, libm, libpthread, libdl, librt, libutil,
ld-linux, libgcc_s); any other library it needs must travel in the build (PyInstaller's `_internal`, which its
bootloader puts on the library path, or the file's own directory). No glibc symbol version above `FLOOR` (photon
5.0's glibc 2.36) may be needed. `readelf -d` gives the needed libraries, `objdump -T` the versioned symbols.
"""

from __future__ import annotations

import re
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["FLOOR", "GLIBC_FAMILY", "Report", "check", "elf_files", "glibc_versions", "needed"]

FLOOR = (2, 36)
GLIBC_FAMILY = frozenset({
    "libc.so.6", "libm.so.6", "libpthread.so.0", "libdl.so.2", "librt.so.1", "libutil.so.1", "libgcc_s.so.1",
    "ld-linux-x86-64.so.2", "ld-linux-aarch64.so.1",
})  # fmt: skip
_NEEDED = re.compile(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]")
_GLIBC = re.compile(r"\*UND\*.*\bGLIBC_(\d+)\.(\d+)(?:\.\d+)?\b")


@dataclass
class Report:
    """What the check found: the ELF files, the highest glibc version needed, the system libraries, the problems."""

    elf_files: list[Path] = field(default_factory=list)
    floor: tuple[int, int] = (0, 0)
    system_libraries: set[str] = field(default_factory=set)
    problems: list[str] = field(default_factory=list)


def elf_files(root: Path) -> list[Path]:
    """Regular files under root that start with the ELF magic (symlinks are checked through their targets)."""
    found = []
    for path in sorted(root.rglob("*")):
        if path.is_file() and not path.is_symlink():
            with path.open("rb") as handle:
                if handle.read(4) == b"\x7fELF":
                    found.append(path)
    return found


def _run(*argv: str) -> str:
    return subprocess.run(argv, check=True, capture_output=True, text=True).stdout


def needed(path: Path) -> list[str]:
    """The DT_NEEDED entries of an ELF file (`readelf -d`)."""
    return _NEEDED.findall(_run("readelf", "-d", "-W", str(path)))


def glibc_versions(path: Path) -> set[tuple[int, int]]:
    """The GLIBC_x.y versions of the symbols the file takes from outside (`objdump -T`, undefined symbols)."""
    return {(int(m.group(1)), int(m.group(2))) for m in _GLIBC.finditer(_run("objdump", "-T", "-w", str(path)))}


def check(root: Path) -> Report:
    """Check every ELF file under root against the contract."""
    report = Report(elf_files=elf_files(root))
    internal = root / "_internal"
    bundled = {p.name for p in internal.iterdir()} if internal.is_dir() else set()
    for path in report.elf_files:
        name = path.relative_to(root)
        local = {p.name for p in path.parent.iterdir()}
        for library in needed(path):
            if library in GLIBC_FAMILY:
                report.system_libraries.add(library)
            elif library not in bundled and library not in local:
                report.problems.append(f"{name} needs {library}, which is neither a glibc library nor in the build")
        for version in glibc_versions(path):
            report.floor = max(report.floor, version)
            if version > FLOOR:
                report.problems.append(f"{name} needs GLIBC_{version[0]}.{version[1]}, above the floor "
                                       f"{FLOOR[0]}.{FLOOR[1]} (photon 5.0)")  # fmt: skip
    if not report.elf_files:
        report.problems.append(f"{root} holds no ELF file")
    return report


def main(argv: list[str]) -> int:
    """`elfcheck.py DIR`: exit 1 with the reasons on stderr when the build breaks the contract."""
    root = Path(argv[1])
    report = check(root)
    for problem in report.problems:
        print(f"elfcheck: {problem}", file=sys.stderr)
    print(f"elfcheck: {len(report.elf_files)} ELF files, glibc floor {report.floor[0]}.{report.floor[1]}, "
          f"from the system: {' '.join(sorted(report.system_libraries))}", file=sys.stderr)  # fmt: skip
    return 1 if report.problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
