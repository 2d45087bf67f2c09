"""jsondoc.loads is json.loads, except that a document nested past the stack is invalid JSON, not a RecursionError."""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest

from ocivendir import jsondoc

DEEP = "[" * 100_000 + "]" * 100_000


@pytest.mark.parametrize(
    ("data", "where"),
    [
        (DEEP, "line 1 column 1 (char 0)"),
        (" \n" + DEEP, "line 2 column 1 (char 2)"),
        (DEEP.encode(), "line 1 column 1 (char 0)"),
        ("\t" + '{"a":' * 100_000, "line 1 column 2 (char 1)"),
        (("  " + DEEP).encode("utf-16"), "line 1 column 3 (char 2)"),
    ],
    ids=["str", "after-whitespace", "bytes", "object", "utf-16"],
)
def test_a_document_nested_past_the_stack_is_a_decode_error_at_its_start(data: str | bytes, where: str) -> None:
    with pytest.raises(json.JSONDecodeError) as caught:
        jsondoc.loads(data)
    assert str(caught.value) == f"Nested too deeply: {where}"


@pytest.mark.parametrize("data", ['{"a": 1, "a": 2}', b"\xef\xbb\xbf[1]", "[1] x", "", "\ufeff[]", "[NaN]"])
def test_anything_else_is_what_json_loads_gives(data: str | bytes) -> None:
    def outcome(load: Callable[[str | bytes], object]) -> str:
        try:
            return repr(load(data))
        except json.JSONDecodeError as exc:
            return f"{type(exc).__name__}: {exc}"

    assert outcome(jsondoc.loads) == outcome(json.loads)
