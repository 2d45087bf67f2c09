"""jsonread.loads against json.loads: seeded generated documents, their mutations, and hostile inputs.

For every input both give the same value (NaN compared as NaN, key order and types included) or raise the same
exception type with the same message (and, for JSONDecodeError, the same position).
"""

from __future__ import annotations

import codecs
import json
import math
import random

import pytest

from ocivendir import jsonread
from tests.support.fresh import fresh_python

ATOMS = [
    "0", "-0", "1", "-1", "12345678901234567890123456789", "1.5", "-2.5e-3", "1E400", "-1e-400", "0.0", "1e5",
    "NaN", "Infinity", "-Infinity", "true", "false", "null", '""', '"a"', '"é"', '"\\u00e9"', '"\\ud800"',
    '"\\udc00\\ud800"', '"\\ud83d\\ude00"', '"😀"', '"\\n\\t\\"\\\\\\/"', '"' + "x" * 300 + '"', "9" * 5000,
]  # fmt: skip
BAD_ATOMS = [
    '"tab\there"', '"\\x41"', "01", "1.", ".5", "+1", "-", "1e", "nan", "inf", "True", "NULL", '"\\u12"', "'a'",
]  # fmt: skip
KEYS = ['"a"', '"b"', '"a"', '""', '"é"', '"\\u0061"', '"mediaType"', '"size"']
BAD_KEYS = ["1", "a", "'k'", "null"]
SPACE = ["", "", " ", "  ", "\n", "\t", "\r\n"]
BAD_SPACE = ["\u00a0", "\x0b", "\x0c", "\ufeff"]
NOISE = ["{", "}", "[", "]", ",", ":", '"', "\\", " ", "\n", "0", "-", "e", ".", "x", "\x00", "\ufeff", "\ud800", "😀"]


def _pick(rng: random.Random, good: list[str], bad: list[str]) -> str:
    return rng.choice(bad if rng.random() < 0.01 else good)  # mostly valid documents


def _doc(rng: random.Random, depth: int = 0) -> str:
    roll = rng.random()

    def pad() -> str:
        return _pick(rng, SPACE, BAD_SPACE)

    if roll < 0.4 or depth > 6:
        return _pick(rng, ATOMS, BAD_ATOMS)
    if roll < 0.7:
        items = [_doc(rng, depth + 1) for _ in range(rng.randint(0, 4))]
        return "[" + pad() + ("," + pad()).join(items) + pad() + "]"
    pairs = [pad() + _pick(rng, KEYS, BAD_KEYS) + pad() + ":" + pad() + _doc(rng, depth + 1)
             for _ in range(rng.randint(0, 4))]  # fmt: skip
    return "{" + ",".join(pairs) + pad() + "}"


def _mutate(rng: random.Random, text: str) -> str:
    chars = list(text)
    for _ in range(rng.randint(1, 3)):
        at = rng.randint(0, len(chars))
        roll = rng.random()
        if roll < 0.4 and chars:
            del chars[min(at, len(chars) - 1)]
        elif roll < 0.8:
            chars.insert(at, rng.choice(NOISE))
        else:
            chars[at:at] = list(rng.choice(ATOMS))
    return "".join(chars)


def _outcome(load: object, data: object) -> tuple[object, ...]:
    try:
        value = load(data)  # type: ignore[operator]
    except json.JSONDecodeError as exc:
        return ("JSONDecodeError", exc.msg, exc.pos, exc.lineno, exc.colno, exc.doc == data or isinstance(data, bytes))
    except (ValueError, TypeError, RecursionError) as exc:
        return (type(exc).__name__, str(exc))
    return ("value", _canonical(value))


def _canonical(value: object) -> object:
    if isinstance(value, float) and math.isnan(value):
        return ("nan",)
    if isinstance(value, dict):
        return ("dict", [(k, _canonical(v)) for k, v in value.items()])
    if isinstance(value, list):
        return ("list", [_canonical(v) for v in value])
    return (type(value).__name__, value)


