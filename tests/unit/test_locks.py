"""Removable lock files: mutual exclusion holds across the unlink race, and nothing is left behind."""

from __future__ import annotations

import threading
from pathlib import Path

from ocivendir.fs.locks import removable_lock, target_lock


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
