"""The index writes only what changes: a call that learns what the index already says commits nothing.

Counted with SQLite's own `total_changes` on the index's connection (rows inserted, updated or deleted).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from ocivendir.cache.index import TAG_REFRESH, CacheIndex
from ocivendir.oci.reference import Digest

ONE = Digest("1" * 64)
TWO = Digest("2" * 64)
BUNDLE = f"r.io/team/bundle@{ONE}"
TAG = "r.io/team/app:v1"


class _Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> _Clock:
    return _Clock()


@pytest.fixture
def index(tmp_path: Path, clock: _Clock) -> Iterator[CacheIndex]:
    opened = CacheIndex(tmp_path / "index.db", clock=clock)
    yield opened
    opened.close()


def _changes(index: CacheIndex) -> int:
    return int(index._sql.connection().total_changes)


def test_a_scheme_already_remembered_is_not_written_again(index: CacheIndex) -> None:
    index.remember_scheme("r.io", "https")
    before = _changes(index)
    index.remember_scheme("r.io", "https")
    assert _changes(index) == before
    index.remember_scheme("r.io", "http")
    assert (_changes(index), index.scheme_for("r.io")) == (before + 1, "http")


def test_possession_already_recorded_is_not_written_again_and_only_new_digests_are(index: CacheIndex) -> None:
    index.possess("r.io/team/app", [ONE])
    before = _changes(index)
    index.possess("r.io/team/app", [ONE])
    assert _changes(index) == before
    index.possess("r.io/team/app", [ONE, TWO])
    assert _changes(index) == before + 1
    assert index.held("r.io/team/app", [ONE, TWO]) == {ONE, TWO}
    index.possess("r.io/team/other", [ONE])  # another repository's possession is its own
    assert _changes(index) == before + 2


def test_the_same_positive_verdict_is_not_written_again(index: CacheIndex, clock: _Clock) -> None:
    index.put_verdict(BUNDLE, relocated=True, method="locations", missing=[])
    index.put_locations(BUNDLE, TWO)
    before = _changes(index)
    clock.now += 86400
    index.put_verdict(BUNDLE, relocated=True, method="locations", missing=[])
    assert _changes(index) == before
    verdict = index.verdict(BUNDLE)
    assert verdict is not None
    assert verdict.locations_digest == TWO  # what was recorded with it stays


def test_a_negative_verdict_is_written_again_for_its_time_starts_the_recheck_period(
    index: CacheIndex, clock: _Clock
) -> None:
    index.put_verdict(BUNDLE, relocated=False, method="probes", missing=["r.io/x@" + str(TWO)])
    clock.now += 10
    before = _changes(index)
    index.put_verdict(BUNDLE, relocated=False, method="probes", missing=["r.io/x@" + str(TWO)])
    verdict = index.verdict(BUNDLE)
    assert verdict is not None
    assert (_changes(index), verdict.checked_at) == (before + 1, clock.now)


def test_a_changed_verdict_is_written(index: CacheIndex) -> None:
    index.put_verdict(BUNDLE, relocated=True, method="locations", missing=[])
    index.put_verdict(BUNDLE, relocated=True, method="probes", missing=[])
    verdict = index.verdict(BUNDLE)
    assert verdict is not None
    assert verdict.method == "probes"


def test_a_tags_same_answer_is_written_again_only_once_it_is_tag_refresh_old(index: CacheIndex, clock: _Clock) -> None:
    index.put_tag(TAG, ONE)
    first = clock.now
    before = _changes(index)
    clock.now += TAG_REFRESH - 1
    index.put_tag(TAG, ONE)
    assert (_changes(index), index.tag(TAG)) == (before, (ONE, first))
    clock.now += 1
    index.put_tag(TAG, ONE)
    assert (_changes(index), index.tag(TAG)) == (before + 1, (ONE, clock.now))


def test_a_tags_new_answer_is_written_at_once(index: CacheIndex, clock: _Clock) -> None:
    index.put_tag(TAG, ONE)
    clock.now += 1
    index.put_tag(TAG, TWO)
    assert index.tag(TAG) == (TWO, clock.now)


def test_a_tag_answer_from_the_future_is_written_again(index: CacheIndex, clock: _Clock) -> None:
    """A clock set back: the recorded time is not trusted to be recent, and the answer is written with today's."""
    index.put_tag(TAG, ONE)
    clock.now -= 3600
    index.put_tag(TAG, ONE)
    assert index.tag(TAG) == (ONE, clock.now)


def test_writes_in_a_batch_are_one_transaction_committed_at_its_end(index: CacheIndex) -> None:
    before = _changes(index)
    with index.batch():
        index.possess("r.io/team/app", [ONE])
        with index.batch():  # part of the outer one
            index.put_tag(TAG, ONE)
        assert _changes(index) == before  # nothing committed yet
    assert _changes(index) == before + 2
    assert (index.held("r.io/team/app", [ONE]), index.tag(TAG) is not None) == ({ONE}, True)


def test_a_batch_that_raises_still_commits_what_it_queued(index: CacheIndex) -> None:
    def step() -> None:
        with index.batch():
            index.possess("r.io/team/app", [ONE])
            raise RuntimeError

    with pytest.raises(RuntimeError):
        step()
    assert index.held("r.io/team/app", [ONE]) == {ONE}


def test_a_batch_holds_only_its_own_threads_writes(index: CacheIndex) -> None:
    with index.batch():
        other = threading.Thread(target=index.put_tag, args=(TAG, ONE))
        other.start()
        other.join()
        assert index.tag(TAG) is not None  # another thread's write is its own transaction, committed at once
        index.possess("r.io/team/app", [ONE])
        assert index.held("r.io/team/app", [ONE]) == frozenset()
    assert index.held("r.io/team/app", [ONE]) == {ONE}
