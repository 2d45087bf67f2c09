"""A set of directories swapped as one: after a kill at any step, and at any step of the recovery, all old or all new.

Recovery follows a journal only within the targets the run holds; a tampered or foreign journal moves nothing.
"""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from ocivendir.errors import SyncError
from ocivendir.fs import swap, swapset
from ocivendir.fs.swap import STAGE, new_sibling
from ocivendir.fs.swapping import recover, swap_set
from ocivendir.fs.swapset import swap_all

if TYPE_CHECKING:
    from collections.abc import Callable

# two directories, three targets, one of them new: a journal copy in each directory
NAMES = ("a/one", "a/two", "b/three")


def version(target: Path) -> str | None:
    marker = target / "version"
    return marker.read_text() if marker.exists() else None


def stage_set(root: Path, *, fresh: str = "b/three") -> list[tuple[str, str]]:
    """The old trees in place (but `fresh`, new in this set) and a staged new tree for each target."""
    pairs = []
    for name in NAMES:
        target = root / name
        target.parent.mkdir(parents=True, exist_ok=True)
        if name != fresh:
            target.mkdir()
            (target / "version").write_text("old")
        stage = Path(new_sibling(target, STAGE))
        stage.mkdir()
        (stage / "version").write_text("new")
        pairs.append((str(stage), str(target)))
    return pairs


def held(root: Path) -> list[str]:
    return [str(root / name) for name in NAMES]


def recover_all(root: Path) -> None:
    """What the next run does before touching the set: recover each target it holds."""
    for target in held(root):
        recover(target, held=held(root))


def assert_all_old_or_all_new(root: Path) -> str:
    versions = {name: version(root / name) for name in NAMES}
    assert versions in ({"a/one": "old", "a/two": "old", "b/three": None}, dict.fromkeys(NAMES, "new")), versions
    left = sorted(p.name for d in ("a", "b") for p in (root / d).iterdir())
    assert left == sorted(name.split("/")[1] for name in NAMES if versions[name] is not None)
    return "new" if versions["a/one"] == "new" else "old"


def killed_at(step: int, run: Callable[[], None], monkeypatch: pytest.MonkeyPatch) -> bool:
    """Run `run` in a child killed (SIGKILL) just before its `step`-th rename or removal; True if it ended first."""
    pid = os.fork()
    if pid == 0:  # the child: count renames, exchanges and removals, die at the chosen one
        count = [0]

        def counted(real: Callable[..., object]) -> Callable[..., object]:
            def call(*args: object) -> object:
                if count[0] == step:
                    os.kill(os.getpid(), signal.SIGKILL)
                count[0] += 1
                return real(*args)

            return call

        exchange = counted(swap.exchange)
        monkeypatch.setattr(os, "rename", counted(os.rename))
        monkeypatch.setattr(swap, "exchange", exchange)
        monkeypatch.setattr(swapset, "exchange", exchange)
        monkeypatch.setattr(swapset, "remove_tree", counted(swapset.remove_tree))
        monkeypatch.setattr(swapset, "remove_file", counted(swapset.remove_file))
        try:
            run()
        finally:
            os._exit(0)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status) == 0


def killed_set(root: Path, step: int, monkeypatch: pytest.MonkeyPatch) -> bool:
    pairs = stage_set(root)
    return killed_at(step, lambda: swap_all(pairs), monkeypatch)


@pytest.mark.parametrize("renameat2", [True, False], ids=["exchange", "rename-aside"])
def test_a_kill_at_any_step_and_at_any_step_of_its_recovery_leaves_the_set_all_old_or_all_new(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, renameat2: bool
) -> None:
    if not renameat2:
        monkeypatch.setattr(swap, "_renameat2", lambda: None)
    # the journal's two copies, then for each replaced tree an exchange and a rename (or a refused exchange and two
    # renames), one rename for the new target: a kill before the last of these rolls the set back, any later one forward
    last_rename = 2 + 2 * (2 if renameat2 else 3) + 1
    outcomes = {}
    step = 0
    while not killed_set(tmp_path / f"{step}", step, monkeypatch):
        recover_all(tmp_path / f"{step}")
        seen = {assert_all_old_or_all_new(tmp_path / f"{step}")}
        # for the longest roll-back and a roll-forward, the recovery is killed at each of its own steps too
        for again in range(100) if step in {last_rename - 1, last_rename} else ():
            root = tmp_path / f"{step}-{again}"
            killed_set(root, step, monkeypatch)
            recovered = killed_at(again, lambda root=root: recover_all(root), monkeypatch)
            recover_all(root)
            seen.add(assert_all_old_or_all_new(root))
            if recovered:
                break
        assert len(seen) == 1, (step, seen)
        outcomes[step] = seen.pop()
        step += 1
    assert assert_all_old_or_all_new(tmp_path / f"{step}") == "new"
    assert outcomes == {s: "old" if s < last_rename else "new" for s in range(step)}
    assert step > last_rename


