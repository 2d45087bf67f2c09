"""Checks that were regular expressions compiled on every run decide exactly as those expressions did."""

from __future__ import annotations

import random
import re

import pytest

from ocivendir.cache.grants import is_principal
from ocivendir.cache.rows import BadRow, media_type

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
