"""The index's read memo: a run that only reads answers the next one without SQLite, until anything changes the index."""

from __future__ import annotations

import json
import os
import shutil
import signal
import sqlite3
from pathlib import Path

import pytest

from ocivendir.cache import memo as memo_module
from ocivendir.cache import tidy as tidy_module
from ocivendir.cache.index import BlobRow, CacheIndex
from ocivendir.cache.memo import GENERATION, MEMO_DIR
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
OTHER_REPO = "r.io/team/other"
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
    assert len(list((cache / MEMO_DIR).glob("*.json"))) == 1  # one shard, for the repository
    second = CacheIndex(cache / "index.db")
    assert ask(second) == first
    assert not second._sql.connected  # never connected
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


def test_a_write_ends_the_answers_of_its_repository_and_no_others(cache: Path) -> None:
    other_ref = f"{OTHER_REPO}@{OTHER}"
    index = CacheIndex(cache / "index.db")
    index.record_ref(other_ref, BlobRow(digest=OTHER, size=5, media_type=MANIFEST_TYPE), "image", [])
    index.close()
    learned(cache)
    reader = CacheIndex(cache / "index.db")
    assert reader.ref(other_ref) is not None  # learns the other repository's answer
    reader.close()
    writer = CacheIndex(cache / "index.db")
    writer.put_verdict(REF, relocated=True, method="locations", missing=[])
    writer.close()
    reader = CacheIndex(cache / "index.db")
    assert reader.ref(other_ref) is not None
    assert not reader._sql.connected  # the other repository's answers still hold
    verdict = reader.verdict(REF)
    assert verdict is not None
    assert verdict.relocated  # the new verdict, from SQLite
    assert reader._sql.connected
    reader.close()


def test_a_write_changes_the_tokens_in_place_making_no_file(cache: Path) -> None:
    """A cold run bumps tokens twice per commit; a new file and a rename for each is dear on a busy file system."""
    learned(cache)
    tokens = [cache / GENERATION, *(cache / MEMO_DIR).glob("*.gen")]
    before = {path: path.read_bytes() for path in tokens}
    held = {path: os.open(path, os.O_RDONLY) for path in tokens}  # the files as they are now: renamed over, not these
    try:
        index = CacheIndex(cache / "index.db")
        index.put_verdict(REF, relocated=True, method="locations", missing=[])
        index.remove_refs([f"{OTHER_REPO}@{OTHER}"])  # bumps the index's own token
        index.close()
        for path, fd in held.items():
            assert os.pread(fd, 64, 0) == path.read_bytes() != before[path]
            assert len(before[path]) == len(path.read_bytes()) == 32
    finally:
        for fd in held.values():
            os.close(fd)


@pytest.mark.parametrize("planted", ["hard link", "torn", "fifo"])
def test_a_token_file_that_is_not_a_token_of_its_own_is_replaced_never_written_through(
    cache: Path, tmp_path_factory: pytest.TempPathFactory, planted: str
) -> None:
    learned(cache)
    token = next((cache / MEMO_DIR).glob("*.gen"))
    outside = tmp_path_factory.mktemp("outside") / "kept"
    outside.write_bytes(b"x" * 32)
    token.unlink()
    if planted == "hard link":
        os.link(outside, token)
    elif planted == "torn":
        token.write_bytes(b"0123")
    else:
        os.mkfifo(token)
    memo_module.bump(str(cache), REPO)
    assert outside.read_bytes() == b"x" * 32
    assert token.is_file()
    assert token.stat().st_nlink == 1
    assert len(token.read_bytes()) == 32


def test_removing_refs_ends_every_answer(cache: Path) -> None:
    learned(cache)
    index = CacheIndex(cache / "index.db")
    index.remove_refs([REF])
    index.close()
    reader = CacheIndex(cache / "index.db")
    assert reader.ref(REF) is None
    assert reader.held(REPO, [MANIFEST, LAYER]) == frozenset()  # its orphaned blobs' possession went with it
    assert reader._sql.connected
    reader.close()


def test_a_new_index_in_place_of_the_old_ends_every_answer(cache: Path) -> None:
    learned(cache)
    for name in ("index.db", "index.db-wal", "index.db-shm"):
        (cache / name).unlink(missing_ok=True)  # as `cache verify --repair` does before it rebuilds
    index = CacheIndex(cache / "index.db")
    assert index.ref(REF) is None
    assert index.held(REPO, [MANIFEST]) == frozenset()
    index.close()


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
    assert not list((cache / MEMO_DIR).glob("*.json"))
    assert CacheIndex(cache / "index.db").held(REPO, [OTHER]) == frozenset({OTHER})


