"""Owns: swapping several directories in as one — all old or all new across kills — through a swap journal.

One target is swapped by one atomic step (`swap.swap_set`), and needs nothing more. For several, a journal naming each
target, its stage, its backup name and the new tree's identity (device and inode of the stage, which renames keep) is
written and fsynced, with its directory, before the first rename: `.<name>.ocivendir-swap-<id>`, one copy in each
directory that holds a target of the set (`<name>` is the set's first target there). Whoever next lists one of those
directories to recover a target (`swap.recover`) finds a copy and, before anything else touches the set, rolls it
forward when every target holds its new tree, else back. Each step is decided from what is on disk, so a kill during
recovery is recovered the same way.

A journal is a file anyone who can write that directory could plant: it is acted on only when every target it names
is one the current run holds the lock of, with stage and backup siblings of their target under ocivendir's names,
and every directory of the set holds the same copy (one planted where its author can write must not move a target
where it cannot); one naming none of them is left alone, and any other is refused with a message saying what to do.
"""

from __future__ import annotations

import os
import posixpath
import stat
from dataclasses import dataclass

from ocivendir.errors import SyncError
from ocivendir.fs.paths import split
from ocivendir.fs.remove import remove_file, remove_tree
from ocivendir.fs.swap import JOURNAL_MARK, JOURNAL_TMP, OLD, STAGE, exchange, fsync_dir, new_sibling, swap_in

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Collection, Sequence

__all__ = ["is_journal", "recover_journal", "swap_all"]

_VERSION = 1
_ID_HEX = 12
_MAX_BYTES = 1 << 20
_WHAT = "Recovering an interrupted sync"


@dataclass(frozen=True)
class _Entry:
    """One target of a set: where its new tree is staged, where its old one goes (None: it had none), the new tree."""

    target: str
    stage: str
    backup: str | None
    new: tuple[int, int]


