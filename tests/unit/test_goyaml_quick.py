"""The fast path (goyaml/quick.py) against the full loader: the same value for every document it reads, else MISS.

The corpus: go-yaml-marshalled documents (kapp-controller's stdin, images.yml, documents written by our byte-exact
go-yaml emitter from random values), the golden vendir.yml files, and hand-made documents at the edges of the subset
(go-yaml v2's YAML 1.1 scalar resolution, comments, quoting, block scalars, indentation, and what it must not read).
"""

from __future__ import annotations

import math
import random
import subprocess
import sys
from pathlib import Path

import pytest

from ocivendir.goyaml import emit, quick
from ocivendir.goyaml.load import DecodeError, _full, load_documents, split_documents
from ocivendir.goyaml.nodes import ComposeError
from tests.support.kapp import placeholder_secret

GOLDEN = Path(__file__).resolve().parents[1] / "golden"
KAPP_CONFIG = """apiVersion: vendir.k14s.io/v1alpha1
directories:
- contents:
  - imgpkgBundle:
      image: registry.example.com/packages/app@sha256:9ffd2164fba3a6e775b76d62fc4e80f045fd5e3947b01ec4acf2f4f949e20b8f
      secretRef:
        name: my-pkgi-fetch-0
    path: .
  path: "0"
- contents:
  - inline:
      paths:
        values.yml: |
          replicas: 2
          name: "app"
        empty.txt: ""
        keep.txt: |+
          kept

    path: .
  path: "1"
kind: Config
minimumRequiredVersion: ""
"""
IMAGES_YML = """---
apiVersion: imgpkg.carvel.dev/v1alpha1
images:
- annotations:
    kbld.carvel.dev/id: registry.example.com/app@sha256:9ffd2164fba3a6e775b76d62fc4e80f045fd5e3947b01ec4acf2f4f949e20b8f
  image: registry.example.com/app@sha256:9ffd2164fba3a6e775b76d62fc4e80f045fd5e3947b01ec4acf2f4f949e20b8f
kind: ImagesLock
"""
# at the edges of the subset: each is read exactly as the full loader reads it, or left to it
EDGES = [
    "a: 1\nb:\n- x\n- y\nc: z\n", "- a\n-\n- b\n", "-\n- a\n", "- \n  a: 1\n", "a:\n  - x\n  - y\n", "a:\n- x\n b: 1\n",
    "a: b # c\n", "a: b#c\n", "a: 'b # c'\n", 'a: "b\\tc\\u00e9\\x41\\U0001F600\\\\\\""\n', 'a: "\\ud800"\n',
    'a: "\\/"\n', 'a: "\\N\\_"\n', "a: 'it''s'\n", "a: ''\n", 'a: ""\n', "'k': v\n", '"k" : v\n', '"k":v\n',
    "a: |\n  x\n  y\nb: 1\n", "a: |-\n  x\n\n  y\n\n\nb: 1\n", "a: |+\n  x\n\n\nb: 1\n", "a: |2\n    x\n  y\n",
    "a: |\n  x\n     \n  y\n", "a: |\n  x\n     \n", "a: |\n  x\n  \n", "a: |+\n  x\n  \n   \n", "a: | # c\n  x\n",
    "a: |x\n  y\n", "a: |-2\n   x\n", "a: |1\n  x\n", "a: |\n  x", "a: |\n\n  x\n", "- |\n  x\n- |-\n  y\n",
    "a:\n  b: |\n    x\n  c: d\n", "a: >\n  x\n", "a: &x 1\nb: *x\n", "a: !!str 1\n", "a: [1, 2]\n", "a: {b: c}\n",
    "a: {}\nb: []\nc: {} # x\n", "a: {} x\n", "a: b\n  c\n", "a: b\n\n  c\n", "a: b\n# c\n  # d\nd: e\n",
    "a:\n    b: 1\n  c: 2\n", "a: 1\na: 2\n", "<<: {a: 1}\n", "'<<': 1\n", "a: - b\n", "a: -\n", "a: -1\n", "a: --x\n",
    "? a\n: b\n", "a: ?x\n", "a: :x\n", "-a: b\n", "-: b\n", ":a: b\n", "a: b:\n", "a: b: c\n", "a: http://x/y\n",
    "a: x,y]\n", "a: @x\n", "a: `x\n", "a: %x\n", "%YAML 1.1\n---\na: 1\n", "--- a\n", "...\n", "a: 1\n...\n",
    "  a: 1\n", "a\n", "# only\n", "a: 1 \n", "a:    \nb:   # c\n", "a: yes\nb: 0755\nc: 1e3\nd: ~\ne: .inf\nf: 0x1F\n",
    "yes: 1\n0755: 2\n~: 3\n1.50: 4\n", "a: 1_000\nb: +1\nc: .5\nd: 08\ne: 2024-01-01\nf: 12:30\ng: 0b101\nh: 0o17\n",
    "a: .nan\nb: -.Inf\nc: On\nd: n\ne: NULL\nf: -0\ng: 1e21\nh: 0.1e-7\n", "a: \"1\"\nb: '2'\n",
    "a:\n- b: 1\n  c:\n  - d\n  e: f\n- g\n", "- - a\n", "- a: 1\n  - b\n", "- a: 1\n   b: 2\n",
    "a:\n  -  b: 1\n     c: 2\n", "-   x\n", "a:   x   \n", "é: ü\n", "a: b\u00a0c\n", "a: \u00a0\n", "a: 'x\n  y'\n",
    'a: "x\n  y"\n', 'a: "x\\\n  y"\n', "k" * 1100 + ": v\n", "a:\n- b\n- c\nd:\n- e\n", "a:\n  - b\n  -\n    c: 1\n",
    "a: !x\n", "a: *\n", "a: &\n", "a: |\n  # not a comment\n  x\n# real\n", "a:\tb\n", "a: b\r\nc: d\r\n",
]  # fmt: skip
# strings a Go program may marshal; go-yaml quotes, escapes or blocks them as needed
STRINGS = [
    "", "a", "0", "0755", "1e3", "y", "yes", "~", "null", "-", "a: b", "#x", "x #y", "'q", '"d"', "tab\there", "é",
    "line\nbreak\n", "no trailing\nnewline", "two\n\n", "  lead\nx\n", 'k:{"uid":"x"}', ".inf", "-.5", "2024-01-01",
    "12:30", "<<", "=", "[a]", "{a}", "?", "x y", "a,b", "@at", "*s", "!t", "%p", "`b", "c:", ":c", "trailing ",
    " lead", "\x07bell", "x\r\ny", "multi\n  indented\n", "sha256:9ffd2164", "f:data", ".", "-1", "+1", "0x1F",
]  # fmt: skip


