"""Checks that were regular expressions compiled on every run decide exactly as those expressions did."""

from __future__ import annotations

import datetime as dt
import itertools
import random
import re

import pytest

from ocivendir.cache.grants import is_principal
from ocivendir.cache.rows import BadRow, media_type
from ocivendir.goyaml import implicit, keyorder
from ocivendir.goyaml.scalars import is_float

HEX = "75ffea7db4202cd300cda12f5ad43695ef14e731614189cb59bf504729e05c47"
_OLD_PRINCIPAL = re.compile(r"anonymous|hmac-sha256:[0-9a-f]{64}")
_OLD_MEDIA_TYPE = re.compile(r"[A-Za-z0-9][A-Za-z0-9!#$&^_.+-]{0,126}/[A-Za-z0-9][A-Za-z0-9!#$&^_.+-]{0,126}")


def _strings(pieces: list[str], seed: int) -> list[str]:
    rng = random.Random(seed)  # noqa: S311 - reproducible test data
    return sorted({"".join(rng.choice(pieces) for _ in range(rng.randint(0, 4))) for _ in range(5000)})


def test_principals_are_anonymous_or_an_hmac_of_64_lowercase_hex() -> None:
    pieces = ["anonymous", "hmac-sha256:", "hmac-sha512:", HEX, HEX.upper(), HEX[:-1], "g", "a", " ", "\n", "é"]
    corpus = [*_strings(pieces, 1), *(a + b for a in pieces for b in pieces)]
    assert [(v, is_principal(v)) for v in corpus] == [(v, bool(_OLD_PRINCIPAL.fullmatch(v))) for v in corpus]
    assert sum(map(is_principal, corpus)) > 2
    assert not is_principal(None)
    assert not is_principal(b"anonymous")


def _new_media(text: str) -> bool:
    try:
        media_type(text)
    except BadRow:
        return False
    return True


def test_media_types_are_two_restricted_names_as_before() -> None:
    pieces = ["application", "vnd.oci.image.manifest.v1+json", "a", "-x", "!#$&^_.+-", "é", " ", "x" * 127, "y" * 128,
              "Z9", ";", "\n", ""]  # fmt: skip
    corpus = [*_strings([*pieces, "/"], 2), *(f"{a}/{b}" for a in pieces for b in pieces)]
    assert [(v, _new_media(v)) for v in corpus] == [(v, bool(_OLD_MEDIA_TYPE.fullmatch(v))) for v in corpus]
    assert sum(map(_new_media, corpus)) > 30
    assert media_type("", empty_ok=True) == ""
    with pytest.raises(BadRow):
        media_type(7)


# the go-yaml scalar tests as they were (regular expressions compiled at import, datetime for the date)
_OLD_FLOAT = re.compile(r"[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?")
_OLD_BASE60 = re.compile(r"[-+]?[0-9][0-9_]*(?::[0-5]?[0-9])+(?:\.[0-9_]*)?")
_OLD_TIMESTAMP = re.compile(
    r"(\d{4})-(\d{1,2})-(\d{1,2})"
    r"(?:(?:[Tt]| )(\d{1,2}):(\d{1,2}):(\d{1,2})(?:\.\d{1,9})?(?:Z|[-+]\d{2}:\d{2})?)?",
    re.ASCII,  # Go's time.Parse reads ASCII digits only (the pattern once took any script's: issue 22's oracle)
)


def _old_timestamp(text: str) -> bool:
    match = _OLD_TIMESTAMP.fullmatch(text)
    if not match:
        return False
    try:
        dt.date(int(match.group(1)), int(match.group(2)), int(match.group(3)))
    except ValueError:
        return False
    return True


def test_yaml_floats_are_decided_as_go_yamls_float_pattern_did() -> None:
    pieces = ["1", "09", ".", "e", "E", "+", "-", "5", "_", "x", "\u0661", " ", ""]
    corpus = [*_strings(pieces, 3), "1.", ".5", "1e5", "1E+05", "-.5e-3", "1e5E3", "1E5e3", "+", "."]
    assert [(v, is_float(v)) for v in corpus] == [(v, bool(_OLD_FLOAT.fullmatch(v))) for v in corpus]
    assert sum(map(is_float, corpus)) > 100


def test_sexagesimal_numbers_are_decided_as_the_base60_pattern_did() -> None:
    pieces = ["1", "59", "60", "7", ":", ":", ".", "_", "+", "-", "a", "\u0661", ""]
    groups = ["", ":5", ":59:7", ":60", ":05:5", ":\u0661", ":", ":123"]
    built = [s + f + g + x for s in ("", "+", "-") for f in ("1", "1_0", "0", "a", "") for g in groups
             for x in ("", ".", ".5_", ".x", ".1.")]  # fmt: skip
    corpus = [*_strings(pieces, 4), *built, "190:20:30.15", "1:60", "1.5:3"]
    assert [(v, implicit._is_base60(v)) for v in corpus] == [(v, bool(_OLD_BASE60.fullmatch(v))) for v in corpus]
    assert sum(map(implicit._is_base60, corpus)) > 80


def test_timestamps_are_decided_as_the_pattern_and_datetime_did() -> None:
    dates = ["2001-12-14", "2024-2-29", "2023-02-29", "1900-02-29", "2000-02-29", "0000-01-01", "9999-12-31",
             "2001-13-01", "2001-00-10", "2001-04-31", "2001-1-1", "20011-1-1", "\u0662\u0660\u0662\u0664-0\u0661-0\u0662", "2001-12-140"]  # fmt: skip
    clocks = ["", "T1:2:3", "t21:59:43.10", " 21:59:43.123456789", "T21:59:43.1234567890", "T1:2:3Z", "T1:2:3+05:30",
              "T1:2:3.5-0530", "T1:2:3-05:3", "T1:2", "T1:2:3Zx", "T1:2:345", "X1:2:3", "T1:2:3.", "T\u0661:2:3+\u06605:30"]  # fmt: skip
    corpus = [d + c for d in dates for c in clocks]
    corpus += _strings(["2001", "-", "1", "12", "31", "T", " ", ":", ".", "Z", "+05:30", "\u0663"], 5)
    assert [(v, implicit.is_timestamp(v)) for v in corpus] == [(v, _old_timestamp(v)) for v in corpus]
    assert sum(map(implicit.is_timestamp, corpus)) > 25


def test_key_order_takes_digit_runs_from_where_keys_differ_and_no_superscript_digit_fails() -> None:
    assert keyorder.go_sorted(["x²", "x1", "xa", "x"]) == ["x", "x²", "x1", "xa"]
    # from the first rune that differs: 2 < 10 < 12 < 1e3 (`e` is a letter) < 2 (the run `1` against `2`): no total
    # order, so go-yaml's own output for these keys follows Go's random map order
    chain = ["2", "10", "12", "1e3", "2"]
    assert all(keyorder.go_less(a, b) for a, b in itertools.pairwise(chain))
    assert keyorder.go_less("a9", "a10")
    assert not keyorder.go_less("a10", "a9")
