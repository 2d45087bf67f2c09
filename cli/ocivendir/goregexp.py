"""Owns: Go's `regexp` — its syntax and its linear-time matching — through RE2 (google-re2).

Go programs (containerd's registries.yaml rewrites, cosign's keyless identities under policy-controller) compile
their patterns with Go's `regexp`, which is RE2: no backtracking, so matching takes time linear in the text whatever
the pattern. Python's `re` backtracks (`^(a+)+b$` against 27 characters took 20 s) and reads another dialect, so
patterns are compiled by RE2 itself: what Go refuses (lookarounds, backreferences, possessive quantifiers, `\\Z`,
`(?x)`, repeats over 1000) is an invalid pattern, and what only Go reads (`\\z`, `\\pL`, `\\Q…\\E`, `[[:alpha:]]`,
`(?U)`, `x{,3}` as text) means what it means in Go: `\\d`, `\\w`, `\\s` and `\\b` are ASCII only, and `$` is the end
of the text (not before a trailing newline). RE2's parser, which Go's is a port of, accepts one escape Go refuses
(`\\C`, any byte): it is refused here.

RE2 is loaded on first use only; its C++ error log is off (errors are returned, never printed).
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Protocol

    class GoMatch(Protocol):
        """A match: its span and its groups' text."""

        def span(self) -> tuple[int, int]: ...
        def group(self, name: int | str, /) -> str | None: ...

    class GoPattern(Protocol):
        """A compiled pattern: `search` is Go's `FindStringIndex`/`MatchString` from `pos` on."""

        def search(self, text: str, pos: int = 0, /) -> GoMatch | None: ...
        def fullmatch(self, text: str, /) -> GoMatch | None: ...


__all__ = ["compile_go", "go_search"]


def compile_go(pattern: str) -> GoPattern:
    """A pattern compiled as Go's `regexp.Compile` reads it; ValueError with RE2's reason for one Go would refuse."""
    import re2  # type: ignore[import-untyped]  # noqa: PLC0415 - google-re2 ships no types; loaded on first use only

    if _escapes_any_byte(pattern):
        msg = "invalid escape sequence: \\C"
        raise ValueError(msg)
    options = re2.Options()
    options.log_errors = False  # RE2 would write parse errors to stderr itself
    try:
        compiled: GoPattern = re2.compile(pattern, options)
    except re2.error as exc:
        reason = exc.args[0] if exc.args else exc
        raise ValueError(reason.decode(errors="replace") if isinstance(reason, bytes) else str(reason)) from None
    return compiled


def go_search(pattern: str, text: str) -> bool:
    """Go's `regexp.MustCompile(pattern).MatchString(text)`: whether the pattern matches anywhere in the text."""
    return compile_go(pattern).search(text) is not None


def _escapes_any_byte(pattern: str) -> bool:
    """True if the pattern holds `\\C` (an escaped C, not an escaped backslash followed by C)."""
    index = 0
    while index < len(pattern) - 1:
        if pattern[index] == "\\":
            if pattern[index + 1] == "C":
                return True
            index += 2
        else:
            index += 1
    return False
