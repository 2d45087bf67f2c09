"""Owns: libyaml's block emitter as go-yaml v2 runs it, ported: scalar analysis, style choice, the four scalar writers.

The emitter's state is kept as libyaml keeps it (column, indent stack, `whitespace` and `indention`), so what it writes
follows the same rules: CR, LF, NEL (U+0085), LS (U+2028) and PS (U+2029) are line breaks everywhere; a string with
LF is a literal block (written with its other breaks raw, each followed by the indentation), else plain when it reads
back as a string, and libyaml downgrades plain to single quotes and single quotes or blocks to double quotes as its
analysis says; a key that spans lines or is longer than 128 bytes takes the `? ` form; plain, single-quoted and
double-quoted text folds past column 80. Text is counted in characters, as libyaml counts columns.
"""

from __future__ import annotations

from ocivendir.goyaml.implicit import reads_as_string

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Iterable

__all__ = ["Writer"]

_BEST_INDENT = 2
_BEST_WIDTH = 80
_SIMPLE_KEY_BYTES = 128
_BREAKS = frozenset("\r\n\x85\u2028\u2029")
_BLANKZ = frozenset(" \t\0") | _BREAKS  # is_blankz: a blank, a break or NUL
_FIRST_INDICATORS = frozenset("#,[]{}&*!|>'\"%@`")
_ESCAPES = {
    "\0": "0", "\a": "a", "\b": "b", "\t": "t", "\n": "n", "\v": "v", "\f": "f", "\r": "r", "\x1b": "e",
    '"': '"', "\\": "\\", "\x85": "N", "\xa0": "_", "\u2028": "L", "\u2029": "P",
}  # fmt: skip
PLAIN, SINGLE, DOUBLE, LITERAL = "plain", "single", "double", "literal"


def _printable(char: str) -> bool:
    """Libyaml's IS_PRINTABLE as go-yaml v2 has it: LF, ASCII, U+00A0-U+D7FF, U+E000-U+FFFD but the BOM."""
    code = ord(char)
    return (
        code == 0x0A  # noqa: PLR2004
        or 0x20 <= code <= 0x7E  # noqa: PLR2004
        or 0xA0 <= code <= 0xD7FF  # noqa: PLR2004
        or (0xE000 <= code <= 0xFFFD and code != 0xFEFF)  # noqa: PLR2004
    )


class Analysis:
    """What libyaml's analysis of a scalar allows (block context): plain, single quotes, a block; if it spans lines."""

    __slots__ = ("block", "multiline", "plain", "single")

    def __init__(self, *, multiline: bool, plain: bool, single: bool, block: bool) -> None:
        """The four answers."""
        self.multiline, self.plain, self.single, self.block = multiline, plain, single, block


def _indicators(text: str) -> bool:
    """Libyaml's block indicators: what makes plain text read as YAML syntax."""
    first, following = text[0], text[1:2]
    if text.startswith(("---", "...")) or first in _FIRST_INDICATORS:
        return True
    if first in "?:-" and following in {"", " ", "\t"}:
        return True
    for position in range(1, len(text)):
        char = text[position]
        after = text[position + 1 : position + 2]
        if (char == ":" and after in {"", " ", "\t"}) or (char == "#" and text[position - 1] in _BLANKZ):
            return True
    return False


def analyze(text: str) -> Analysis:
    """yaml_emitter_analyze_scalar, for the block context go-yaml writes in."""
    if not text:
        return Analysis(multiline=False, plain=True, single=True, block=False)
    if text.isascii() and text.isprintable():  # the usual case: no breaks, no special characters
        edge_space = text[0] == " " or text[-1] == " "
        plain = not edge_space and not _indicators(text)
        return Analysis(multiline=False, plain=plain, single=True, block=text[-1] != " ")
    special = line_breaks = break_space = space_break = previous_space = previous_break = False
    for char in text:
        special = special or not _printable(char)
        if char == " ":
            break_space = break_space or previous_break
            previous_space, previous_break = True, False
        elif char in _BREAKS:
            line_breaks = True
            space_break = space_break or previous_space
            previous_space, previous_break = False, True
        else:
            previous_space = previous_break = False
    leading_or_trailing = text[0] in _BREAKS or text[-1] in _BREAKS or text[0] == " " or text[-1] == " "
    plain = not (leading_or_trailing or break_space or space_break or special or line_breaks or _indicators(text))
    return Analysis(
        multiline=line_breaks,
        plain=plain,
        single=not (break_space or space_break or special),
        block=not (text[-1] == " " or space_break or special),
    )


