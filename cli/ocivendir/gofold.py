"""Owns: which JSON or YAML keys Go's encoding/json takes for a struct field of a given ASCII name.

encoding/json matches a key to a field ignoring case: its foldName maps ASCII letters to upper case and every other
rune to the smallest of its simple case-folding orbit. Only two non-ASCII runes fold onto ASCII letters — the long
s (U+017F, onto S) and the Kelvin sign (U+212A, onto K) — so a key is a field name's match exactly when, with
those two replaced, it is ASCII and equal to the name ignoring ASCII case.
"""

from __future__ import annotations

__all__ = ["go_fold"]

_ONTO_ASCII = str.maketrans({"\u017f": "s", "\u212a": "k"})  # all of Unicode that folds onto ASCII (Go 1.27 tables)


def go_fold(key: str) -> str | None:
    """`key` as a lower-case ASCII field name Go would match it to, or None when it can match no ASCII name."""
    folded = key.translate(_ONTO_ASCII) if not key.isascii() else key
    return folded.lower() if folded.isascii() else None
