"""Lock files: mutual exclusion holds across the unlink race, nothing is left behind, a read-only cache is locked."""

from __future__ import annotations

import fcntl
import os
import threading
from pathlib import Path

import pytest

from ocivendir.fs.locks import (
    LockBusy,
    file_lock,
    hold_lock,
    is_held,
    release_removed,
    removable_lock,
    take_existing,
    target_lock,
)
from tests.support.mounts import small_tmpfs


def test_a_removable_lock_excludes_and_leaves_no_file(tmp_path: Path) -> None:
    path = tmp_path / "locks" / "target-x"
    inside = 0
    most = 0
    guard = threading.Lock()

    def worker() -> None:
        nonlocal inside, most
        for _ in range(40):
            with removable_lock(path):
                with guard:
                    inside += 1
                    most = max(most, inside)
                # widen the window in which others open the file that is about to be unlinked
                threading.Event().wait(0.0005)
                with guard:
                    inside -= 1

    threads = [threading.Thread(target=worker) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert most == 1
    assert list(path.parent.iterdir()) == []


def test_target_locks_for_fresh_directories_do_not_accumulate(tmp_path: Path) -> None:
    locks = tmp_path / "locks"
    for number in range(20):
        with target_lock(locks, tmp_path / f"work{number}" / "out"):
            assert len(list(locks.iterdir())) == 1
    assert list(locks.iterdir()) == []


def test_locks_on_a_read_only_filesystem_are_taken_read_only_and_an_absent_one_is_not_needed(tmp_path: Path) -> None:
    """A seeded cache mounted read-only: its lock files still exclude (flock on a read-only descriptor).

    One that is not there cannot be made, and guards nothing that could change.
    """
    with small_tmpfs(tmp_path / "ro", "64k") as mount:
        present = mount.path / "locks" / "root"
        present.parent.mkdir()
        present.write_bytes(b"")
        mount.read_only()
        with file_lock(present, shared=True), file_lock(present, shared=True):
            _busy(present)
        with file_lock(mount.path / "locks" / "blob-absent"), removable_lock(mount.path / "locks" / "target-x"):
            pass
        assert sorted(p.name for p in present.parent.iterdir()) == ["root"]


def _busy(path: Path) -> None:
    with pytest.raises(LockBusy), file_lock(path, timeout=0):
        pass


def test_a_lock_makes_its_directory_only_when_it_is_missing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A lock's directory is there on every call but the first: then the lock costs no mkdir (nor makedirs' stats)."""
    import os  # noqa: PLC0415

    made: list[str] = []
    real_mkdir = os.mkdir

    def counting_mkdir(path: str, *args: object, **kwargs: object) -> None:
        made.append(str(path))
        real_mkdir(path, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(os, "mkdir", counting_mkdir)
    with file_lock(tmp_path / "a" / "b" / "lock", shared=True), target_lock(tmp_path / "locks", tmp_path / "out"):
        pass
    assert made == [str(tmp_path / "a"), str(tmp_path / "a" / "b"), str(tmp_path / "locks")]
    made.clear()
    with file_lock(tmp_path / "a" / "b" / "lock"), target_lock(tmp_path / "locks", tmp_path / "out"):
        pass
    assert made == []


def test_a_held_lock_taken_on_a_file_removed_meanwhile_is_taken_again_on_the_new_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A sweeper removed the file between this process's open and its flock: that lock would exclude no one."""
    path = tmp_path / "server-0123456789abcdef.lock"
    path.touch()
    real_flock = fcntl.flock
    locked: list[int] = []

    def swept_first(fd: int, operation: int) -> None:
        if not locked:
            path.unlink()  # the sweeper's unlink, while it held the old file
        locked.append(fd)
        real_flock(fd, operation)

    monkeypatch.setattr(fcntl, "flock", swept_first)
    fd = hold_lock(str(path))
    try:
        assert len(locked) == 2  # the removed file's lock was let go, and the new file at the path locked
        assert (os.fstat(fd).st_dev, os.fstat(fd).st_ino) == (path.stat().st_dev, path.stat().st_ino)
        with pytest.raises(LockBusy):  # and it excludes: the file at the path is the one held
            os.close(hold_lock(str(path)))
    finally:
        os.close(fd)


def test_an_existing_lock_is_taken_without_making_one(tmp_path: Path) -> None:
    missing = tmp_path / "server-0123456789abcdef.start"
    assert take_existing(str(missing)) is None
    assert not missing.exists()
    present = tmp_path / "server-0123456789abcdef.lock"
    present.touch()
    held = hold_lock(str(present))
    try:
        with pytest.raises(LockBusy):  # held elsewhere: a server of that build runs
            take_existing(str(present))
    finally:
        os.close(held)
    fd = take_existing(str(present))
    assert fd is not None
    assert release_removed(fd, str(present))
    assert not present.exists()


@pytest.mark.parametrize("kind", ["symlink", "directory", "fifo"])
def test_what_is_no_regular_lock_file_is_not_taken(tmp_path: Path, kind: str) -> None:
    path = tmp_path / "server-0123456789abcdef.lock"
    if kind == "symlink":
        path.symlink_to(tmp_path / "elsewhere")
        (tmp_path / "elsewhere").touch()
    elif kind == "directory":
        path.mkdir()
    else:
        os.mkfifo(path)
    with pytest.raises(LockBusy):
        take_existing(str(path))
    assert os.path.lexists(path)


def test_a_lock_file_replaced_since_it_was_taken_is_not_removed(tmp_path: Path) -> None:
    path = tmp_path / "server-0123456789abcdef.start"
    path.touch()
    fd = take_existing(str(path))
    assert fd is not None
    path.unlink()
    path.touch()  # another process's file now: not the one held
    assert not release_removed(fd, str(path))
    assert path.exists()


def test_a_fifo_at_a_lock_path_is_not_waited_on_for_a_writer(tmp_path: Path) -> None:
    """`is_held` (a client a server made way for asks it until the lock goes) answers at once for a FIFO planted at the
    lock's path: no wait for a writer that never comes.
    """  # noqa: D205
    path = tmp_path / "server-0123456789abcdef.lock"
    os.mkfifo(path, 0o600)
    answers: list[bool] = []
    asking = threading.Thread(target=lambda: answers.append(is_held(str(path))), daemon=True)
    asking.start()
    asking.join(5)
    if asking.is_alive():  # let it go: a writer opens the FIFO
        os.close(os.open(path, os.O_WRONLY | os.O_NONBLOCK))
        asking.join(5)
        pytest.fail("is_held waited for a writer to open the FIFO at the lock path")
    assert answers == [False]