def choose_style(text: str, analysis: Analysis, *, simple_key: bool) -> str:
    """go-yaml's encoder request (literal with LF, plain when it reads back, else double) as libyaml adjusts it."""
    style = LITERAL if "\n" in text else PLAIN if reads_as_string(text) else DOUBLE
    if simple_key and analysis.multiline:
        style = DOUBLE
    if style == PLAIN and not analysis.plain:
        style = SINGLE
    if style == SINGLE and not analysis.single:
        style = DOUBLE
    if style == LITERAL and (not analysis.block or simple_key):
        style = DOUBLE
    return style


def _escape(char: str) -> str:
    if char in _ESCAPES:
        return "\\" + _ESCAPES[char]
    code = ord(char)
    if code <= 0xFF:  # noqa: PLR2004
        return f"\\x{code:02X}"
    if code <= 0xFFFF:  # noqa: PLR2004
        return f"\\u{code:04X}"
    return f"\\U{code:08X}"


class Writer:
    """One document being written; `node` writes a value as go-yaml v2 marshals it (keys sorted by `order`)."""

    def __init__(self, order: Callable[[Iterable[str]], list[str]]) -> None:
        """A writer at the start of a stream: column 0, no indentation yet."""
        self.order = order
        self.out: list[str] = []
        self.column = 0
        self.whitespace = True
        self.indention = True
        self.indent = -1
        self.indents: list[int] = []

    # -- libyaml's primitives --------------------------------------------------------------------------------------
    def _put(self, text: str) -> None:
        """Characters without line breaks."""
        self.out.append(text)
        self.column += len(text)

    def _put_break(self) -> None:
        self.out.append("\n")
        self.column = 0

    def _write_break(self, char: str) -> None:
        """A break from the text: LF as a newline, any other break as itself; the column starts again."""
        self.out.append(char)
        self.column = 0

    def _increase_indent(self, *, flow: bool, indentless: bool) -> None:
        self.indents.append(self.indent)
        if self.indent < 0:
            self.indent = _BEST_INDENT if flow else 0
        elif not indentless:
            self.indent += _BEST_INDENT

    def _write_indent(self) -> None:
        indent = max(self.indent, 0)
        if not self.indention or self.column > indent or (self.column == indent and not self.whitespace):
            self._put_break()
        if self.column < indent:
            self._put(" " * (indent - self.column))
        self.whitespace = self.indention = True

    def _indicator(self, text: str, *, need_whitespace: bool, is_whitespace: bool, is_indention: bool) -> None:
        if need_whitespace and not self.whitespace:
            self._put(" ")
        self._put(text)
        self.whitespace = is_whitespace
        self.indention = self.indention and is_indention

    # -- nodes -----------------------------------------------------------------------------------------------------
    def node(self, value: object, *, mapping: bool = False) -> None:
        """A value in block context (`mapping`: it is a mapping's value)."""
        if isinstance(value, dict) and value:
            self._block_mapping(value)
        elif isinstance(value, list | tuple) and value:
            self._block_sequence(value, indentless=mapping and not self.indention)
        elif isinstance(value, dict | list | tuple):
            opening, closing = "{}" if isinstance(value, dict) else "[]"
            self._indicator(opening, need_whitespace=True, is_whitespace=True, is_indention=False)
            self._indicator(closing, need_whitespace=False, is_whitespace=False, is_indention=False)
        else:
            self.scalar(value, simple_key=False)

    def _block_sequence(self, items: list[object] | tuple[object, ...], *, indentless: bool) -> None:
        self._increase_indent(flow=False, indentless=indentless)
        for item in items:
            self._write_indent()
            self._indicator("-", need_whitespace=True, is_whitespace=False, is_indention=True)
            self.node(item)
        self.indent = self.indents.pop()

    def _block_mapping(self, mapping: dict[object, object]) -> None:
        self._increase_indent(flow=False, indentless=False)
        texts = {str(key): key for key in mapping}
        for text in self.order(texts):
            key = texts[text]
            self._write_indent()
            if not analyze(text).multiline and len(text.encode("utf-8", "surrogatepass")) <= _SIMPLE_KEY_BYTES:
                self.scalar(text, simple_key=True)
                self._indicator(":", need_whitespace=False, is_whitespace=False, is_indention=False)
            else:
                self._indicator("?", need_whitespace=True, is_whitespace=False, is_indention=True)
                self.scalar(text, simple_key=False)
                self._write_indent()
                self._indicator(":", need_whitespace=True, is_whitespace=False, is_indention=True)
            self.node(mapping[key], mapping=True)
        self.indent = self.indents.pop()

    def scalar(self, value: object, *, simple_key: bool) -> None:
        """A scalar node: its style chosen, written at one more level of indentation."""
        if value is None or isinstance(value, bool | int | float):
            text = "null" if value is None else str(value).lower() if isinstance(value, bool) else str(value)
            style = PLAIN
        else:
            text = str(value)
            style = choose_style(text, analyze(text), simple_key=simple_key)
        self._increase_indent(flow=True, indentless=False)
        self.write_scalar(text, style, allow_breaks=not simple_key)
        self.indent = self.indents.pop()

    # -- the scalar writers ----------------------------------------------------------------------------------------
    def write_scalar(self, text: str, style: str, *, allow_breaks: bool) -> None:
        """Write `text` in `style` at the current position."""
        if style == LITERAL:
            self._literal(text)
        elif style == DOUBLE:
            self._double_quoted(text, allow_breaks=allow_breaks)
        else:
            if style == SINGLE:
                self._indicator("'", need_whitespace=True, is_whitespace=False, is_indention=False)
            elif not self.whitespace:
                self._put(" ")
            self._flow_text(text, quote=style == SINGLE, allow_breaks=allow_breaks)
            if style == SINGLE:
                self._indicator("'", need_whitespace=False, is_whitespace=False, is_indention=False)
            self.whitespace = self.indention = False

    def _flow_text(self, text: str, *, quote: bool, allow_breaks: bool) -> None:
        """The body of a plain or single-quoted scalar: folded at single spaces past the width, breaks kept."""
        body = text.replace("'", "''") if quote else text
        if self.column + len(body) <= _BEST_WIDTH + 1 and not _BREAKS.intersection(text):
            self._put(body)  # nothing to fold: the usual case
            return
        spaces = breaks = False
        last = len(text) - 1
        for position, char in enumerate(text):
            if char == " ":
                inner = not quote or 0 < position < last
                following = text[position + 1 : position + 2]
                if allow_breaks and not spaces and self.column > _BEST_WIDTH and inner and following != " ":
                    self._write_indent()
                else:
                    self._put(char)
                spaces = True
            elif char in _BREAKS:
                if not breaks and char == "\n":
                    self._put_break()
                self._write_break(char)
                self.indention = breaks = True
            else:
                if breaks:
                    self._write_indent()
                self._put("''" if quote and char == "'" else char)
                self.indention = spaces = breaks = False

    def _double_quoted(self, text: str, *, allow_breaks: bool) -> None:
        self._indicator('"', need_whitespace=True, is_whitespace=False, is_indention=False)
        spaces = False
        last = len(text) - 1
        escape_all = text.startswith("\ufeff")  # go-yaml's is_bom looks at the text's start, not the character
        for position, char in enumerate(text):
            if escape_all or not _printable(char) or char in _BREAKS or char in '"\\':
                self._put(_escape(char))
                spaces = False
            elif char == " ":
                if allow_breaks and not spaces and self.column > _BEST_WIDTH and 0 < position < last:
                    self._write_indent()
                    if text[position + 1] == " ":
                        self._put("\\")
                else:
                    self._put(char)
                spaces = True
            else:
                self._put(char)
                spaces = False
        self._indicator('"', need_whitespace=False, is_whitespace=False, is_indention=False)
        self.whitespace = self.indention = False

    def _literal(self, text: str) -> None:
        self._indicator("|", need_whitespace=True, is_whitespace=False, is_indention=False)
        if text[0] == " " or text[0] in _BREAKS:
            self._indicator(str(_BEST_INDENT), need_whitespace=False, is_whitespace=False, is_indention=False)
        if text[-1] not in _BREAKS:
            chomp = "-"
        elif len(text) == 1 or text[-2] in _BREAKS:
            chomp = "+"
        else:
            chomp = ""
        if chomp:
            self._indicator(chomp, need_whitespace=False, is_whitespace=False, is_indention=False)
        self._put_break()
        self.indention = self.whitespace = True
        breaks = True
        for char in text:
            if char in _BREAKS:
                self._write_break(char)
                self.indention = breaks = True
            else:
                if breaks:
                    self._write_indent()
                self._put(char)
                self.indention = breaks = False
