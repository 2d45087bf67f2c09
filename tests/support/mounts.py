"""Test support: a small tmpfs mounted for one test (a full or read-only filesystem), always unmounted after.

The suite runs as root; where mounting is impossible (not root, no mount(8), a container that forbids it) the test
is skipped.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from contextlib import contextmanager
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

__all__ = ["Mount", "fill", "small_tmpfs", "starve"]


class Mount:
    """A mounted tmpfs: remount it read-only or read-write."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def _mount(self, *args: str) -> None:
        subprocess.run(["mount", *args, str(self.path)], check=True, capture_output=True)  # noqa: S607

    def read_only(self) -> None:
        """Remount read-only, this process's kept index connections closed first.

        Linux refuses to remount a filesystem read-only while a file on it is open for writing, and a reused process
        keeps its index open.
        """
        from ocivendir.cache import opened  # noqa: PLC0415

        opened.close_all()
        self._mount("-o", "remount,ro")

    def writable(self) -> None:
        self._mount("-o", "remount,rw")


@contextmanager
def small_tmpfs(path: Path, size: str = "2m", inodes: int | None = None) -> Iterator[Mount]:
    """A tmpfs of `size` (and `inodes`) at `path` (created), unmounted (lazily, if busy) when the block ends."""
    if os.geteuid() != 0 or shutil.which("mount") is None:
        pytest.skip("mounting a tmpfs needs root and mount(8)")
    path.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size},mode=0755{f',nr_inodes={inodes}' if inodes else ''}", "tmpfs", str(path)],  # noqa: S607
                          capture_output=True, check=False)  # fmt: skip
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.decode(errors='replace').strip()}")
    try:
        yield Mount(path)
    finally:
        subprocess.run(["umount", "-l", str(path)], capture_output=True, check=False)  # noqa: S607


def fill(directory: Path) -> Path:
    """Fill the filesystem holding `directory` to its last byte with one file; returns it (remove it to free space)."""
    ballast = directory / "ballast"
    fd = os.open(ballast, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        for size in (65536, 4096, 512, 1):
            try:
                while True:
                    os.write(fd, b"\0" * size)
            except OSError:
                pass
    finally:
        os.close(fd)
    return ballast


def starve(directory: Path) -> None:
    """Use every free inode of the filesystem holding `directory` (with empty files in it)."""
    count = 0
    try:
        while True:
            (directory / f"inode-{count}").touch(exist_ok=False)
            count += 1
    except OSError:
        pass
