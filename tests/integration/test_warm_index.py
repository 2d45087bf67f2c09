"""One process serving call after call keeps its cache's index open, and follows the cache when it is replaced."""

from __future__ import annotations

import contextlib
import shutil
import sqlite3
from pathlib import Path

import pytest

from ocivendir.cache import opened
from tests.conftest import run_cli
from tests.support.builders import Pusher, make_image
from tests.support.registry import Registry


def _pull(ref: str, out: Path, cache: Path) -> None:
    done = run_cli("pull", "-i", ref, "-o", str(out), "--cache-dir", str(cache))
    assert done.exit_code == 0, done.stderr
    assert (out / "a.txt").read_text() == "a"


@pytest.fixture(autouse=True)
def _nothing_kept() -> None:
    opened.close_all()


def test_a_cache_replaced_between_two_calls_in_one_process_is_the_one_the_second_call_uses(
    registry: Registry, pusher: Pusher, repo_prefix: str, tmp_path: Path
) -> None:
    """The kept connection is to the old cache's index: the next call opens the new one, fetches and records there."""
    ref = pusher.image(f"{repo_prefix}/img", make_image({"a.txt": "a"}))
    cache = tmp_path / "cache"
    for number in range(3):  # the connection is kept from the second call on
        _pull(ref, tmp_path / f"out{number}", cache)
    shutil.move(cache, tmp_path / "old-cache")
    mark = registry.mark()
    _pull(ref, tmp_path / "new", cache)
    assert any(method == "GET" for method, _, _ in registry.since(mark))  # the new cache is empty
    with contextlib.closing(sqlite3.connect(cache / "index.db")) as db:  # a reader of its own
        assert db.execute("SELECT ref FROM refs").fetchall() == [(ref,)]
    mark = registry.mark()
    _pull(ref, tmp_path / "again", cache)
    assert registry.since(mark) == []  # served from the new cache, whose index holds the ref
