"""Differential fuzz of the fast YAML path (goyaml/quick.py) against the full loader: seeded, thousands of documents.

Two generators: a grammar of block mappings and sequences whose pieces cover the subset and its near misses (odd
indentation, `- - x`, keys with colons and quotes, `#` inside scalars, trailing spaces, unicode, empty values, `~`,
YAML 1.1 booleans and numbers, repeated and merge keys, tabs, very long keys and lines, deep nesting), and mutations
(a few inserted, deleted or re-indented characters and lines) of documents our go-yaml emitter writes. For every
document the fast path either answers MISS or gives exactly the full loader's value; it never reads what the full
loader refuses.
"""

from __future__ import annotations

import random

import pytest

from ocivendir.goyaml import emit, quick
from ocivendir.goyaml.load import _full
from tests.unit.test_goyaml_quick import EDGES, IMAGES_YML, KAPP_CONFIG, STRINGS, _value, same

SCALARS = [
    "a", "b c", "x:y", "x: y", "k#v", "k #v", "'q'", "'it''s'", '"d\\tq"', '"\\x41"', "~", "null", "Null", "NULL",
    "yes", "No", "on", "OFF", "y", "n", "true", "True", "0", "-1", "+1", "0755", "0o17", "0x1F", "0b101", "1_000",
    "1e3", "1.5e-3", ".inf", "-.Inf", ".nan", "2024-01-01", "12:30:00", "1:20", "é", "ü ß", "\u00a0x", "a\u00a0", "",
    " ", "-", "- x", "--", "?", ":", "? x", "{}", "[]", "{a: 1}", "[1, 2]", "&a x", "*a", "!!str 1", "!x y", "|",
    "|-", "|+", ">", "|2", "#c", "x # c", "x#c", "@x", "`x", "%x", "'unterminated", '"unterminated', "'a' b",
    '"a" b', "x" * 120, "a" * 1030, "<<", "=", "0.", ".5", "+.5", "1__0", "0x", "0b", "-0", "1e", "e3", "0o8", "08",
    "09.5", "1,000", "true ", "1 ", "'x' #c", "'x'#c", '"x" # c', "[] x", "{} #c", "-x", "x-", "a:b:c", "a: b: c",
    "\u2028", "\ufeff", "😀", "\\", "'\\'", '"\\"', '"\\\\"', "tab\tx", "x ", "x  ", "+", ".", "..", "...", "---",
]  # fmt: skip
KEYS = [
    "a", "b", "k", "a b", "'a'", '"b"', "a:b", "1", "yes", "~", "null", "<<", "'<<'", "-a", "?a", "a#b", "a #b", "é",
    "", "''", "x" * 50, "0x1", "1.0", "true", "[a]", "{a}", "- a", "a ", "'a' ", '"a\\tb"', "&a k", "*a", "!t k",
]  # fmt: skip
PIECES = [
    " ", "  ", "-", "- ", ":", ": ", "#", " #", "'", '"', "\\", "|", "|-", ">", "?", "~", "\n", "\n  ", "{", "}", "[",
    "]", ",", "&", "*", "!", "%", "@", "é", "\u00a0", "0", "x", "yes", "null", "\t", "<<: ", "---", "\r",
]  # fmt: skip


def _entry(rng: random.Random, depth: int, pad: str, indent: int) -> list[str]:
    key, sep = rng.choice(KEYS), rng.choice([": ", ":", ":  ", " : ", ": "])
    roll = rng.random()
    if roll < 0.5 or depth > 5:
        line = f"{pad}{key}{sep}{rng.choice(SCALARS)}"
        return [line.rstrip(" ") if rng.random() < 0.8 else line]
    if roll < 0.6:
        lines = [f"{pad}{key}:{rng.choice(['', ' ', ' # c', '#c', ' |', ' |-', ' |+', ' |2', ' >'])}"]
        column = indent + rng.choice([0, 1, 2, 2, 4])
        lines += [" " * max(0, column + rng.choice([0, 0, 1, -1])) + rng.choice([*SCALARS, "", "  "])
                  for _ in range(rng.randint(0, 3))]  # fmt: skip
        return lines
    return [
        f"{pad}{key}:" + rng.choice(["", "", " ", " # c"]),
        *_block(rng, depth + 1, indent + rng.choice([0, 1, 2, 2, 3, 4])),
    ]


