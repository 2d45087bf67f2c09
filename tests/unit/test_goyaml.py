"""goyaml writes what sigs.k8s.io/yaml (go-yaml v2) writes, byte for byte (vendir-compat spec §6.2)."""

from __future__ import annotations

import pytest

from ocivendir.goyaml import emit as goyaml
from ocivendir.goyaml.scalars import resolve_plain


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        *[(s, f'"{s}"') for s in ["0", "0755", "08", "1_000", "-1", "+1", ".5", "1.5", "1e3", "0x1F"]],
        *[(s, f'"{s}"') for s in ["y", "n", "yes", "on", "true", "null", "~", "Y", "NO", "Off"]],
        ("2024-01-01", '"2024-01-01"'),
        ("12:30", '"12:30"'),
        *[(s, f"'{s}'") for s in ["-", "a: b", "#x", "@at", "*s", "!t", "%p", "`b", "c:", "[a]", "{a}", "?",
                                  "trailing space "]],
        ("'q", "'''q'"),
        *[(s, s) for s in ["x y", ":c", "a#b", "x-y", "a,b", "=", "<<", "ümlaut ok", "index.docker.io/x@sha256:ab",
                           "example.com/app:latest", "-x", "1.0.0-rc.1x"]],
        ("tab\there", '"tab\\there"'),
        ("bell\ax", '"bell\\ax"'),
        ("x\r\ny", '"x\\r\\ny"'),
        ("", '""'),
    ],
)  # fmt: skip
def test_scalar_styles_match_go_yaml(value: str, expected: str) -> None:
    assert goyaml.scalar(value) == expected


def test_literal_blocks_carry_chomping_and_indentation_hints() -> None:
    assert goyaml.dump({"k": "line one\nline two\n"}) == b"k: |\n  line one\n  line two\n"
    assert goyaml.dump({"k": "no trailing\nnewline"}) == b"k: |-\n  no trailing\n  newline\n"
    assert goyaml.dump({"k": "two trailing\n\n"}) == b"k: |+\n  two trailing\n\n"
    assert goyaml.dump({"k": "  leading spaces\nx\n"}) == b"k: |2\n    leading spaces\n  x\n"


def test_keys_sort_in_natural_order() -> None:
    keys = ["é", "b1", "b/2", "b-1", "aB", "a10", "a09", "a9", "a008", "a_b", "a.b", "Z", "A", "10", "2", "1"]
    dumped = goyaml.dump(dict.fromkeys(keys, 1)).decode().splitlines()
    order = [line.split(":")[0].strip('"') for line in dumped]
    assert order == ["1", "2", "10", "A", "Z", "a.b", "a_b", "a008", "a9", "a09", "a10", "aB", "b-1", "b/2", "b1", "é"]


def test_kapp_controller_lock_shape_is_byte_exact() -> None:
    lock = {
        "apiVersion": "vendir.k14s.io/v1alpha1",
        "kind": "LockConfig",
        "directories": [{"path": "0", "contents": [{"path": ".", "inline": {}}]}],
    }
    expected = (
        b'apiVersion: vendir.k14s.io/v1alpha1\ndirectories:\n- contents:\n  - inline: {}\n    path: .\n  path: "0"\n'
        b"kind: LockConfig\n"
    )
    assert goyaml.dump(lock) == expected


def test_empty_collections_and_nulls() -> None:
    assert goyaml.dump({"a": [], "b": {}, "c": None, "d": True, "e": 493}) == (
        b"a: []\nb: {}\nc: null\nd: true\ne: 493\n"
    )


def test_long_plain_values_fold_past_column_80() -> None:
    value = " ".join(["word"] * 19)  # 94 characters
    out = goyaml.dump({"key": value}).decode()
    first, second = out.splitlines()
    assert len(first) > 80
    assert second.startswith("  word")
    assert " ".join(out.replace("\n  ", " ").split()) == "key: " + value


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ({"k": "a\u2028b"}, "k: 'a\u2028  b'\n"),  # LS is a line break: the text after it is indented
        ({"k": "x\u2029y\n"}, "k: |\n  x\u2029  y\n"),
        ({"k": "a\x85b\nc"}, 'k: "a\\Nb\\nc"\n'),  # NEL is no printable character for go-yaml's emitter
        ({"k": "\u2028lead\nx"}, "k: |2-\n\u2028  lead\n  x\n"),  # a leading break takes the indentation hint
        ({"k": "x\ry"}, 'k: "x\\ry"\n'),
        ({"k": "a \u2028b"}, 'k: "a \\Lb"\n'),  # a space before a break: neither quotes nor a block
        ({"k": "\ufeffa b"}, 'k: "\\uFEFF\\x61\\x20\\x62"\n'),  # go-yaml's is_bom looks at the start of the text
        ({"k": "\U0001f600"}, 'k: "\\U0001F600"\n'),
    ],
)  # fmt: skip
def test_breaks_and_special_characters_are_written_as_go_yaml_writes_them(value: dict[str, str], expected: str) -> None:
    assert goyaml.dump(value).decode() == expected


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ({"a\nb": "c"}, "? |-\n  a\n  b\n: c\n"),
        ({"k" * 129: "v"}, f"? {'k' * 129}\n: v\n"),  # a simple key is at most 128 bytes
        ({"é" * 64: "v"}, f"{'é' * 64}: v\n"),
        ({"é" * 65: "v"}, f"? {'é' * 65}\n: v\n"),
        ({"\u2028": "v"}, "? '\u2028'\n: v\n"),
        ({"k": [{"a\nb": ["x"]}]}, "k:\n- ? |-\n    a\n    b\n  : - x\n"),
    ],
)  # fmt: skip
def test_keys_that_span_lines_or_pass_128_bytes_take_the_question_mark_form(
    value: dict[str, object], expected: str
) -> None:
    assert goyaml.dump(value).decode() == expected


def test_a_checked_dump_refuses_what_would_read_back_as_other_data() -> None:
    data = {"k": "a\u2028b", "n": None, "i": 493, "t": True, "l": [{}], "e": []}
    assert goyaml.dump_checked(data) == goyaml.dump(data)
    with pytest.raises(goyaml.EmitError, match=r"would not read back: .*map merge"):
        goyaml.dump_checked({"<<": "x"})  # go-yaml writes `<<: x` plain and reads it as a merge
    with pytest.raises(goyaml.EmitError, match="other data"):
        goyaml.dump_checked({"k": True, "<<": {"k": "v"}})  # one key read back, not two
    with pytest.raises(goyaml.EmitError, match="invalid Unicode character escape"):
        goyaml.dump_checked({"tag": "v\ud800"})  # a lone surrogate (a JSON answer may carry one) is escaped


@pytest.mark.parametrize(
    ("text", "expected"),
    [("-10\u0661\u0662", "-10\u0661\u0662"), ("\u0661\u0662", "\u0661\u0662"), ("+-1", "+-1"), ("--1", "--1"),
     ("0x 1F", "0x 1F"), ("0x1F", 31), ("-0x_1f", -31), ("017", 15), ("08", 8.0), ("+12", 12)],
)  # fmt: skip
def test_plain_integers_are_ascii_digits_with_one_sign_as_go_parses_them(text: str, expected: object) -> None:
    value = resolve_plain(text)  # Python's int() would take other scripts' digits, a second sign and spaces
    assert (type(value), value) == (type(expected), expected)
    assert goyaml.dump({"k": text}) == (f"k: {text}\n" if isinstance(expected, str) else f'k: "{text}"\n').encode()
