"""Owns: reading the block-style YAML that go-yaml's Marshal writes without PyYAML, or saying that it cannot.

kapp-controller hands every sync the same stdin (Secrets, then the Config, marshalled by sigs.k8s.io/yaml) and a
bundle brings an images.yml written the same way. That subset is read here line by line: block mappings and
sequences (a sequence may sit at its key's indentation), one-line plain, single- and double-quoted scalars, literal
block scalars, `{}` and `[]`, and comments, with the full loader's own scalar rules (`scalars.resolve_plain`). Anything
else — flow collections, anchors, aliases, tags, `<<` or repeated keys, scalars spanning lines, tabs, document
markers, deep nesting — makes `decode` answer `MISS`, and the caller parses the document with the full loader, which
either gives the same value or go-yaml's error. tests/unit/test_goyaml_quick.py holds the two to the same values.
"""

from __future__ import annotations

from ocivendir.goyaml.keys import UnsupportedKeyError, go_key
from ocivendir.goyaml.scalars import resolve_plain

__all__ = ["MISS", "decode"]

MISS = object()  # "not in the subset": the full loader decides
_MAX_DEPTH = 100
_MAX_KEY = 1000  # go-yaml gives up on a simple key past 1024 characters; the full loader handles those
_REFUSED = ("\t", "\r", "\x85", "\u2028", "\u2029", "\ufeff")  # tabs, and line breaks other than \n
_INDICATORS = frozenset("-?:,[]{}#&*!|>'\"%@`")
_ESCAPES = {"0": "\0", "a": "\a", "b": "\b", "t": "\t", "n": "\n", "v": "\v", "f": "\f", "r": "\r", "e": "\x1b",
            " ": " ", '"': '"', "\\": "\\"}  # fmt: skip
_HEX = {"x": 2, "u": 4, "U": 8}


class _Miss(Exception):
    """The document leaves the subset."""


def _plain(text: str) -> str:
    """`text` when it can be a one-line plain scalar in block context (YAML 1.1's rules, as libyaml scans them)."""
    first = text[:1]
    if not first or (first in _INDICATORS and (first not in "-?:" or text[1:2] in {"", " "})):
        raise _Miss
    if ": " in text or text.endswith(":") or " #" in text:
        raise _Miss
    return text


def _comment_only(rest: str) -> bool:
    """Nothing but spaces and a comment (which needs a space before its `#`) after a token."""
    stripped = rest.lstrip(" ")
    return not stripped or (stripped[0] == "#" and stripped != rest)


def _escape(text: str, at: int, out: list[str]) -> int:
    """One escape of a double-quoted scalar starting after its backslash at `at`; the index past it."""
    code = text[at : at + 1]
    if code in _ESCAPES:
        out.append(_ESCAPES[code])
        return at + 1
    width = _HEX.get(code)
    digits = text[at + 1 : at + 1 + width] if width else ""
    if not width or len(digits) != width or any(c not in "0123456789abcdefABCDEF" for c in digits):
        raise _Miss
    value = int(digits, 16)
    if 0xD800 <= value <= 0xDFFF or value > 0x10FFFF:  # noqa: PLR2004 - surrogates and beyond Unicode
        raise _Miss
    out.append(chr(value))
    return at + 1 + width


def _quoted(text: str) -> tuple[str, str]:
    """A one-line quoted scalar at the start of `text`: its value and what follows the closing quote."""
    quote, out, at = text[0], [], 1
    while at < len(text):
        char = text[at]
        if char == quote:
            if quote == "'" and text[at + 1 : at + 2] == "'":
                out.append("'")
                at += 2
                continue
            return "".join(out), text[at + 1 :]
        if char == "\\" and quote == '"':
            at = _escape(text, at + 1, out)
            continue
        out.append(char)
        at += 1
    raise _Miss  # it goes on past the line


def _key(content: str) -> tuple[str, str] | None:
    """`(key, rest after the colon)` when `content` is a mapping entry, None when it is no entry at all."""
    if content[0] in "'\"":
        key, after = _quoted(content)
        if after[:1] != ":":
            return None
        rest = after[1:]
        if rest and rest[0] != " ":
            raise _Miss
        return key, rest.lstrip(" ")
    split = content.find(": ")
    if split < 0:
        if not content.endswith(":"):
            return None
        split = len(content) - 1
    text = content[:split].rstrip(" ")
    if len(text) > _MAX_KEY or text == "<<":
        raise _Miss
    try:
        key = go_key(resolve_plain(_plain(text)), None)
    except UnsupportedKeyError:
        raise _Miss from None  # the full loader gives sigs.k8s.io/yaml's error
    return key, content[split + 1 :].lstrip(" ")


def _entry(content: str) -> bool:
    return content == "-" or content.startswith("- ")


def _scalar(rest: str) -> object:
    """A one-line scalar value (after `key: ` or `- `)."""
    if rest[0] in "'\"":
        value, after = _quoted(rest)
        if not _comment_only(after):
            raise _Miss
        return value
    if rest in {"{}", "[]"} or rest.startswith(("{} ", "[] ")):
        if not _comment_only(rest[2:]):
            raise _Miss
        return {} if rest[0] == "{" else []
    cut = rest.find(" #")
    return resolve_plain(_plain((rest if cut < 0 else rest[:cut]).rstrip(" ")))