def _item(rng: random.Random, depth: int, pad: str, indent: int) -> list[str]:
    dash, roll = rng.choice(["- ", "- ", "-  ", "-", "- - ", "-\t"]), rng.random()
    if roll < 0.5 or depth > 5:
        return [f"{pad}{dash}{rng.choice(SCALARS)}"]
    if roll < 0.75:
        inner = _block(rng, depth + 1, indent + len(dash))
        return [f"{pad}{dash}{inner[0].lstrip(' ')}", *inner[1:]] if inner else []
    return [f"{pad}-" + rng.choice(["", " ", " # c"]), *_block(rng, depth + 1, indent + rng.choice([0, 1, 2, 2, 3]))]


def _block(rng: random.Random, depth: int, indent: int) -> list[str]:
    """A block mapping or sequence at `indent`, each entry a scalar, a block scalar or a nested block."""
    make = _entry if rng.random() < 0.5 else _item
    lines = [line for _ in range(rng.randint(1, 4)) for line in make(rng, depth, " " * indent, indent)]
    if rng.random() < 0.1:
        lines.insert(rng.randrange(len(lines) + 1), " " * rng.randint(0, 4) + rng.choice(["# c", "", "#", "  "]))
    return lines


def _mutated(rng: random.Random, text: str) -> str:
    for _ in range(rng.randint(1, 3)):
        at, roll = rng.randrange(len(text) + 1), rng.random()
        if roll < 0.4:
            text = text[:at] + rng.choice(PIECES) + text[at:]
        elif roll < 0.7:
            text = text[:at] + text[at + rng.randint(1, 3) :]
        else:
            lines = text.split("\n")
            row = rng.randrange(len(lines))
            lines[row] = rng.choice(
                [lines[row] * 2, " " + lines[row], lines[row][1:], lines[row] + " # c", lines[row] + " "]
            )
            text = "\n".join(lines)
    return text


def _verdict(document: str) -> str | None:
    """None when the fast path agrees with the full loader (or answers MISS), else what went wrong."""
    value = quick.decode(document)
    if value is quick.MISS:
        return None
    try:
        expected = _full(document, strict=False)
    except Exception as exc:  # noqa: BLE001 - whatever the full loader refuses with, the fast path must not read it
        return f"read {value!r}; the full loader refuses it: {type(exc).__name__}: {exc}"
    return None if same(value, expected) else f"read {value!r}; the full loader reads {expected!r}"


def _check(documents: list[str]) -> int:
    read, wrong = 0, []
    for document in documents:
        verdict = _verdict(document)
        read += quick.decode(document) is not quick.MISS
        if verdict is not None:
            wrong.append((document, verdict))
    assert not wrong, wrong[:5]
    return read


@pytest.mark.parametrize("seed", range(3))
def test_grammar_documents_are_read_as_the_full_loader_reads_them_or_missed(seed: int) -> None:
    rng = random.Random(seed)  # noqa: S311 - reproducible documents, not secrets
    documents = ["\n".join(_block(rng, 0, 0)) + ("\n" if rng.random() < 0.9 else "") for _ in range(1500)]
    assert _check(documents) > 50  # the grammar reaches into the subset, not only around it


@pytest.mark.parametrize("seed", range(3))
def test_mutated_go_yaml_documents_are_read_as_the_full_loader_reads_them_or_missed(seed: int) -> None:
    rng = random.Random(seed)  # noqa: S311 - reproducible documents, not secrets
    bases = [KAPP_CONFIG, IMAGES_YML.removeprefix("---\n"), *EDGES]
    bases += [emit.dump({"k": _value(rng, 0, STRINGS), "z": _value(rng, 0, STRINGS)}).decode() for _ in range(100)]
    assert _check([_mutated(rng, rng.choice(bases)) for _ in range(1500)]) > 200
