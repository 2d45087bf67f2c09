"""Owns: the order go-yaml v2 writes a mapping's string keys in (`keyList.Less` and how Go's sort applies it).

`Less` compares from the first rune that differs: two letters by code point, a letter after anything else, else the
digit runs that start there by value (Go's int64 arithmetic, any script's digits), then by length. It is not a total
order (`2 < 10 < 12 < 1e3 < 2`): for such keys go-yaml's own output follows Go's random map order, so no one order is
go-yaml's. Wherever `Less` is consistent on the keys at hand, any sort gives go-yaml's order; Go's sort.Sort takes 12
elements or fewer by insertion sort, done here the same way, and longer maps are sorted with Python's sort.
"""

from __future__ import annotations

import functools

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable

__all__ = ["go_less", "go_sorted"]

_INSERTION_SORT_MAX = 12  # Go's pdqsort sorts this many elements or fewer by insertion sort
_INT64 = 1 << 64


def _wrap(value: int) -> int:
    """Go's int64 overflow."""
    value %= _INT64
    return value - _INT64 if value >= _INT64 >> 1 else value


def _run(text: str, start: int, value: int) -> tuple[int, int]:
    """Where the digit run at `start` ends and `value` extended by its digits (`rune - '0'`, as Go adds them)."""
    end = start
    while end < len(text) and text[end].isdecimal():
        value = _wrap(value * 10 + ord(text[end]) - ord("0"))
        end += 1
    return end, value


def go_less(a: str, b: str) -> bool:
    """go-yaml v2's `keyList.Less` for two strings."""
    for i in range(min(len(a), len(b))):
        left, right = a[i], b[i]
        if left == right:
            continue
        left_letter, right_letter = left.isalpha(), right.isalpha()
        if left_letter and right_letter:
            return left < right
        if left_letter or right_letter:
            return right_letter
        start = 0
        if "0" in (left, right):
            j = i - 1
            while j >= 0 and a[j].isdecimal():
                if a[j] != "0":
                    start = 1
                    break
                j -= 1
        a_end, a_value = _run(a, i, start)
        b_end, b_value = _run(b, i, start)
        if a_value != b_value:
            return a_value < b_value
        if a_end != b_end:
            return a_end < b_end
        return left < right
    return len(a) < len(b)


def _compare(a: str, b: str) -> int:
    return -1 if go_less(a, b) else 1 if go_less(b, a) else 0


def go_sorted(keys: Iterable[str]) -> list[str]:
    """`keys` in the order go-yaml v2 writes them."""
    items = list(keys)
    if len(items) > _INSERTION_SORT_MAX:
        return sorted(items, key=functools.cmp_to_key(_compare))
    for i in range(1, len(items)):  # Go's insertionSort, swap by swap
        j = i
        while j > 0 and go_less(items[j], items[j - 1]):
            items[j], items[j - 1] = items[j - 1], items[j]
            j -= 1
    return items
