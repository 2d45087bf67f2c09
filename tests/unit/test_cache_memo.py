"""The index's read memo: a run that only reads answers the next one without SQLite, until anything changes the index."""

from __future__ import annotations

import json
import os
import sqlite3
from pathlib import Path

import pytest

from ocivendir.cache import memo as memo_module
from ocivendir.cache import tidy as tidy_module
from ocivendir.cache.index import TOUCH_INTERVAL, BlobRow, CacheIndex
from ocivendir.cache.memo import GENERATION, MEMO_DIR, state
from ocivendir.cache.store import BlobStore
from ocivendir.errors import CacheError
from ocivendir.oci.reference import Digest, parse_digest
from tests.support.fresh import fresh_python

MANIFEST_TYPE = "application/vnd.oci.image.manifest.v1+json"
REPO = "r.io/team/app"
MANIFEST = parse_digest("sha256:" + "a" * 64)
LAYER = parse_digest("sha256:" + "b" * 64)
OTHER = parse_digest("sha256:" + "c" * 64)
REF = f"{REPO}@{MANIFEST}"
TAG = f"{REPO}:v1"


def seeded(cache: Path) -> None:
    """An index holding one ref (manifest + layer), its possession, a grant, a verdict and a tag answer."""
    index = CacheIndex(cache / "index.db")
    index.record_ref(REF, BlobRow(digest=MANIFEST, size=10, media_type=MANIFEST_TYPE), "bundle",
                     [BlobRow(digest=LAYER, size=20, media_type="application/octet-stream")])  # fmt: skip
    index.possess(REPO, [MANIFEST, LAYER])
    index.grant(MANIFEST, REPO, "anonymous")
    index.put_verdict(REF, relocated=False, method="probes", missing=["other.io/x@" + str(OTHER)])
    index.put_tag(TAG, MANIFEST)
    index.close()


def ask(index: CacheIndex) -> tuple[object, ...]:
    """Everything a warm run asks the index."""
    ref = index.ref(REF)
    verdict = index.verdict(REF)
    return (ref and (ref.manifest_digest, ref.kind), index.held(REPO, [MANIFEST, LAYER, OTHER]),
            index.grants(MANIFEST, REPO), verdict and (verdict.relocated, verdict.missing), index.tag(TAG))  # fmt: skip


EXPECTED = (
    (MANIFEST, "bundle"),
    frozenset({MANIFEST, LAYER}),
    frozenset({"anonymous"}),
    (False, ("other.io/x@" + str(OTHER),)),
)


@pytest.fixture
def cache(tmp_path: Path) -> Path:
    seeded(tmp_path)
    return tmp_path


def learned(cache: Path) -> tuple[object, ...]:
    """A run that reads from SQLite (there is no memo yet) and leaves its answers in the memo."""
    index = CacheIndex(cache / "index.db")
    answers = ask(index)
    index.close()
    return answers


def test_a_run_that_only_reads_leaves_answers_the_next_run_takes_without_opening_sqlite(cache: Path) -> None:
    first = learned(cache)
    assert first[:4] == EXPECTED
    assert list((cache / MEMO_DIR).iterdir())  # one shard, for the repository
    second = CacheIndex(cache / "index.db")
    assert ask(second) == first
    assert second._db is None  # never connected
    second.close()


def test_a_warm_run_in_a_new_interpreter_does_not_load_sqlite(cache: Path) -> None:
    learned(cache)
    code = (
        "import sys\nfrom ocivendir.cache.index import CacheIndex\n"
        f"index = CacheIndex({str(cache / 'index.db')!r})\n"
        f"print(sorted(index.held({REPO!r}, [])), index.ref({REF!r}).kind, index.verdict({REF!r}).relocated)\n"
        "index.close()\nprint('_sqlite3' in sys.modules)\n"
    )
    assert fresh_python(code).stdout.splitlines() == ["[] bundle False", "False"]


