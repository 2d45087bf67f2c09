"""A process that serves calls keeps each cache's index open, and uses it again only while it is the same file.

Connections are counted by a spy on `sqlite3.connect`; a kept connection is one the next `CacheIndex` does not open.
"""

from __future__ import annotations

import os
import shutil
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

from ocivendir.cache import opened
from ocivendir.cache.index import BlobRow, CacheIndex
from ocivendir.oci.reference import Digest

REF = f"r.io/team/app@sha256:{'a' * 64}"
BLOB = BlobRow(digest=Digest("a" * 64), size=1, media_type="application/vnd.oci.image.manifest.v1+json")


@pytest.fixture
def connects(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """The paths sqlite3.connect is called with; no connection kept from another test."""
    opened.close_all()
    calls: list[str] = []
    connect = sqlite3.connect

    def counted(path: str, *args: object, **kwargs: object) -> sqlite3.Connection:
        calls.append(str(path))
        return connect(path, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(sqlite3, "connect", counted)
    yield calls
    opened.close_all()


def _use(path: Path) -> CacheIndex:
    """One call's use of the index: a query through SQLite, then close."""
    index = CacheIndex(path)
    index.refs()
    index.close()
    return index


def test_a_process_serving_calls_opens_an_index_twice_and_then_reuses_it(tmp_path: Path, connects: list[str]) -> None:
    """The first close closes (a one-call process keeps nothing); from the second, the connection is kept."""
    path = tmp_path / "index.db"
    for _ in range(5):
        _use(path)
    assert len(connects) == 2


def test_a_kept_connection_sees_what_another_connection_wrote(tmp_path: Path, connects: list[str]) -> None:
    path = tmp_path / "index.db"
    _use(path)
    _use(path)
    writer = CacheIndex(path)  # the kept connection is taken: this one opens its own, as another process would
    other = CacheIndex(path)
    other.record_ref(REF, BLOB, "image", [])
    other.close()
    assert [r.ref for r in writer.refs()] == [REF]
    writer.close()


def test_an_index_file_replaced_between_calls_is_opened_anew(tmp_path: Path, connects: list[str]) -> None:
    path = tmp_path / "index.db"
    _use(path)
    _use(path)
    fresh = CacheIndex(tmp_path / "elsewhere.db")
    fresh.record_ref(REF, BLOB, "image", [])
    fresh.close()
    for name in ("index.db", "index.db-wal", "index.db-shm"):
        (tmp_path / name).unlink(missing_ok=True)
    (tmp_path / "elsewhere.db").replace(path)
    before = len(connects)
    index = CacheIndex(path)
    assert [r.ref for r in index.refs()] == [REF]
    index.close()
    assert connects[before:] == [str(path)]


def test_a_cache_directory_removed_and_made_again_is_opened_anew(tmp_path: Path, connects: list[str]) -> None:
    cache = tmp_path / "cache"
    cache.mkdir()
    _use(cache / "index.db")
    index = CacheIndex(cache / "index.db")
    index.record_ref(REF, BLOB, "image", [])
    index.close()
    shutil.rmtree(cache)
    cache.mkdir()
    before = len(connects)
    assert _use(cache / "index.db").refs() == []
    assert len(connects) == before + 1


@pytest.mark.skipif(os.geteuid() != 0, reason="giving a directory to another owner needs root")
def test_a_cache_directory_given_to_another_owner_is_opened_anew(tmp_path: Path, connects: list[str]) -> None:
    path = tmp_path / "index.db"
    _use(path)
    _use(path)
    os.chown(tmp_path, 4242, -1)
    before = len(connects)
    _use(path)
    assert len(connects) == before + 1


def test_at_most_kept_connections_stay_open_the_least_recently_used_closed_first(
    tmp_path: Path, connects: list[str]
) -> None:
    paths = [tmp_path / f"{n}.db" for n in range(opened.KEPT + 1)]
    for path in paths:
        _use(path)
        _use(path)
    before = len(connects)
    _use(paths[-1])  # kept
    _use(paths[0])  # closed when the last one was kept: opened again
    assert connects[before:] == [str(paths[0])]


@pytest.mark.parametrize("made_read_only", ["file", "directory"])
def test_an_index_made_read_only_is_opened_anew(tmp_path: Path, connects: list[str], made_read_only: str) -> None:
    """A connection opened for writing is not used on a cache its owner has since made read-only (chmod a-w)."""
    path = tmp_path / "index.db"
    _use(path)
    _use(path)
    before = len(connects)
    changed = path if made_read_only == "file" else tmp_path
    mode = changed.stat().st_mode
    changed.chmod(mode & ~0o222)
    try:
        _use(path)
    finally:
        changed.chmod(mode)
    assert len(connects) == before + 1
