"""Owns: keeping values across the calls a process serves — bounded memos, least recently used dropped first.

The memos of parsed and rendered documents (`oci/parsed.py`, `oci/lockmemo.py`, `vendir/memos.py`) each key what they
keep by the digest of everything it depends on, in an OrderedDict of their own; these two functions are how a value
is looked up and kept there, under one lock (a worker's thread pool may fetch several contents at once).
"""

from __future__ import annotations

from threading import Lock

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections import OrderedDict
    from collections.abc import Callable
    from typing import TypeVar

    _K = TypeVar("_K")
    _V = TypeVar("_V")

__all__ = ["recall", "remember", "through"]

_LOCK = Lock()  # per-process: guards every memo handed to the two functions below


def recall(memo: OrderedDict[_K, _V], key: _K) -> _V | None:
    """The value kept for `key` (now the most recently used), or None."""
    with _LOCK:
        value = memo.get(key)
        if value is not None:
            memo.move_to_end(key)
        return value


def remember(memo: OrderedDict[_K, _V], key: _K, value: _V, size: int) -> None:
    """Keep `value` for `key`, dropping the least recently used beyond `size` entries."""
    with _LOCK:
        memo[key] = value
        memo.move_to_end(key)
        while len(memo) > size:
            memo.popitem(last=False)


def through(memo: OrderedDict[_K, _V], key: _K, make: Callable[[], _V], size: int) -> _V:
    """The value kept for `key`, else `make()`'s, kept (a failure raises and keeps nothing)."""
    value = recall(memo, key)
    if value is None:
        value = make()
        remember(memo, key, value, size)
    return value
