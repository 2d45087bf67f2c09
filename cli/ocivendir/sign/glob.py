"""Owns: policy-controller's image globs (`spec.images[].glob`), exactly as its pkg/apis/glob decides them.

`*` matches any run of characters but `/`, `**` any run at all; `.` is literal; the glob must match the whole
reference. The reference is first written as go-containerregistry's `Name()` (Docker Hub's `index.docker.io/library/`
spelled out, `:latest` added to a bare repository); if that fails to match, the reference as given is tried (their
deprecated fallback). A lone `*` means `index.docker.io/library/*` and `*/*` means `index.docker.io/*/*`. Their
regular expression is matched here by a small scanner, without `re` (which a warm run never loads). One step
further than theirs: the registry host is matched in any case, both spellings of one host being one registry.
"""

from __future__ import annotations

from dataclasses import dataclass

from ocivendir.errors import BadReference
from ocivendir.oci.reference import parse_reference

__all__ = ["Glob", "compile_glob", "glob_matches"]

_VALID = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_:/*.@")
_ALIASES = {"*/*": "index.docker.io/*/*", "*": "index.docker.io/library/*"}
_STAR, _ANY = "*", "**"  # tokens: `[^/]*` and `.*`; every other token is a literal


@dataclass(frozen=True, kw_only=True)
class Glob:
    """A compiled glob: literals, `*` and `**`, left to right (`**` taken first, as Go's ReplaceAll takes it)."""

    text: str
    tokens: tuple[str, ...]
    folded: tuple[str, ...] = ()  # the tokens with the registry host lower-cased (`_fold_host`)

    def fullmatch(self, name: str, *, folded: bool = False) -> bool:
        """Whether the glob matches all of `name` (every position a prefix can end at, carried token by token)."""
        ends = {0}
        for token in self.folded if folded else self.tokens:
            reached: set[int] = set()
            for at in ends:
                if token == _ANY:
                    reached.update(range(at, len(name) + 1))
                elif token == _STAR:
                    slash = name.find("/", at)
                    reached.update(range(at, (len(name) if slash == -1 else slash) + 1))
                elif name.startswith(token, at):
                    reached.add(at + len(token))
            if not reached:
                return False
            ends = reached
        return len(name) in ends


def _fold_host(name: str) -> str:
    """`name` with its first segment (the registry host, which DNS reads in any case) lower-cased."""
    host, slash, rest = name.partition("/")
    return host.lower() + slash + rest


def compile_glob(glob: str) -> Glob:
    """The glob's tokens, or ValueError naming it when it holds characters a glob may not."""
    text = _ALIASES.get(glob, glob)
    if not text or not set(text) <= _VALID:
        raise ValueError(f"invalid glob {text!r}")
    return Glob(text=text, tokens=_tokens(text), folded=_tokens(_fold_host(text)))


def _tokens(text: str) -> tuple[str, ...]:
    tokens: list[str] = []
    at = 0
    while at < len(text):
        if text.startswith("**", at):
            tokens.append(_ANY)
            at += 2
        elif text[at] == "*":
            tokens.append(_STAR)
            at += 1
        else:
            end = at
            while end < len(text) and text[end] != "*":
                end += 1
            tokens.append(text[at:end])
            at = end
    return tuple(tokens)


def glob_matches(pattern: Glob, image: str) -> bool:
    """Whether a compiled glob matches an image reference (an invalid reference matches nothing).

    Beyond policy-controller, a registry host spelt in another case (`LOCALHOST:5000`) matches as well: the same
    registry answers it, and a policy must not be stepped around by the spelling of its host.
    """
    try:
        name = str(parse_reference(image))
    except BadReference:
        return False
    if pattern.fullmatch(name) or (name != image and pattern.fullmatch(image)):
        return True
    return pattern.fullmatch(_fold_host(name), folded=True) or pattern.fullmatch(_fold_host(image), folded=True)