def test_every_write_to_the_index_ends_the_memo(cache: Path) -> None:
    learned(cache)
    before = state(str(cache))
    writer = CacheIndex(cache / "index.db")
    writer.put_verdict(REF, relocated=True, method="locations", missing=[])
    writer.close()
    assert state(str(cache)) != before
    reader = CacheIndex(cache / "index.db")
    verdict = reader.verdict(REF)
    assert verdict is not None
    assert verdict.relocated  # the new verdict, from SQLite
    assert reader._db is not None
    reader.close()


def test_a_run_that_writes_saves_no_answers_and_reads_sqlite_after_its_write(cache: Path) -> None:
    learned(cache)
    index = CacheIndex(cache / "index.db")
    assert index.held(REPO, [OTHER]) == frozenset()  # from the memo
    index.possess(REPO, [OTHER])
    assert index.held(REPO, [OTHER]) == frozenset({OTHER})  # its own write, not the memo's answer
    index.close()
    assert CacheIndex(cache / "index.db").held(REPO, [OTHER]) == frozenset({OTHER})


def test_answers_read_while_another_run_wrote_are_not_saved(cache: Path) -> None:
    reader = CacheIndex(cache / "index.db")
    ask(reader)
    writer = CacheIndex(cache / "index.db")
    writer.possess(REPO, [OTHER])
    writer.close()
    reader.close()
    assert not (cache / MEMO_DIR).exists()
    assert CacheIndex(cache / "index.db").held(REPO, [OTHER]) == frozenset({OTHER})


def test_no_memo_is_used_while_a_connection_is_open_elsewhere(cache: Path) -> None:
    learned(cache)
    other = sqlite3.connect(cache / "index.db")
    other.execute("SELECT 1 FROM refs").fetchall()  # a reader elsewhere: index.db-wal exists
    try:
        index = CacheIndex(cache / "index.db")
        assert ask(index)[:4] == EXPECTED
        assert index._db is not None
        index.close()
    finally:
        other.close()


@pytest.mark.parametrize(
    "change",
    [
        lambda db: os.utime(db, ns=(0, 0)),  # another modification time
        lambda db: (db.with_name("copy").write_bytes(db.read_bytes()), db.with_name("copy").replace(db)),  # inode
    ],
)
def test_an_index_file_changed_behind_the_index_ends_the_memo(cache: Path, change: object) -> None:
    learned(cache)
    change(cache / "index.db")  # type: ignore[operator]
    index = CacheIndex(cache / "index.db")
    assert ask(index)[:4] == EXPECTED
    assert index._db is not None
    index.close()


@pytest.mark.parametrize(
    "damage",
    [
        lambda _: b"garbage{",
        lambda _: b"",
        lambda _: b"[1, 2]",
        lambda data: data.replace(b'"format":1', b'"format":2'),
        lambda data: data.replace(f'"repository":"{REPO}"'.encode(), b'"repository":"r.io/team/other"'),  # moved
        lambda _: b" " * (memo_module._MAX_BYTES + 1),  # too large to read
        lambda data: data.replace(b'"held ', b'"held x'),  # answers to other questions
    ],
)
def test_a_damaged_or_foreign_shard_answers_nothing(cache: Path, damage: object) -> None:
    learned(cache)
    (shard,) = (cache / MEMO_DIR).iterdir()
    shard.write_bytes(damage(shard.read_bytes()))  # type: ignore[operator]
    index = CacheIndex(cache / "index.db")
    assert ask(index)[:4] == EXPECTED
    assert index._db is not None
    index.close()


def test_memo_rows_are_decoded_as_rows_from_sqlite_are(cache: Path) -> None:
    learned(cache)
    (shard,) = (cache / MEMO_DIR).iterdir()
    doc = json.loads(shard.read_bytes())
    doc["answers"][f"ref {REF}"][0][1] = "sha256:../../etc"  # a tampered row in a shard of the right state
    doc["answers"][f"verdict {REF}"] = "not rows"
    shard.write_text(json.dumps(doc))
    index = CacheIndex(cache / "index.db")
    assert index.ref(REF) is None  # does not decode: absent, as a tampered index.db row is
    assert index.verdict(REF) is not None  # not rows: asked of SQLite
    index.close()