def same(left: object, right: object) -> bool:
    """Equal values of equal types (1 is not True, NaN is NaN), and equal key order."""
    if isinstance(left, float) and isinstance(right, float) and math.isnan(left) and math.isnan(right):
        return True
    if type(left) is not type(right):
        return False
    if isinstance(left, dict) and isinstance(right, dict):
        return list(left) == list(right) and all(same(left[key], right[key]) for key in left)
    if isinstance(left, list) and isinstance(right, list):
        return len(left) == len(right) and all(same(a, b) for a, b in zip(left, right, strict=True))
    return left == right


def agrees(document: str) -> bool:
    """Whether the fast path read `document` (False: MISS); it must agree with the full loader when it does."""
    value = quick.decode(document)
    if value is quick.MISS:
        return False
    try:
        expected = _full(document, strict=False)
    except ComposeError as exc:
        pytest.fail(f"the fast path read {document!r} as {value!r}; the full loader refuses it: {exc}")
    assert same(value, expected), (document, value, expected)
    return True


def _value(rng: random.Random, depth: int, strings: list[str]) -> object:
    roll = rng.random()
    if depth > 3 or roll < 0.4:
        return rng.choice([*strings, 0, 1, -3, 493, 1.5, True, False, None])
    if roll < 0.7:
        # a multi-line key is a `? |` complex key, and go-yaml writes a `<<` key plain, which reads back as a merge
        keys = [key for key in strings if "\n" not in key and key != "<<"]
        return {rng.choice(keys) or f"k{i}": _value(rng, depth + 1, strings) for i in range(rng.randint(0, 4))}
    return [_value(rng, depth + 1, strings) for _ in range(rng.randint(0, 4))]


@pytest.mark.parametrize("document", EDGES)
def test_an_edge_document_is_read_as_the_full_loader_reads_it_or_left_to_it(document: str) -> None:
    agrees(document)


def test_the_subset_holds_the_go_yaml_v2_scalars() -> None:
    assert agrees("a: yes\nb: 0755\nc: 1e3\nd: ~\ne: .inf\nf: 0x1F\ng: '0755'\nh: \"1e3\"\n")
    assert quick.decode("a: yes\nb: 0755\nc: 1e3\nd: ~\ne: .inf\nf: 0x1F\n") == {
        "a": True, "b": 493, "c": 1000.0, "d": None, "e": math.inf, "f": 31,
    }  # fmt: skip


@pytest.mark.parametrize("seed", range(4))
def test_documents_go_yaml_marshals_are_read_without_pyyaml(seed: int) -> None:
    """Everything our go-yaml emitter writes from one-line strings (no folding past column 80) is in the subset."""
    rng = random.Random(seed)  # noqa: S311 - reproducible documents, not secrets
    for _ in range(300):
        document = emit.dump({"k": _value(rng, 0, STRINGS), "z": _value(rng, 0, STRINGS)}).decode()
        assert agrees(document), document


def test_long_and_multi_line_strings_are_read_or_left_to_the_full_loader() -> None:
    rng = random.Random(7)  # noqa: S311 - reproducible documents, not secrets
    strings = [*STRINGS, "word " * 30, "a" * 90 + " b", "\u2028", "\n"]
    read = sum(agrees(emit.dump({"k": _value(rng, 0, strings)}).decode()) for _ in range(500))
    assert read > 100


def test_kapp_controller_stdin_and_images_yml_are_read_without_the_full_loader() -> None:
    for document in split_documents(placeholder_secret() + KAPP_CONFIG + IMAGES_YML):
        assert agrees(document), document


