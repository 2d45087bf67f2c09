"""Owns: the swap and the recovery that engines call — one target in one atomic step, several through a journal.

`swap_set` puts each stage in place of its target: one target by `fs/swap.py`'s single exchange, several as one set
journaled by `fs/swapset.py` (imported only then: a warm one-directory call loads nothing more). `recover` cleans up
after a killed run on a target, and hands a swap journal it finds beside the target to `fs/swapset.py` first. Both
modules below know nothing of this one, so neither names the other.
"""

from __future__ import annotations

import os
import posixpath

from ocivendir.fs.paths import pure, split
from ocivendir.fs.remove import remove_tree
from ocivendir.fs.swap import BLOBS, JOURNAL_MARK, JOURNAL_TMP, OLD, STAGE, sibling_prefix, swap_in

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Collection, Sequence

__all__ = ["recover", "swap_set"]


def swap_set(pairs: Sequence[tuple[str, str]]) -> None:
    """Put each `(stage, target)`'s stage in place of its target, all or none, and remove the old trees.

    One target takes one atomic step and needs nothing else; several go through a journal (`fs/swapset.py`). The
    stages are the callee's: swapped in, removed on failure, or left to the journal when putting back failed too.
    """
    if len(pairs) != 1:
        from ocivendir.fs.swapset import swap_all  # noqa: PLC0415 - only for several targets (a warm call's imports)

        swap_all(pairs)
        return
    stage, target = pairs[0]
    try:
        old = swap_in(stage, target)
    except BaseException:
        remove_tree(stage)
        raise
    if old is not None:
        remove_tree(old)


def recover(
    target: str | os.PathLike[str], keep: str | os.PathLike[str] | None = None, *, held: Collection[str] = ()
) -> None:
    """Clean up after a killed run on `target` (call under the target's lock); `keep` is this run's own.

    A swap journal found beside it is recovered first, when `held` (all the targets whose locks the caller holds,
    `target` included) names every target of its set, and refused (SyncError) when it names only some.
    """
    parent, _ = split(target)
    try:
        names = sorted(os.listdir(parent))
    except (FileNotFoundError, NotADirectoryError, PermissionError):
        return
    if any(JOURNAL_MARK in name for name in names):
        names = _recover_journals(parent, names, {pure(target), *map(pure, held)})
    if not any(".ocivendir-" in name for name in names):
        return  # nothing a run of ours leaves beside a target (a fresh directory's, every reconcile)
    kept = None if keep is None else pure(keep)
    for kind in (OLD, STAGE, BLOBS, JOURNAL_TMP):
        prefix = sibling_prefix(target, kind)
        for name in names:
            leftover = name if parent == "." else posixpath.join(parent, name)
            if not name.startswith(prefix) or leftover == kept or not os.path.lexists(leftover):
                continue
            if kind == OLD and not os.path.lexists(os.fspath(target)):
                os.rename(leftover, target)
            else:
                remove_tree(leftover)


def _recover_journals(parent: str, names: list[str], held: Collection[str]) -> list[str]:
    """Recover each journal in `names` that is ours; the names of `parent` once they are done."""
    from ocivendir.fs import swapset  # noqa: PLC0415 - only when a swap journal is there (a killed run's)

    found = [name for name in names if swapset.is_journal(name)]
    for name in found:
        swapset.recover_journal(name if parent == "." else posixpath.join(parent, name), held)
    return sorted(os.listdir(parent)) if found else names