def test_a_granted_principal_and_an_unchanged_young_tag_answer_are_not_written_again(tmp_path: Path) -> None:
    seeded(tmp_path)
    now = [1e9]
    index = CacheIndex(tmp_path / "index.db", clock=lambda: now[0])
    index.put_tag(TAG, MANIFEST)
    generation = (tmp_path / GENERATION).read_bytes()
    index.grant(MANIFEST, REPO, "anonymous")
    index.put_tag(TAG, MANIFEST)
    assert (tmp_path / GENERATION).read_bytes() == generation  # nothing written
    now[0] += TOUCH_INTERVAL
    index.put_tag(TAG, MANIFEST)  # as old as a ref's last use may get: recorded again
    assert index.tag(TAG) == (MANIFEST, now[0])
    index.put_tag(TAG, OTHER)  # another answer: recorded at once
    index.grant(MANIFEST, REPO, "hmac-sha256:" + "0" * 64)
    assert index.tag(TAG) == (OTHER, now[0])
    assert "hmac-sha256:" + "0" * 64 in index.grants(MANIFEST, REPO)
    index.close()


@pytest.mark.parametrize("value", [None, True, False, 0, -7, 2**63, 0.1, 1796327440.9126508, "", "plain",
                                   'q"uote\\back\nline\x00nul\x1f é ☃', [], [1, [None]], {"b": 1, "a": [True]}])  # fmt: skip
def test_shards_are_written_as_json(value: object) -> None:
    assert json.loads(memo_module._json(value)) == value


@pytest.mark.parametrize("value", [float("nan"), float("inf"), b"bytes", ("tuple",), "\ud800"])
def test_a_value_json_cannot_hold_is_refused(value: object) -> None:
    with pytest.raises((ValueError, UnicodeEncodeError)):
        memo_module._json(value).encode()


def test_digests_of_a_memo_answer_are_the_ones_asked(cache: Path) -> None:
    learned(cache)
    index = CacheIndex(cache / "index.db")
    held = index.held(REPO, [LAYER])
    assert held == frozenset({LAYER})
    assert all(isinstance(d, Digest) for d in held)
    assert index._db is None
    index.close()


def test_garbage_in_place_of_an_index_with_a_memo_is_still_an_error_at_open(cache: Path) -> None:
    learned(cache)
    (cache / "index.db").write_bytes(b"\x00garbage, not SQLite" * 200)
    with pytest.raises(CacheError) as caught:
        CacheIndex(cache / "index.db")
    assert "cache verify --repair" in (caught.value.hint or "")


def test_a_symlink_in_place_of_the_memo_directory_is_neither_written_through_nor_tidied_through(
    cache: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    elsewhere = tmp_path_factory.mktemp("elsewhere")
    (elsewhere / "keep.tmp").write_text("not the cache's")
    (cache / MEMO_DIR).symlink_to(elsewhere)
    learned(cache)
    assert sorted(p.name for p in elsewhere.iterdir()) == ["keep.tmp"]
    (cache / MEMO_DIR).unlink()
    (cache / MEMO_DIR).symlink_to(cache / "dangling")
    learned(cache)  # the directory cannot be made: the run goes on without a memo
    store = BlobStore(str(cache))
    store.ensure_layout()
    (cache / MEMO_DIR).unlink()
    (cache / MEMO_DIR).symlink_to(elsewhere)
    assert tidy_module._scratch(store, repair=True) == []
    assert (elsewhere / "keep.tmp").exists()


def test_temp_files_a_crash_left_are_stale_temp_files_to_cache_verify(cache: Path) -> None:
    learned(cache)
    left = [cache / f"{GENERATION}.123.abcd.tmp", cache / MEMO_DIR / "x.json.123.abcd.tmp"]
    for path in left:
        path.write_text("")
    store = BlobStore(str(cache))
    store.ensure_layout()
    assert tidy_module._scratch(store, repair=False) == [f"would remove {p}: stale temp file" for p in left]
    tidy_module._scratch(store, repair=True)
    assert not any(p.exists() for p in left)
    assert (cache / GENERATION).exists()
    assert len(list((cache / MEMO_DIR).iterdir())) == 1