def swap_all(pairs: Sequence[tuple[str, str]]) -> None:
    """Put each `(stage, target)`'s stage in place of its target, all or none, through a journal; then remove old trees.

    On failure every target is put back and the stages are removed, then the error is raised; if putting back fails
    too, the journal stays for the next run and the stages with it.
    """
    try:
        entries = [_entry(stage, target) for stage, target in pairs]
        journals = _write(entries, os.urandom(_ID_HEX // 2).hex())
    except BaseException:
        for stage, _ in pairs:
            remove_tree(stage)
        raise
    try:
        for entry in entries:
            swap_in(entry.stage, entry.target, old=entry.backup)
    except BaseException:
        _roll_back(entries)
        _finish(entries, journals)
        raise
    _roll_forward(entries)
    _finish(entries, journals, synced=True)


def _entry(stage: str, target: str) -> _Entry:
    info = os.lstat(stage)
    backup = new_sibling(target, OLD) if os.path.lexists(target) else None
    return _Entry(target=target, stage=stage, backup=backup, new=(info.st_dev, info.st_ino))


def _anchors(entries: Sequence[_Entry]) -> dict[str, str]:
    """Each directory holding a target of the set, and the first such target's name: the one its copy is named after."""
    first: dict[str, str] = {}
    for entry in entries:
        parent, name = split(entry.target)
        first[parent] = min(first.get(parent, name), name)
    return first


def _copies(entries: Sequence[_Entry], set_id: str) -> list[str]:
    return [posixpath.join(parent, f".{name}{JOURNAL_MARK}{set_id}") for parent, name in _anchors(entries).items()]


def _write(entries: Sequence[_Entry], set_id: str) -> list[str]:
    """Write a copy of the journal into each directory of the set, durably, before anything is renamed."""
    import json  # noqa: PLC0415 - only when several targets are swapped at once

    written = []
    try:
        for parent, anchor in _anchors(entries).items():
            path = posixpath.join(parent, f".{anchor}{JOURNAL_MARK}{set_id}")
            body = {"version": _VERSION, "id": set_id, "entries": [
                {"target": posixpath.relpath(e.target, parent), "stage": split(e.stage)[1],
                 "backup": None if e.backup is None else split(e.backup)[1], "new": list(e.new)}
                for e in entries]}  # fmt: skip
            tmp = new_sibling(posixpath.join(parent, anchor), JOURNAL_TMP)  # a leftover `recover` removes
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
            with os.fdopen(fd, "wb") as handle:
                handle.write(json.dumps(body, separators=(",", ":")).encode())
                handle.flush()
                os.fsync(handle.fileno())
            os.rename(tmp, path)
            written.append(path)
            fsync_dir(parent)
    except BaseException:
        for path in written:
            remove_file(path)
        raise
    return written


def _finish(entries: Sequence[_Entry], journals: Sequence[str], *, synced: bool = False) -> None:
    """Once the set is all old or all new on disk: drop the journal, then what is left of stages (new trees).

    The renames that made it so are made durable first, unless `synced` (each swap in fsynced its directory).
    """
    for parent in () if synced else {split(e.target)[0] for e in entries}:
        fsync_dir(parent)
    for path in journals:
        remove_file(path)
    for entry in entries:
        remove_tree(entry.stage)


def _is_new(entry: _Entry) -> bool:
    try:
        info = os.lstat(entry.target)
    except FileNotFoundError:
        return False
    return (info.st_dev, info.st_ino) == entry.new


def _roll_forward(entries: Sequence[_Entry]) -> None:
    """Every target holds its new tree: remove the old trees (at the backup, or at the stage after an exchange)."""
    for entry in entries:
        remove_tree(entry.stage)
        if entry.backup is not None:
            remove_tree(entry.backup)


def _roll_back(entries: Sequence[_Entry]) -> None:
    """Put each old tree back at its target and each new one back at its stage, one rename at a time."""
    for entry in entries:
        if _is_new(entry):
            if entry.backup is None:
                os.rename(entry.target, entry.stage)
                continue
            if os.path.lexists(entry.stage):  # exchanged, not yet renamed aside: the old tree is at the stage
                if exchange(entry.stage, entry.target):
                    continue
                os.rename(entry.stage, entry.backup)
            if not os.path.lexists(entry.backup):
                continue  # not a state a swap leaves: whatever is there stays
            os.rename(entry.target, entry.stage)
        if entry.backup is not None and not os.path.lexists(entry.target) and os.path.lexists(entry.backup):
            os.rename(entry.backup, entry.target)


def is_journal(name: str) -> bool:
    """True for the name of a journal's copy, whichever target it is named after."""
    head, mark, set_id = name.rpartition(JOURNAL_MARK)
    return bool(mark) and head.startswith(".") and _is_id(set_id)


def _is_id(text: str) -> bool:
    return len(text) == _ID_HEX and all(c in "0123456789abcdef" for c in text)


def recover_journal(path: str, allowed: Collection[str]) -> None:
    """Finish or undo the set a journal copy describes when it is one of ours (every target in `allowed`).

    `allowed` holds the targets whose locks the caller holds (as `pure` spells them). A journal naming none of them is
    another run's (of another config) and is left alone; one naming some of them and anything else is refused.
    """
    parent, name = split(path)
    try:
        set_id, entries = _read(path, parent)
    except FileNotFoundError:
        return  # recovered meanwhile by the run that holds its targets
    except (OSError, ValueError, TypeError, KeyError, RecursionError) as exc:
        msg = f"{_WHAT}: cannot use swap journal '{path}': {_reason(exc)}"
        raise SyncError(msg, hint="delete it if no sync of that directory was interrupted") from None
    if name.rpartition(JOURNAL_MARK)[2] != set_id:
        msg = f"{_WHAT}: swap journal '{path}' does not carry its own name"
        raise SyncError(msg, hint="delete it if no sync of that directory was interrupted")
    allowed = {posixpath.normpath(target) for target in allowed}
    ours = [e for e in entries if posixpath.normpath(e.target) in allowed]
    if not ours:
        return
    if len(ours) != len(entries):
        other = next(e.target for e in entries if posixpath.normpath(e.target) not in allowed)
        msg = f"{_WHAT}: swap journal '{path}' also names '{other}', which this run does not replace"
        hint = ("run the interrupted sync again to finish or undo its swap, or delete the journal to leave its "
                "directories as they are")  # fmt: skip
        raise SyncError(msg, hint=hint)
    copies = _copies(entries, set_id)
    if not _whole(copies, set_id, entries):  # not a swap's: a kill in its writing or finishing leaves no rename to undo
        remove_file(path)
        return
    if all(_is_new(e) for e in entries):
        _roll_forward(entries)
    else:
        _roll_back(entries)
    _finish(entries, copies)


def _whole(copies: Sequence[str], set_id: str, entries: Sequence[_Entry]) -> bool:
    """Whether every directory of the set holds its copy of the journal, naming the same set.

    A swap writes every copy before its first rename and removes them only once the set is all old or all new, so a
    set whose copies are not all there needs no rename: what a killed run left is removed as any leftover is. A copy
    in one directory alone may have been planted by whoever can write that directory, naming targets it cannot.
    """
    for copy in copies:
        try:
            found = _read(copy, split(copy)[0])
        except (OSError, ValueError, TypeError, KeyError, RecursionError):
            return False
        if found != (set_id, list(entries)):
            return False
    return True


def _reason(exc: BaseException) -> str:
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror.lower()
    return str(exc) or type(exc).__name__


def _read(path: str, parent: str) -> tuple[str, list[_Entry]]:
    """A journal copy's id and entries, each checked: a regular file, targets unique, stage and backup siblings."""
    import json  # noqa: PLC0415 - only when a journal is found

    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_size > _MAX_BYTES:
            msg = "not a journal (a regular file of at most 1 MiB)"
            raise ValueError(msg)
        data = os.read(fd, _MAX_BYTES + 1)
    finally:
        os.close(fd)
    body = json.loads(data)
    if body["version"] != _VERSION or not isinstance(body["id"], str) or not _is_id(body["id"]):
        msg = f"unknown version or id (this ocivendir writes version {_VERSION})"
        raise ValueError(msg)
    entries = [_checked(item, parent) for item in body["entries"]]
    if len(entries) < 2 or len({e.target for e in entries}) != len(entries):  # noqa: PLR2004 - a set is two or more
        msg = "a set of fewer than two distinct targets"
        raise ValueError(msg)
    return body["id"], entries


def _checked(item: dict[str, object], parent: str) -> _Entry:
    target, stage, backup, new = item["target"], item["stage"], item["backup"], item["new"]
    if not isinstance(target, str) or not isinstance(stage, str) or not (backup is None or isinstance(backup, str)):
        msg = "an entry's paths are not strings"
        raise TypeError(msg)
    if not (isinstance(new, list) and len(new) == 2 and all(type(n) is int and n >= 0 for n in new)):  # noqa: PLR2004
        msg = "an entry's identity is not a device and an inode"
        raise TypeError(msg)
    where = posixpath.normpath(posixpath.join(parent, target))
    above, name = split(where)
    for kind, given in ((STAGE, stage), (OLD, backup)):
        prefix = f".{name}.ocivendir-{kind}-"
        if given is not None and not (given.startswith(prefix) and _is_id(given.removeprefix(prefix))):
            msg = f"'{given}' is not a {kind} name of '{where}'"
            raise ValueError(msg)
    return _Entry(target=where, stage=posixpath.join(above, stage),
                  backup=None if backup is None else posixpath.join(above, backup), new=(new[0], new[1]))  # fmt: skip