class _Reader:
    """The lines of one document and the position in them."""

    def __init__(self, lines: list[str], *, complete: bool) -> None:
        self.lines, self.complete, self.at = lines, complete, 0

    def peek(self) -> tuple[int, str] | None:
        """The next line that is neither blank nor a comment, as (indentation, content)."""
        while self.at < len(self.lines):
            line = self.lines[self.at]
            content = line.lstrip(" ")
            if content and content[0] != "#":
                return len(line) - len(content), content
            self.at += 1
        return None

    def node(self, indent: int, depth: int) -> object:
        """The block collection whose first line (at `indent`) is next."""
        upcoming = self.peek()
        if depth > _MAX_DEPTH or upcoming is None or upcoming[0] != indent:
            raise _Miss
        if _entry(upcoming[1]):
            return self.sequence(indent, depth, None)
        if _key(upcoming[1]) is None:
            raise _Miss  # a scalar on a line of its own
        return self.mapping(indent, depth, None)

    def mapping(self, indent: int, depth: int, first: str | None) -> dict[str, object]:
        """A block mapping at `indent`; `first` is its first entry when it follows a `- ` on the same line."""
        if depth > _MAX_DEPTH:  # `- - - …` and `- key:` nest on one line, without passing through `node`
            raise _Miss
        result: dict[str, object] = {}
        while True:
            if first is None:
                upcoming = self.peek()
                if upcoming is None or upcoming[0] < indent:
                    return result
                if upcoming[0] > indent:
                    raise _Miss
                first = upcoming[1]
                self.at += 1
            entry = _key(first)
            if entry is None or entry[0] in result:
                raise _Miss  # not an entry, or a repeated key (the full loader applies go-yaml's rule)
            result[entry[0]] = self.value(entry[1], indent, depth, in_mapping=True)
            first = None

    def sequence(self, indent: int, depth: int, first: str | None) -> list[object]:
        """A block sequence whose `-` marks sit at `indent`; `first` is its first entry when it follows a `- `."""
        if depth > _MAX_DEPTH:
            raise _Miss
        items: list[object] = []
        while True:
            if first is None:
                upcoming = self.peek()
                if upcoming is None or upcoming[0] < indent or not _entry(upcoming[1]):
                    return items
                if upcoming[0] > indent:
                    raise _Miss
                first = upcoming[1]
                self.at += 1
            rest = first[1:].lstrip(" ")
            items.append(self.item(rest, indent, indent + len(first) - len(rest), depth))
            first = None

    def item(self, rest: str, indent: int, column: int, depth: int) -> object:
        """What follows a `- ` at `indent`; `- key: value` opens a mapping at `column`, `- - x` a sequence."""
        if _entry(rest):
            return self.sequence(column, depth + 1, rest)
        if rest and rest[0] != "#" and _key(rest) is not None:
            return self.mapping(column, depth + 1, rest)
        return self.value(rest, indent, depth, in_mapping=False)

    def value(self, rest: str, indent: int, depth: int, *, in_mapping: bool) -> object:
        """What follows `key:` (`in_mapping`) or `- ` on a line whose key or dash sits at `indent`."""
        if not rest or rest[0] == "#":
            upcoming = self.peek()
            if upcoming is not None and upcoming[0] > indent:
                return self.node(upcoming[0], depth + 1)
            if in_mapping and upcoming is not None and upcoming[0] == indent and _entry(upcoming[1]):
                return self.sequence(indent, depth + 1, None)  # go-yaml writes a key's list at the key's indentation
            return None
        if rest[0] == "|":
            return self.literal(rest[1:], indent)
        if _entry(rest):
            raise _Miss
        value = _scalar(rest)
        upcoming = self.peek()
        if upcoming is not None and upcoming[0] > indent:
            raise _Miss  # the scalar goes on over the next line
        return value

    def _block_indent(self, header: str, indent: int) -> tuple[int, str]:
        """The content indentation and chomping of a literal block scalar, from its header."""
        chomp = next((c for c in header[:2] if c in "+-"), "")
        digit = next((c for c in header[:2] if c in "123456789"), "")
        if not _comment_only(header[len(chomp) + len(digit) :]) or self.at >= len(self.lines):
            raise _Miss
        first = self.lines[self.at]
        spaces = len(first) - len(first.lstrip(" "))
        width = indent + int(digit) if digit else spaces
        if not first.strip(" ") or spaces <= indent or spaces < width:
            raise _Miss  # leading blank lines or an empty block: rare, and left to the full loader
        return width, chomp

    def literal(self, header: str, indent: int) -> str:
        """A literal block scalar (`|`, `|-`, `|+`, `|2`…) for a key or dash at `indent`."""
        width, chomp = self._block_indent(header, indent)
        lines: list[str] = []
        while self.at < len(self.lines):
            line = self.lines[self.at]
            if line.strip(" ") and len(line) - len(line.lstrip(" ")) < width:
                break
            lines.append(line[width:] if len(line) > width else "")
            self.at += 1
        else:
            if not self.complete:
                raise _Miss  # no line break after the last line
        content = len(lines)
        while not lines[content - 1]:  # trailing line breaks (a line of spaces past `width` is content)
            content -= 1
        text = "\n".join(lines[:content])
        if chomp == "-":
            return text
        return text + "\n" * (1 + (len(lines) - content if chomp == "+" else 0))


def decode(text: str) -> object:
    """The value of the one document `text`, exactly as the full loader gives it, or `MISS`."""
    if any(char in text for char in _REFUSED):
        return MISS
    lines = text.split("\n")
    complete = lines[-1] == ""
    if complete:
        lines.pop()
    if any(line.startswith(("---", "...", "%")) for line in lines):
        return MISS  # document markers and directives
    reader = _Reader(lines, complete=complete)
    try:
        value = reader.node(0, 0)
    except _Miss:
        return MISS
    return value if reader.peek() is None else MISS
