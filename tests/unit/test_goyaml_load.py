"""The go-yaml v2 loader's budgets: aliasing, nesting depth and undecodable bytes fail fast with go-yaml's texts."""

from __future__ import annotations

import base64
import sys
from types import FrameType

import pytest

from ocivendir.errors import ConfigError
from ocivendir.goyaml import compose as composing
from ocivendir.goyaml.load import DecodeError, load_documents
from ocivendir.oci.imageslock import ImagesLockError, parse_images_lock
from ocivendir.vendir.config import parse_stream
from ocivendir.vendir.lockfile import parse_lock

HEAD = "apiVersion: vendir.k14s.io/v1alpha1\nkind: Config\ndirectories: []\n"
PREFIX = "error converting YAML to JSON: yaml: "


def laughs(levels: int = 9) -> str:
    """The classic billion-laughs document: each level is nine aliases of the one below."""
    lines = ['a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    names = "abcdefghijklmnop"
    lines += [f"{name}: &{name} [{','.join(['*' + names[i]] * 9)}]" for i, name in enumerate(names[1:levels], 0)]
    return "\n".join(lines) + "\n"


def load(data: str | bytes) -> list[object]:
    return list(load_documents(data))


def error(data: str | bytes) -> str:
    with pytest.raises(DecodeError) as caught:
        load(data)
    return str(caught.value)


def anchored(size: int, references: int, filler: int) -> str:
    """One anchor of `size` scalars referenced `references` times, after `filler` plain scalars."""
    return (
        f"{HEAD}f: [{','.join(['p'] * filler)}]\n"
        f"x: &a [{','.join(['s'] * size)}]\ny: [{','.join(['*a'] * references)}]\n"
    )


def test_a_billion_laughs_in_under_400_bytes_is_refused_with_go_yamls_message() -> None:
    document = laughs()
    assert len(document) < 400
    assert error(document) == PREFIX + "document contains excessive aliasing"


def test_the_budget_counts_what_go_yaml_counts_without_expanding_anything() -> None:
    built = composing._build(composing._parser_events(laughs()))
    assert built is not None
    sizes: dict[composing.Node, int] = {}
    # i's expansion alone is 9**8 lols plus every list and alias node on the way: far past go-yaml's 400,000
    assert composing.decode_size(built.children[-1], sizes) > 9**8
    assert len(sizes) < 120  # the nodes of the document, each sized once
    with pytest.raises(composing.ComposeError, match="excessive aliasing"):
        composing.check_aliasing(built)


def test_the_alias_budget_boundary_is_go_yamls() -> None:
    # vendir 0.40.0 accepts 498 references of a 200-item anchor after 300 plain items and refuses 499
    assert load(anchored(200, 498, 300))
    assert error(anchored(200, 499, 300)) == PREFIX + "document contains excessive aliasing"


def test_aliases_deep_inside_a_document_cost_no_scan_of_the_open_nodes() -> None:
    """Checking that an alias is not inside its own anchor scanned every open node: aliases times depth steps."""
    depth, aliases = 900, 2000
    document = "a: &a x\nb: " + "[" * depth + ", ".join(["*a"] * aliases) + "]" * depth + "\n"
    calls = 0

    def count(frame: FrameType, event: str, _arg: object) -> None:
        nonlocal calls
        if event == "call" and frame.f_code.co_filename == composing.__file__:
            calls += 1

    sys.setprofile(count)
    try:
        root = composing.compose(document)
    finally:
        sys.setprofile(None)
    assert root is not None
    assert calls < 10 * (depth + aliases)  # linear in the nodes; the scan resumed a generator 1.8 million times


def test_moderate_aliasing_is_kept_and_shares_the_anchored_value() -> None:
    doc = load(HEAD + "base: &b {url: r.io/app, size: 1}\nuses: [*b, *b, *b]\n")[0]
    assert isinstance(doc, dict)
    assert doc["uses"] == [{"url": "r.io/app", "size": 1}] * 3


@pytest.mark.parametrize(
    ("document", "message"),
    [
        ("x: &a [*a]\n", "anchor 'a' value contains itself"),
        ("x: &a {k: *a}\n", "anchor 'a' value contains itself"),
        ("x: *zz\n", "unknown anchor 'zz' referenced"),
        ("x: [a\n", "line 1: did not find expected ',' or ']'"),
    ],
)
def test_anchor_and_syntax_errors_use_go_yamls_texts(document: str, message: str) -> None:
    assert error(document) == PREFIX + message


@pytest.mark.parametrize(
    ("document", "line"),
    [
        ("k: v\nx: " + "[" * 20_000 + "]" * 20_000 + "\n", 2),
        ("k: v\nx: " + "{a: " * 5_000 + "1" + "}" * 5_000 + "\n", 2),
        ("k:\n" + "".join(" " * i + "- \n" for i in range(1_100)), 1001),
    ],
    ids=["flow-sequences", "flow-mappings", "block-sequences"],
)
def test_nesting_is_bounded_and_never_reaches_the_recursion_limit(document: str, line: int) -> None:
    assert error(document) == PREFIX + f"line {line}: exceeded max depth of {composing.MAX_DEPTH}"


def test_nesting_within_the_bound_decodes_without_recursion() -> None:
    depth = composing.MAX_DEPTH - 1
    value = load("[" * depth + "1" + "]" * depth + "\n")[0]
    for _ in range(depth):
        assert isinstance(value, list)
        value = value[0]
    assert value == 1


@pytest.mark.parametrize(
    ("data", "problem"),
    [
        (b"\x00\x01\xff\xfe binary \x89PNG\r\n", "control characters are not allowed"),
        (b"kind: Config\x07\n", "control characters are not allowed"),
        (b"kind: Config\x7f\n", "control characters are not allowed"),
        (b"kind: Config\x1b\n", "control characters are not allowed"),
        ("kind: Config\x1b é\n".encode(), "control characters are not allowed"),
        ("kind: é\ufffe\n".encode(), "control characters are not allowed"),
        (b"x: caf\xe9\n", "incomplete UTF-8 octet sequence"),
        (b"x: caf\xe9 au lait\n", "invalid trailing UTF-8 octet"),
        (b"x: \xff\n", "invalid leading UTF-8 octet"),
        (b"x: \xc0\x80\n", "invalid length of a UTF-8 sequence"),
        (b"x: \xed\xa0\x80\n", "invalid Unicode character"),
        (b"\xff\xfex\x00:", "incomplete UTF-16 character"),
    ],
)
def test_undecodable_bytes_fail_with_go_yamls_reader_texts(data: bytes, problem: str) -> None:
    assert error(data) == PREFIX + problem


def test_byte_order_marks_choose_the_encoding() -> None:
    assert load("x: é\n".encode("utf-16")) == [{"x": "é"}]
    assert load(b"\xef\xbb\xbfx: 1\n") == [{"x": 1}]


def test_every_yaml_input_has_the_budget() -> None:
    with pytest.raises(ConfigError, match="Unmarshaling doc: error converting YAML to JSON: yaml: document contains"):
        parse_stream([("-", (HEAD + laughs()).encode())])
    with pytest.raises(ConfigError, match=r"Unmarshaling lock config: .*excessive aliasing"):
        parse_lock(laughs().encode(), "vendir.lock.yml")
    with pytest.raises(ImagesLockError, match=r"Unmarshaling images lock: .*excessive aliasing"):
        parse_images_lock(laughs().encode())
    with pytest.raises(ConfigError, match=r"Unmarshaling doc: .*control characters are not allowed"):
        parse_stream([("vendir.yml", b"\x00\x01binary")])


def test_without_libyaml_the_pure_parser_has_the_same_depth_bound(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delattr(composing.yaml, "CSafeLoader")
    depth = composing.MAX_DEPTH + 1
    assert error("k: v\nx: " + "[" * depth + "]" * depth + "\n") == PREFIX + "line 2: exceeded max depth of 1000"
    assert error(laughs()) == PREFIX + "document contains excessive aliasing"


def merged(filler: int, merges: int, size: int) -> str:
    """One anchored map of `size` keys merged `merges` times through one `<<` list, after `filler` plain scalars."""
    keys = ", ".join(f"k{i}: v" for i in range(size))
    return f"{HEAD}f: [{','.join(['p'] * filler)}]\nx: &a {{{keys}}}\ny:\n  <<: [{', '.join(['*a'] * merges)}]\n"


def test_merges_spend_the_alias_budget_as_go_yaml_counts_them() -> None:
    # vendir 0.40.0 accepts 498 merges of a 100-key map after 300 plain items and refuses 499; counting the `<<` key
    # and the merged list as decode steps (go-yaml decodes neither) would accept 499
    assert load(merged(300, 498, 100))
    assert error(merged(300, 499, 100)) == PREFIX + "document contains excessive aliasing"


def test_a_billion_laughs_made_of_merges_is_refused() -> None:
    lines = ["a: &a {" + ", ".join(f"k{i}: lol" for i in range(9)) + "}"]
    names = "abcdefghij"
    lines += [f"{name}: &{name} {{<<: [{', '.join(['*' + names[i]] * 9)}]}}" for i, name in enumerate(names[1:], 0)]
    assert error("\n".join(lines) + "\n") == PREFIX + "document contains excessive aliasing"


def test_merge_keys_follow_go_yaml_v2() -> None:
    doc = load(
        "b: &b {p: base, q: base}\n"
        "before: {p: mine, <<: *b}\n"  # v2 sets entries in order: the merge overwrites what came before it
        "after: {<<: *b, p: mine}\n"
        "list: {<<: [{p: first}, *b, {s: last}]}\n"  # earlier maps of a list win
        "quoted: {'<<': *b}\n"  # only a plain << merges
    )[0]
    assert doc == {
        "b": {"p": "base", "q": "base"},
        "before": {"p": "base", "q": "base"},
        "after": {"p": "mine", "q": "base"},
        "list": {"p": "first", "q": "base", "s": "last"},
        "quoted": {"<<": {"p": "base", "q": "base"}},
    }


@pytest.mark.parametrize("value", ["1", "", "[a]", "[{a: b}, c]", "[[{a: b}]]"])
def test_a_merge_of_anything_but_maps_is_go_yamls_error(value: str) -> None:
    assert error(f"l: &l [{{a: b}}]\nm: {{<<: {value or '*l'}}}\n") == (
        PREFIX + "map merge requires map or sequence of maps as the value"
    )


def test_duplicate_keys_the_later_wins_unless_strict() -> None:
    document = "a: 1\nb:\n  c: 2\na:\n  3\nb: {}\n"
    assert load(document) == [{"a": 3, "b": {}}]
    with pytest.raises(DecodeError) as caught:
        list(load_documents(document, strict=True))
    # imgpkg 0.43.1's text: every error, each with the line of the value set twice
    assert str(caught.value) == (
        PREFIX + 'unmarshal errors:\n  line 5: key "a" already set in map\n  line 6: key "b" already set in map'
    )


def test_strict_refuses_a_merge_over_a_key_already_set() -> None:
    document = "base: &b\n  tag: x\nbundle:\n  <<: *b\n  image: i\n  tag: z\n"
    with pytest.raises(DecodeError, match=r'unmarshal errors:\n  line 6: key "tag" already set in map$'):
        list(load_documents(document, strict=True))
    assert load(document)[0] == {"base": {"tag": "x"}, "bundle": {"tag": "z", "image": "i"}}


def test_tabs_and_line_breaks_are_printable() -> None:
    assert load(b"a: b\tc\r\nd: 'e\tf'\n") == [{"a": "b\tc", "d": "e\tf"}]


def test_binary_bytes_become_text_as_encoding_json_writes_them() -> None:
    # Go 1.22's json.Marshal of the same bytes: one U+FFFD for each byte that starts no valid UTF-8 sequence
    data = bytes([0xE2, 0x82, 0x41, 0xFF, 0xFE, 0x6F, 0x6B, 0xED, 0xA0, 0x80, 0xF0, 0x9F, 0x98, 0x80, 0xF0, 0x9F, 0x98,
                  0xC0, 0x80])  # fmt: skip
    document = f"a: !!binary {base64.b64encode(data).decode()}\n"
    assert load(document) == [
        {"a": "\ufffd\ufffdA\ufffd\ufffdok\ufffd\ufffd\ufffd\U0001f600\ufffd\ufffd\ufffd\ufffd\ufffd"}
    ]
    many = f"a: !!binary {base64.b64encode(bytes([0xFF]) * 300_000).decode()}\n"  # one pass, not one per bad byte
    assert load(many) == [{"a": "\ufffd" * 300_000}]