def test_a_reader_elsewhere_does_not_stop_the_memo(cache: Path) -> None:
    learned(cache)
    other = sqlite3.connect(cache / "index.db")
    other.execute("SELECT 1 FROM refs").fetchall()
    try:
        index = CacheIndex(cache / "index.db")
        assert ask(index)[:4] == EXPECTED
        assert not index._sql.connected
        index.close()
    finally:
        other.close()


@pytest.mark.parametrize("token", ["memo", "index"])
def test_a_torn_or_missing_generation_token_starts_a_new_one_and_no_answer_is_taken(cache: Path, token: str) -> None:
    learned(cache)
    path = cache / GENERATION if token == "index" else next((cache / MEMO_DIR).glob("*.gen"))
    path.write_bytes(b"")  # what a crash may leave of a token written without fsync
    index = CacheIndex(cache / "index.db")
    assert ask(index)[:4] == EXPECTED
    assert index._sql.connected
    index.close()
    again = CacheIndex(cache / "index.db")
    assert ask(again)[:4] == EXPECTED
    assert not again._sql.connected  # the run above started a new generation and saved its answers in it
    again.close()


@pytest.mark.parametrize(
    "damage",
    [
        lambda _: b"garbage{",
        lambda _: b"",
        lambda _: b"[1, 2]",
        lambda data: data.replace(b'"format":2', b'"format":3'),
        lambda data: data.replace(f'"repository":"{REPO}"'.encode(), b'"repository":"r.io/team/other"'),  # moved
        lambda data: data[:-1] + b',"pad":"' + b"x" * memo_module._MAX_BYTES + b'"}',  # valid, but too large to read
        lambda data: data.replace(b'"held ', b'"held x'),  # answers to other questions
    ],
)
def test_a_damaged_or_foreign_shard_answers_nothing(cache: Path, damage: object) -> None:
    learned(cache)
    (shard,) = (cache / MEMO_DIR).glob("*.json")
    shard.write_bytes(damage(shard.read_bytes()))  # type: ignore[operator]
    index = CacheIndex(cache / "index.db")
    assert ask(index)[:4] == EXPECTED
    assert index._sql.connected
    index.close()


def test_memo_rows_are_decoded_as_rows_from_sqlite_are(cache: Path) -> None:
    learned(cache)
    (shard,) = (cache / MEMO_DIR).glob("*.json")
    doc = json.loads(shard.read_bytes())
    doc["answers"][f"ref {REF}"][0][1] = "sha256:../../etc"  # a tampered row in a shard of the right state
    doc["answers"][f"verdict {REF}"] = "not rows"
    shard.write_text(json.dumps(doc))
    index = CacheIndex(cache / "index.db")
    assert index.ref(REF) is None  # does not decode: absent, as a tampered index.db row is
    assert index.verdict(REF) is not None  # not rows: asked of SQLite
    index.close()


def test_a_granted_principal_is_not_written_again_and_a_tag_answer_always_is(tmp_path: Path) -> None:
    seeded(tmp_path)
    now = [1e9]
    index = CacheIndex(tmp_path / "index.db", clock=lambda: now[0])
    tokens = sorted(p.read_bytes() for p in (tmp_path / MEMO_DIR).glob("*.gen"))
    index.grant(MANIFEST, REPO, "anonymous")  # a tag's warm run proves access with each HEAD
    assert sorted(p.read_bytes() for p in (tmp_path / MEMO_DIR).glob("*.gen")) == tokens  # nothing written
    now[0] += 1
    index.put_tag(TAG, MANIFEST)  # --stale-if-error measures its age limit from the last answer
    assert index.tag(TAG) == (MANIFEST, now[0])
    index.grant(MANIFEST, REPO, "hmac-sha256:" + "0" * 64)
    assert "hmac-sha256:" + "0" * 64 in index.grants(MANIFEST, REPO)
    index.close()


def test_a_removal_by_another_run_before_the_first_question_is_seen(cache: Path) -> None:
    learned(cache)
    reader = CacheIndex(cache / "index.db")  # opened (as open_cache does) before the cache's lock is taken
    other = CacheIndex(cache / "index.db")
    assert other.forget_blob(LAYER) == [REF]
    other.close()
    assert reader.held(REPO, [MANIFEST, LAYER]) == frozenset({MANIFEST})
    assert reader.ref(REF) is None
    reader.close()
    again = CacheIndex(cache / "index.db")  # the reader's answers, saved in the new generation
    assert (again.ref(REF), again.held(REPO, [MANIFEST, LAYER])) == (None, frozenset({MANIFEST}))
    assert not again._sql.connected
    again.close()


