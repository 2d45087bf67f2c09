"""A server that starts removes what servers of other builds left in its directory, and nothing a live one needs."""

from __future__ import annotations

import fcntl
import os
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from ocivendir.fs.locks import hold_lock
from ocivendir.server.sweep import sweep

OWN = "0123456789abcdef"
OLD = "fedcba9876543210"
OTHER = "00000000deadbeef"


def _names(directory: Path) -> list[str]:
    return sorted(entry.name for entry in directory.iterdir())


def _leave(directory: Path, build: str, *names: str) -> None:
    for name in names:
        (directory / name.format(build=build)).touch()


def test_a_build_that_neither_runs_nor_starts_loses_all_it_left(tmp_path: Path) -> None:
    _leave(tmp_path, OLD, "server-{build}.lock", "server-{build}.start", "server-{build}.sock", ".server-{build}.4242")
    _leave(tmp_path, OWN, "server-{build}.lock", "server-{build}.start", "server-{build}.sock")
    removed = sweep(str(tmp_path), OWN)
    assert sorted(removed) == sorted([f"server-{OLD}.lock", f"server-{OLD}.start", f"server-{OLD}.sock",
                                      f".server-{OLD}.4242"])  # fmt: skip
    assert _names(tmp_path) == [f"server-{OWN}.lock", f"server-{OWN}.sock", f"server-{OWN}.start"]


def test_names_no_server_makes_are_left_alone(tmp_path: Path) -> None:
    names = ["server.log", "server-xyz.lock", "server-0123456789ABCDEF.lock", f"server-{OLD}.lock.bak",
             f".server-{OLD}.pid", f"server-{OLD}0.sock", "notes"]  # fmt: skip
    for name in names:
        (tmp_path / name).touch()
    assert sweep(str(tmp_path), OWN) == []
    assert _names(tmp_path) == sorted(names)


def test_a_build_whose_server_runs_keeps_its_files(tmp_path: Path) -> None:
    _leave(tmp_path, OLD, "server-{build}.lock", "server-{build}.start", "server-{build}.sock", ".server-{build}.7")
    _leave(tmp_path, OTHER, "server-{build}.lock", "server-{build}.start")
    held = hold_lock(str(tmp_path / f"server-{OLD}.lock"))  # its server holds its lock for its whole life
    try:
        assert sorted(sweep(str(tmp_path), OWN)) == [f"server-{OTHER}.lock", f"server-{OTHER}.start"]
    finally:
        os.close(held)
    assert _names(tmp_path) == sorted([f"server-{OLD}.lock", f"server-{OLD}.start", f"server-{OLD}.sock",
                                                   f".server-{OLD}.7"])  # fmt: skip


def test_a_build_whose_server_is_starting_keeps_its_files(tmp_path: Path) -> None:
    _leave(tmp_path, OLD, "server-{build}.lock", "server-{build}.start", "server-{build}.sock")
    held = hold_lock(str(tmp_path / f"server-{OLD}.start"))  # its starter holds the start lock until it listens
    try:
        assert sweep(str(tmp_path), OWN) == []
    finally:
        os.close(held)
    assert len(_names(tmp_path)) == 3


def test_a_socket_is_removed_only_under_its_builds_lock(tmp_path: Path) -> None:
    """Without the lock file, a server of the build may be about to make it, then bind and rename its socket."""
    _leave(tmp_path, OLD, "server-{build}.sock", "server-{build}.start")
    assert sweep(str(tmp_path), OWN) == [f"server-{OLD}.start"]
    assert _names(tmp_path) == [f"server-{OLD}.sock"]


def test_a_directory_that_cannot_be_listed_is_no_error(tmp_path: Path) -> None:
    assert sweep(str(tmp_path / "missing"), OWN) == []


def test_a_lock_file_swept_by_another_sweeper_before_it_was_locked_is_no_lock(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A lock taken on a lock file removed since it was opened excludes no one: the build's server may run meanwhile.

    Two servers sweep at once: one removed the lock file this one had opened, and a server of that build made a new
    one and listens since. Its socket stays.
    """
    lock_file = tmp_path / f"server-{OLD}.lock"
    lock_file.touch()
    swept = lock_file.stat().st_ino
    real_flock = fcntl.flock
    server: list[int] = []
    listening = socket.socket(socket.AF_UNIX)

    def meanwhile(fd: int, operation: int) -> None:
        if not server and os.fstat(fd).st_ino == swept:
            lock_file.unlink()  # the other sweeper's removal
            server.append(hold_lock(str(lock_file)))  # a server of the build starts: a new lock file, held
            listening.bind(str(tmp_path / f"server-{OLD}.sock"))
        real_flock(fd, operation)

    monkeypatch.setattr(fcntl, "flock", meanwhile)
    try:
        sweep(str(tmp_path), OWN)
        assert (tmp_path / f"server-{OLD}.sock").exists()
        assert lock_file.exists()
    finally:
        listening.close()
        for fd in server:
            os.close(fd)


def test_the_directory_is_read_through_once_however_many_builds_it_holds(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A server sweeps before it serves its first call: thousands of builds left must not cost their number squared."""
    for number in range(50):
        _leave(tmp_path, f"{number:016x}", "server-{build}.lock", "server-{build}.start", ".server-{build}.7")
    passes = []

    class Listing(list[str]):
        def __iter__(self) -> Iterator[str]:
            passes.append(len(self))
            return super().__iter__()

    real_listdir = os.listdir
    monkeypatch.setattr(os, "listdir", lambda path: Listing(real_listdir(path)))
    assert len(sweep(str(tmp_path), OWN)) == 150
    assert len(passes) <= 2
