"""A memo kept across calls holds at most its size, and drops the least recently used first."""

from __future__ import annotations

from collections import OrderedDict

from ocivendir.kept import recall, remember, through


def test_the_least_recently_used_goes_first() -> None:
    memo: OrderedDict[str, int] = OrderedDict()
    for number, key in enumerate("abc"):
        remember(memo, key, number, 3)
    assert recall(memo, "a") == 0  # now the most recently used
    remember(memo, "d", 3, 3)
    assert list(memo) == ["c", "a", "d"]  # "b" went: used least recently
    assert recall(memo, "b") is None
    remember(memo, "c", 9, 3)  # kept again: the value replaced, now the most recent
    assert list(memo.items()) == [("a", 0), ("d", 3), ("c", 9)]


def test_a_value_is_made_once_and_a_failure_keeps_nothing() -> None:
    memo: OrderedDict[str, int] = OrderedDict()
    made: list[str] = []
    assert through(memo, "a", lambda: made.append("a") or 1, 2) == 1
    assert through(memo, "a", lambda: made.append("again") or 2, 2) == 1
    assert made == ["a"]

    def failing() -> int:
        raise ValueError("bad bytes")

    for _ in range(2):
        try:
            through(memo, "b", failing, 2)
        except ValueError:
            pass
    assert list(memo) == ["a"]