def _same(data: object) -> None:
    expected = _outcome(json.loads, data)
    if expected[0] == "RecursionError":  # the one difference: too deep is invalid JSON, not a crash
        assert _outcome(jsonread.loads, data)[:2] == ("JSONDecodeError", "Nested too deeply"), repr(data)[:300]
        return
    assert _outcome(jsonread.loads, data) == expected, repr(data)[:300]


def _encodings(text: str) -> list[bytes]:
    found = [text.encode("utf-8", "surrogatepass")]
    try:
        found += [text.encode(codec) for codec in ("utf-16-le", "utf-16-be", "utf-32-le", "utf-32-be", "utf-16")]
        found += [codecs.BOM_UTF8 + text.encode(), text.encode("utf-32")]
    except UnicodeEncodeError:
        pass
    return found


@pytest.mark.parametrize("seed", range(2))
def test_generated_documents_and_their_mutations_read_as_json_loads_reads_them(seed: int) -> None:
    rng = random.Random(seed)  # noqa: S311 - a seeded generator of test input
    values = 0
    for _ in range(1500):
        text = _pick(rng, SPACE, BAD_SPACE) + _doc(rng) + _pick(rng, SPACE, BAD_SPACE)
        for candidate in (text, _mutate(rng, text)):
            _same(candidate)
            values += _outcome(json.loads, candidate)[0] == "value"
            for data in _encodings(candidate):
                _same(data)
                _same(bytearray(data))
    assert values > 1000  # the generator must mostly produce valid documents, not only errors


HOSTILE: list[object] = [
    "", " ", "\n\t\r ", "[", "]", "{", "[1,]", '{"a":1,}', "[1] [2]", "[1] x", "[1]\n\n", "  null  ", "nul", "tru",
    '"\\ud800"', '"\\udfff\\ud800x"', '"\ud800"', "\ufeff[]", "\ufeff", "[\ufeff]", "1" * 10000, "-" + "1" * 4301,
    "1" * 4300, "1e" + "9" * 400, "[" * 200 + "]" * 200, "[" * 100000, "{" * 5000, '{"a":' * 100000,
    '{"a": 1, "a": 2}', '{"a": 1, "b": {"a": 3}, "a": [4]}', "[NaN, Infinity, -Infinity]", "[-NaN]", "[+Infinity]",
    '"\x00"', '"\x1f"', '"a\nb"', '"\\u0000"', "[1\x00]", "\x00", "0x10", "[.5]", "[1.e5]", "1 2", "{} {}",
    b"", b"\xef\xbb\xbf", b"\xef\xbb\xbf[1]", b"\xef\xbb\xbf\xef\xbb\xbf[1]", b"\xff\xfe", b"\xfe\xff\x00[\x00]",
    b"\xff", b"[\xc3]", b'"\xed\xa0\x80"', b"\x00\x00\x00[", b"[\x00\x00\x00", b"\x00[", b"[\x00", b"1\x00",
    b"\x00\x00\x00\x31", b'{"a":\xf0\x9f\x98\x80}', bytearray(b"[1, 2]"), 1, None, [1], memoryview(b"[]"),
]  # fmt: skip


@pytest.mark.parametrize("data", HOSTILE, ids=lambda d: repr(d)[:40])
def test_hostile_inputs_give_the_same_value_or_the_same_error(data: object) -> None:
    _same(data)


def test_reading_a_document_imports_neither_json_nor_re() -> None:
    code = (
        "import sys; from ocivendir import jsonread;"
        "assert jsonread.loads(bytes([91, 49, 44, 34, 120, 34, 93])) == [1, 'x'];"  # b'[1,"x"]'
        "print(sorted(m for m in ('json', 're', 'json.decoder') if m in sys.modules))"
    )
    done = fresh_python(code)
    assert done.stdout.strip() == "[]"