def test_a_removal_between_two_repositories_questions_ends_the_memo_for_the_rest_of_the_run(cache: Path) -> None:
    index = CacheIndex(cache / "index.db")
    index.possess(OTHER_REPO, [LAYER])  # the layer came from another repository too
    index.close()
    learned(cache)
    learner = CacheIndex(cache / "index.db")
    assert learner.held(OTHER_REPO, [LAYER]) == frozenset({LAYER})
    learner.close()
    reader = CacheIndex(cache / "index.db")
    assert reader.held(REPO, [MANIFEST]) == frozenset({MANIFEST})  # the memo's generation is read here
    remover = CacheIndex(cache / "index.db")
    remover.remove_refs([REF])  # its blobs are orphans: their possession goes, for every repository
    remover.close()
    assert reader.held(OTHER_REPO, [LAYER]) == frozenset()  # not the memo's answer from before the removal
    reader.close()
    again = CacheIndex(cache / "index.db")
    assert again.held(OTHER_REPO, [LAYER]) == frozenset()
    again.close()


def test_a_reader_that_asked_between_a_writes_first_bump_and_its_commit_saves_nothing(cache: Path) -> None:
    learned(cache)
    reader = CacheIndex(cache / "index.db")
    writer = CacheIndex(cache / "index.db")
    real_bump, bumps = writer._bump, []

    def bump(repository: str | None) -> None:
        real_bump(repository)
        bumps.append(repository)
        if len(bumps) == 1:  # the transaction has not begun: the reader sees the old verdict
            verdict = reader.verdict(REF)
            assert verdict is not None
            assert not verdict.relocated

    writer._bump = bump  # type: ignore[method-assign]
    writer.put_verdict(REF, relocated=True, method="locations", missing=[])
    writer.close()
    reader.close()
    after = CacheIndex(cache / "index.db")
    verdict = after.verdict(REF)
    assert verdict is not None
    assert verdict.relocated
    after.close()


def test_a_writer_killed_after_its_commit_leaves_no_answer_from_before_it_in_use(cache: Path) -> None:
    learned(cache)
    reader = CacheIndex(cache / "index.db")
    assert reader.verdict(REF) is not None  # learned (from the memo) before the write began
    reader._memo._learned[REPO] = {f"verdict {REF}": [[0, "probes", "[]", 1.0, None]]}  # as if read from SQLite
    writer = CacheIndex(cache / "index.db")
    real_bump, bumps = writer._bump, []

    def bump(repository: str | None) -> None:
        bumps.append(repository)
        if len(bumps) == 2:  # the process dies between its commit and its second bump
            raise KeyboardInterrupt
        real_bump(repository)

    writer._bump = bump  # type: ignore[method-assign]
    with pytest.raises(KeyboardInterrupt):
        writer.put_verdict(REF, relocated=True, method="locations", missing=[])
    reader.close()  # its answers predate the write: not saved
    after = CacheIndex(cache / "index.db")
    verdict = after.verdict(REF)
    assert verdict is not None
    assert verdict.relocated
    after.close()


@pytest.mark.parametrize(
    ("key", "value"),
    [
        (f"held {MANIFEST}", "yes"),
        (f"grants {MANIFEST}", [[]]),
        (f"grants {MANIFEST}", [["anonymous", "extra"]]),
        (f"ref {REF}", [["too", "short"]]),
        (f"verdict {REF}", [[1, "locations"]]),
        (f"tag {TAG}", [[str(MANIFEST)]]),
    ],
)
def test_a_memo_answer_of_the_wrong_shape_is_asked_of_sqlite(cache: Path, key: str, value: object) -> None:
    learned(cache)
    (shard,) = (cache / MEMO_DIR).glob("*.json")
    doc = json.loads(shard.read_bytes())
    doc["answers"][key] = value
    shard.write_text(json.dumps(doc))
    index = CacheIndex(cache / "index.db")
    assert ask(index)[:4] == EXPECTED
    assert index.tag(TAG) is not None
    assert index._sql.connected
    index.close()


