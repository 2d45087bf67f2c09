"""Owns: a byte-exact emitter of what go-yaml v2 (under sigs.k8s.io/yaml) writes for plain data.

Shared by the vendir lock and imgpkg's images.yml rewrite: go-yaml's key order (`keyorder.py`), then libyaml's
emitter as go-yaml runs it (`writer.py`): its plain/quoted/literal choices, line breaks (LF, CR, NEL, LS, PS), `? `
keys, folding past column 80.
"""

from __future__ import annotations

from ocivendir.goyaml.keyorder import go_sorted
from ocivendir.goyaml.load import DecodeError, load_documents
from ocivendir.goyaml.writer import Writer, analyze, choose_style

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

__all__ = ["EmitError", "dump", "dump_checked", "scalar"]


class EmitError(Exception):
    """What was written would not read back as the data it was written from."""


def scalar(value: object, column: int = 0, indent: int = 0) -> str:
    """One scalar as go-yaml v2 writes it as a mapping's value, starting at `column`, continuing at `indent`."""
    writer = Writer(go_sorted)
    writer.column, writer.indent = column, indent
    if value is None or isinstance(value, bool | int | float):
        writer.scalar(value, simple_key=False)
    else:
        text = str(value)
        writer.write_scalar(text, choose_style(text, analyze(text), simple_key=False), allow_breaks=True)
    return "".join(writer.out)


def dump(value: Mapping[str, object] | Sequence[object]) -> bytes:
    """The document go-yaml v2 writes for plain data (dicts, lists, tuples, strings, numbers, booleans, None)."""
    writer = Writer(go_sorted)
    writer.node(value)
    if writer.column or not writer.whitespace or not writer.indention:
        writer.out.append("\n")  # the document's end: libyaml's final write_indent
    return "".join(writer.out).encode()


def _same(written: object, read: object) -> bool:
    """The same data, types included (True is not 1, a tuple reads back as a list)."""
    if isinstance(written, dict):
        return (
            isinstance(read, dict)
            and len(read) == len(written)
            and all(str(k) in read and _same(v, read[str(k)]) for k, v in written.items())
        )
    if isinstance(written, list | tuple):
        return isinstance(read, list) and len(read) == len(written) and all(map(_same, written, read))
    return type(read) is type(written) and read == written


def dump_checked(value: Mapping[str, object] | Sequence[object]) -> bytes:
    """`dump`, then read back as go-yaml v2 reads it (`load.py`): anything but the same data is an EmitError.

    go-yaml writes some data it cannot read back as written (a `<<` key is taken for a merge, for one); such a
    document is refused rather than written.
    """
    data = dump(value)
    try:
        documents = list(load_documents(data))
    except DecodeError as exc:
        raise EmitError(f"it would not read back: {exc}") from None
    if len(documents) != 1 or not _same(value, documents[0]):
        raise EmitError("it would read back as other data than was written")
    return data
