"""CLI tests must leave HOME untouched: nothing is written there unless a cache in it was asked for."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest


@pytest.fixture(autouse=True)
def home_stays_empty(isolated_env: Path) -> Iterator[None]:
    yield
    assert list(isolated_env.iterdir()) == [], f"files were written under HOME: {list(isolated_env.rglob('*'))}"