def test_a_shard_too_large_to_read_back_is_not_written(cache: Path) -> None:
    many = [parse_digest(f"sha256:{n:064x}") for n in range(4000)]
    index = CacheIndex(cache / "index.db")
    assert index.held(REPO, many) == frozenset()
    index.close()
    shards = list((cache / MEMO_DIR).glob("*.json"))
    assert all(p.stat().st_size <= memo_module._MAX_BYTES for p in shards)
    assert not shards


@pytest.mark.parametrize("where", ["generation", "shard", "token"])
def test_a_fifo_planted_in_the_memo_does_not_hang_the_run(cache: Path, where: str) -> None:
    learned(cache)
    path = {"generation": cache / GENERATION, "shard": next((cache / MEMO_DIR).glob("*.json")),
            "token": next((cache / MEMO_DIR).glob("*.gen"))}[where]  # fmt: skip
    path.unlink()
    os.mkfifo(path)

    def hung(*_: object) -> None:
        raise AssertionError(f"hung on the FIFO at {path}")  # not an OSError, which the reader would swallow

    previous = signal.signal(signal.SIGALRM, hung)  # a hang fails this test, not the whole run
    signal.alarm(10)
    try:
        index = CacheIndex(cache / "index.db")
        assert ask(index)[:4] == EXPECTED
        index.close()
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def test_cache_verify_finds_what_does_not_belong_in_the_memo(cache: Path) -> None:
    learned(cache)
    (cache / GENERATION).unlink()
    (cache / GENERATION).mkdir()
    (cache / MEMO_DIR / "notes.txt").write_text("x")
    (cache / MEMO_DIR / ("f" * 64 + ".json")).mkdir()
    store = BlobStore(str(cache))
    store.ensure_layout()
    assert tidy_module._scratch(store, repair=True) == [
        f"removed {cache / GENERATION}: not a regular file where the index's generation belongs",
        f"removed {cache / MEMO_DIR / ('f' * 64 + '.json')}: not a file of the read memo",
        f"removed {cache / MEMO_DIR / 'notes.txt'}: not a file of the read memo",
    ]
    index = CacheIndex(cache / "index.db")  # a new generation: every answer from SQLite, once
    assert ask(index)[:4] == EXPECTED
    index.close()


@pytest.mark.parametrize("value", [None, True, False, 0, -7, 2**63, 0.1, 1796327440.9126508, "", "plain",
                                   'q"uote\\back\nline\x00nul\x1f é ☃', [], [1, [None]], {"b": 1, "a": [True]}])  # fmt: skip
def test_shards_are_written_as_json(value: object) -> None:
    assert json.loads(memo_module._json(value)) == value


@pytest.mark.parametrize("value", [float("nan"), float("inf"), b"bytes", {1j: 1}, "\ud800"])
def test_a_value_json_cannot_hold_is_refused(value: object) -> None:
    with pytest.raises((ValueError, TypeError, UnicodeEncodeError)):
        memo_module._json(value).encode()


def test_digests_of_a_memo_answer_are_the_ones_asked(cache: Path) -> None:
    learned(cache)
    index = CacheIndex(cache / "index.db")
    held = index.held(REPO, [LAYER])
    assert held == frozenset({LAYER})
    assert all(isinstance(d, Digest) for d in held)
    assert not index._sql.connected
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
    shutil.rmtree(cache / MEMO_DIR)
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
    memo = cache / MEMO_DIR
    assert tidy_module._scratch(store, repair=True) == [f"removed {memo}: not a directory where the read memo belongs"]
    assert (elsewhere / "keep.tmp").exists()
    assert not memo.exists()


def test_temp_files_a_crash_left_are_stale_temp_files_to_cache_verify(cache: Path) -> None:
    learned(cache)
    shard = next((cache / MEMO_DIR).glob("*.json")).name  # atomic_write's temp siblings of the token and a shard
    left = [cache / f".{GENERATION}.ocivendir-tmp-0a1b2c", cache / MEMO_DIR / f".{shard}.ocivendir-tmp-0a1b2c"]
    for path in left:
        path.write_text("")
    store = BlobStore(str(cache))
    store.ensure_layout()
    assert tidy_module._scratch(store, repair=False) == [f"would remove {p}: stale temp file" for p in left]
    tidy_module._scratch(store, repair=True)
    assert not any(p.exists() for p in left)
    assert (cache / GENERATION).exists()
    assert sorted(p.suffix for p in (cache / MEMO_DIR).iterdir()) == [".gen", ".json"]