def test_a_failed_rename_rolls_the_set_back_and_leaves_no_journal(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pairs = stage_set(tmp_path)
    real, count = os.rename, [0]

    def failing(a: str, b: str) -> None:
        count[0] += 1
        if count[0] == 5:  # past the journal, mid-set
            raise OSError(28, "No space left on device", a)
        real(a, b)

    monkeypatch.setattr(os, "rename", failing)
    with pytest.raises(OSError, match="No space"):
        swap_all(pairs)
    assert assert_all_old_or_all_new(tmp_path) == "old"


def test_one_target_is_swapped_without_a_journal(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "out").mkdir()
    stage = Path(new_sibling(tmp_path / "out", STAGE))
    stage.mkdir()
    (stage / "version").write_text("new")
    monkeypatch.setattr(swapset, "_write", lambda *_: pytest.fail("journal written for one target"))
    swap_set([(str(stage), str(tmp_path / "out"))])
    assert version(tmp_path / "out") == "new"
    assert [p.name for p in tmp_path.iterdir()] == ["out"]


def journal_of(root: Path) -> Path:
    """The killed set's journal copy in `a/` (the set killed after two of its swaps)."""
    pairs = stage_set(root)
    pid = os.fork()
    if pid == 0:
        count = [0]
        real = os.rename

        def rename(a: str, b: str) -> None:
            count[0] += 1
            if count[0] == 5:  # journal copies (2), then a/one aside and in (exchange off)
                os._exit(9)
            real(a, b)

        os.rename = rename  # type: ignore[assignment]
        swap.exchange = lambda *_: False  # type: ignore[assignment]
        swap_all(pairs)
        os._exit(0)
    os.waitpid(pid, 0)
    assert version(root / "a/one") == "new"
    assert version(root / "a/two") == "old"
    (found,) = (root / "a").glob(".one.ocivendir-swap-*")
    return found


def test_a_run_that_holds_only_some_targets_of_a_killed_set_refuses_and_touches_nothing(tmp_path: Path) -> None:
    journal = journal_of(tmp_path)
    before = sorted(str(p) for p in tmp_path.rglob("*"))
    with pytest.raises(SyncError, match=r"also names '.*/b/three', which this run does not replace"):
        recover(tmp_path / "a/one", held=[str(tmp_path / "a/one"), str(tmp_path / "a/two")])
    with pytest.raises(SyncError, match="which this run does not replace"):
        recover(tmp_path / "a/two")  # a pull into one of them
    assert sorted(str(p) for p in tmp_path.rglob("*")) == before
    assert journal.exists()
    recover_all(tmp_path)
    assert assert_all_old_or_all_new(tmp_path) == "old"


def test_a_journal_of_another_set_in_the_same_directory_is_left_alone(tmp_path: Path) -> None:
    journal = journal_of(tmp_path)
    (tmp_path / "a/other").mkdir()
    recover(tmp_path / "a/other", held=[str(tmp_path / "a/other")])
    assert journal.exists()
    assert version(tmp_path / "a/one") == "new"


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (
            lambda body: body["entries"][2].update(target="../../victim", stage=".victim.ocivendir-stage-0123456789ab"),
            "also names '.*/victim', which this run does not replace",
        ),
        (lambda body: body["entries"][0].update(backup="../../victim"), "is not a old name"),
        (lambda body: body["entries"][0].update(stage=".two.ocivendir-stage-000000000000"), "is not a stage name"),
        (lambda body: body.update(entries=body["entries"][:1]), "fewer than two distinct targets"),
        (lambda body: body.update(version=2), "unknown version"),
        (lambda body: body["entries"][0].update(new="0"), "not a device and an inode"),
    ],
    ids=["target outside", "backup outside", "stage of another", "a set of one", "version", "identity"],
)
def test_a_tampered_journal_is_refused_before_anything_moves(
    tmp_path: Path, change: Callable[[dict[str, object]], None], message: str
) -> None:
    journal = journal_of(tmp_path / "set")
    (tmp_path / "victim").mkdir()
    body = json.loads(journal.read_text())
    change(body)
    journal.write_text(json.dumps(body))
    before = sorted(str(p) for p in tmp_path.rglob("*"))
    with pytest.raises(SyncError, match=message):
        recover_all(tmp_path / "set")
    assert sorted(str(p) for p in tmp_path.rglob("*")) == before


def test_a_journal_that_is_not_a_small_regular_json_file_is_refused(tmp_path: Path) -> None:
    journal = journal_of(tmp_path)
    journal.unlink()
    journal.symlink_to("/etc/passwd")
    with pytest.raises(SyncError, match="cannot use swap journal"):
        recover_all(tmp_path)
    for garbage in (b"\x00" * 10, b"[" * 500_000, b"{}", b"[]", b"x" * 2_000_000):
        journal.unlink()
        journal.write_bytes(garbage)
        with pytest.raises(SyncError, match="cannot use swap journal"):
            recover_all(tmp_path)


def test_a_journal_planted_in_one_directory_of_the_set_moves_nothing_in_another(tmp_path: Path) -> None:
    """A journal planted in a/ alone, naming b/three too, leaves b/three as it is.

    Whoever can write `a/` only (a tenant beside a/one) can plant it; acted on, its roll-back would rename b/three
    (which that tenant cannot write) aside as a stage and remove it. A set's journal has a copy in every
    directory of the set; one whose copies are not all there, the same, was not written by a swap: it moves nothing.
    """
    for name in ("a/one", "b/three"):
        (tmp_path / name).mkdir(parents=True)
        (tmp_path / name / "version").write_text("mine")
    three = os.lstat(tmp_path / "b/three")
    set_id = "0123456789ab"
    body = {"version": 1, "id": set_id, "entries": [
        {"target": "one", "stage": f".one.ocivendir-stage-{set_id}", "backup": f".one.ocivendir-old-{set_id}",
         "new": [0, 0]},
        {"target": "../b/three", "stage": f".three.ocivendir-stage-{set_id}", "backup": None,
         "new": [three.st_dev, three.st_ino]},
    ]}  # fmt: skip
    planted = tmp_path / "a" / f".one{swap.JOURNAL_MARK}{set_id}"
    planted.write_text(json.dumps(body))
    targets = [str(tmp_path / "a/one"), str(tmp_path / "b/three")]
    for target in targets:
        recover(target, held=targets)
    assert version(tmp_path / "b/three") == "mine"
    assert version(tmp_path / "a/one") == "mine"
    assert sorted(p.name for p in (tmp_path / "b").iterdir()) == ["three"]