def test_golden_inputs_are_read_as_the_full_loader_reads_them() -> None:
    for path in sorted(GOLDEN.rglob("*.yml")):
        for document in split_documents(path.read_text()):
            agrees(document)


def test_loading_go_yaml_output_does_not_import_pyyaml() -> None:
    probe = (
        "import sys\nfrom ocivendir.goyaml.load import load_documents\n"
        f"docs = list(load_documents({(placeholder_secret() + KAPP_CONFIG).encode()!r}))\n"
        "assert len(docs) == 2 and docs[1]['kind'] == 'Config', docs\n"
        "assert 'yaml' not in sys.modules and 'ocivendir.goyaml.compose' not in sys.modules\n"
        "from ocivendir.goyaml import text\nassert text._compiled == []\n"  # ASCII: no regex compiled
        "list(load_documents('a: &x 1\\nb: *x\\n'))\nassert 'yaml' in sys.modules\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr


def test_a_document_outside_the_subset_still_gets_go_yamls_rules() -> None:
    assert list(load_documents("a: &x {p: 1}\nb: {<<: *x, q: 2}\nc: 1\nc: 2\n")) == [
        {"a": {"p": 1}, "b": {"p": 1, "q": 2}, "c": 2}
    ]


# pieces of hand-written block YAML, in and out of the subset, for random documents
PIECES = [
    "a", "b c", "0755", "yes", "~", "", "1e3", "-1", "'q'", "'it''s'", "''", '""', '"d\\tq"', '"\\x41\\u00e9"', "{}", "[]",
    "-x", "?x", ":x", "x:y", "a#b", "é", ".inf", 'k:{"u":1}', "a # c", "b  ", "'a' #c", "x,y", "[x", "}", "*a",
    "&a b", "!t x", "@x", "- x", "a: b", "a:", "-", "'open", '"bad \\q"', '"\\ud800"', ">",
]  # fmt: skip
KEYS = ["a", "b", "k", "0755", "yes", "~", "1", "'q'", '"d"', "x y", "-x", ":x", "é", "<<", "a#b", "'<<'", "?x", "a "]
HEADERS = ["|", "|-", "|+", "|2", "|-1", "|+2", "| #c", "|x", "|0"]


class _Writer:
    """Random block documents: go-yaml's shapes with other indentations, comments, blank lines and bad pieces."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)  # noqa: S311 - reproducible documents, not secrets
        self.step = self.rng.choice([1, 2, 2, 3, 4])
        self.lines: list[str] = []

    def block(self, indent: int) -> None:
        for _ in range(self.rng.randint(0, 4)):
            roll = self.rng.random()
            if roll < 0.3:
                self.lines.append(" " * self.rng.randint(0, indent + 4))
            else:
                self.lines.append(" " * (indent + self.rng.choice([1, 2, 2, 3])) + self.rng.choice(PIECES))

    def entry(self, prefix: str, indent: int, depth: int, *, mapping: bool) -> None:
        roll = self.rng.random()
        if roll < 0.5:
            self.lines.append(f"{prefix} {self.rng.choice(PIECES)}")
        elif roll < 0.6:
            self.lines.append(f"{prefix} {self.rng.choice(HEADERS)}")
            self.block(indent)
        elif roll < 0.7 and not mapping:
            self.lines.append(f"{prefix} {self.rng.choice(KEYS)}: {self.rng.choice(PIECES)}")
            for _ in range(self.rng.randint(0, 2)):
                column = indent + 2 + self.rng.choice([0, 0, 1, -1])
                self.lines.append(f"{' ' * column}{self.rng.choice(KEYS)}: {self.rng.choice(PIECES)}")
        else:
            self.lines.append(prefix)
            self.collection(indent + self.rng.choice([self.step, self.step, 0, 1]), depth + 1)

    def collection(self, indent: int, depth: int) -> None:
        mapping = self.rng.random() < 0.6
        if depth > 3:
            self.lines.append(" " * indent + self.rng.choice(PIECES))
            return
        for _ in range(self.rng.randint(1, 4)):
            if self.rng.random() < 0.05:
                self.lines.append(" " * self.rng.randint(0, 6) + "# comment")
            prefix = " " * indent + (f"{self.rng.choice(KEYS)}:" if mapping else "-")
            self.entry(prefix, indent, depth, mapping=mapping)

    def document(self) -> str:
        self.collection(0, 0)
        return "\n".join(self.lines) + self.rng.choice(["\n", "\n", ""])


def test_random_block_documents_are_read_as_the_full_loader_reads_them_or_left_to_it() -> None:
    read = sum(agrees(_Writer(seed).document()) for seed in range(2000))
    assert read > 200


@pytest.mark.parametrize(
    "document", ["- " * 3000 + "x\n", "- a:\n" + "".join("  " * i + "  - b:\n" for i in range(1, 1200))]
)
def test_deep_nesting_on_the_fast_path_is_left_to_the_full_loaders_depth_bound(document: str) -> None:
    assert quick.decode(document) is quick.MISS  # no RecursionError
    with pytest.raises(DecodeError, match="exceeded max depth of 1000"):
        list(load_documents(document))
