"""Lock files: mutual exclusion holds across the unlink race, nothing is left behind, a read-only cache is locked."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from ocivendir.fs.locks import LockBusy, file_lock, removable_lock, target_lock
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
