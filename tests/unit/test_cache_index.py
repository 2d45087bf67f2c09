"""The cache index is data, never code or routing: tampered rows count as absent, a broken file is a clear error."""

from __future__ import annotations

import hashlib
import shutil
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from responses import RequestsMock

from ocivendir.cache import connection as connection_module
from ocivendir.cache.connection import SCHEMA_VERSION
from ocivendir.cache.index import BlobRow, CacheIndex
from ocivendir.errors import CacheError, CacheUnwritable
from ocivendir.oci.reference import Digest, parse_reference
from ocivendir.registry.client import ClientOptions, RegistryClient
from ocivendir.registry.credentials import Credential
from tests.support.mounts import fill, small_tmpfs

MANIFEST_TYPE = "application/vnd.oci.image.manifest.v1+json"
GOOD = "sha256:" + "a" * 64
REF = f"r.io/team/app@{GOOD}"


@pytest.fixture
def index(tmp_path: Path) -> Iterator[CacheIndex]:
    opened = CacheIndex(tmp_path / "index.db")
    yield opened
    opened.close()


def raw(index: CacheIndex, sql: str, *params: object) -> None:
    index._write([(sql, params)], repository=None)  # the tamperer writes index.db directly


def refs_row(ref: object, digest: object, kind: object = "image", media: object = MANIFEST_TYPE,
             size: object = 10, when: object = 1.0) -> tuple[object, ...]:  # fmt: skip
    return (ref, digest, kind, media, size, when, when)


@pytest.mark.parametrize(
    "row",
    [
        refs_row(REF, "sha256:../../../etc"),
        refs_row(REF, GOOD.upper()),
        refs_row(REF, GOOD, kind="script"),
        refs_row(REF, GOOD, media="text/html\n<x>"),
        refs_row(REF, GOOD, size=-1),
        refs_row(REF, GOOD, size="ten"),
        refs_row(REF, GOOD, when="yesterday"),
        refs_row(REF, GOOD, when=float("inf")),
        refs_row(REF, GOOD, when=-1.0),
        refs_row(REF + " ", GOOD),
        refs_row(f"r.io/team/app:latest@{GOOD}", GOOD),
    ],
)
def test_a_tampered_ref_row_counts_as_absent(index: CacheIndex, row: tuple[object, ...]) -> None:
    raw(index, "INSERT INTO refs VALUES (?,?,?,?,?,?,?)", *row)
    assert index.ref(str(row[0])) is None
    assert index.refs() == []
    assert index.listing() == []
    assert index.layout_entries() == []


def test_a_good_ref_row_reads_back(index: CacheIndex) -> None:
    raw(index, "INSERT INTO refs VALUES (?,?,?,?,?,?,?)", *refs_row(REF, GOOD))
    row = index.ref(REF)
    assert row is not None
    assert row.manifest_digest == Digest("a" * 64)


@pytest.mark.parametrize(
    ("digest", "size", "media"), [("sha256:zz", 1, "x"), (GOOD, -5, "x"), (GOOD, 1, "bad\x00type"), (GOOD, 1.5, "x")]
)
def test_a_tampered_blob_row_is_skipped(index: CacheIndex, digest: str, size: object, media: str) -> None:
    raw(index, "INSERT INTO blobs VALUES (?,?,?,?,?)", digest, size, media, 1.0, 1.0)
    assert list(index.iter_blobs()) == []
    assert index.blob(Digest("a" * 64)) is None


def test_tampered_edges_are_skipped_and_orphan_rows_with_bad_digests_are_dropped(index: CacheIndex) -> None:
    raw(index, "INSERT INTO edges VALUES (?,?)", GOOD, "../../escape")
    raw(index, "INSERT INTO blobs VALUES (?,?,?,?,?)", "../../escape", 1, "x", 1.0, 1.0)
    assert index.edges(Digest("a" * 64)) == []
    assert index.remove_refs([]) == []
    assert index.graph()[1] == {}


@pytest.mark.parametrize(
    ("relocated", "method", "missing", "locations"),
    [
        (2, "probes", "[]", None),
        (1, "eval", "[]", None),
        (0, "probes", "{not json", None),
        (0, "probes", "[1, 2]", None),
        (0, "probes", "[" * 5000, None),
        (1, "locations", "[]", "sha256:../x"),
    ],
)
def test_a_tampered_verdict_counts_as_absent(
    index: CacheIndex, relocated: object, method: str, missing: str, locations: str | None
) -> None:
    raw(index, "INSERT INTO verdicts VALUES (?,?,?,?,?,?)", REF, relocated, method, locations, missing, 1.0)
    assert index.verdict(REF) is None
    assert index.verdicts() == {}


def test_a_tampered_tag_answer_counts_as_absent(index: CacheIndex) -> None:
    raw(index, "INSERT INTO tags VALUES (?,?,?)", "r.io/team/app:v1", "sha256:nothex", 1.0)
    raw(index, "INSERT INTO tags VALUES (?,?,?)", "r.io/team/app:v2", GOOD, "yesterday")
    assert index.tag("r.io/team/app:v1") is None
    assert index.tag("r.io/team/app:v2") is None
    index.put_tag("r.io/team/app:v1", Digest("a" * 64))
    assert index.tag("r.io/team/app:v1") is not None


@pytest.mark.parametrize("scheme", ["http://evil.example/#", "https://evil.example:443/x?", "file", "HTTPS", "", 1])
def test_a_remembered_scheme_other_than_https_or_http_is_ignored_and_overwritten(
    index: CacheIndex, scheme: object
) -> None:
    raw(index, "INSERT INTO schemes VALUES (?,?,?)", "r.io", scheme, 1.0)
    assert index.scheme_for("r.io") is None
    index.remember_scheme("r.io", "https")
    assert index.scheme_for("r.io") == "https"


def test_a_remembered_plain_http_scheme_is_not_used_where_plain_http_is_not_allowed(
    tmp_path: Path, rsps: RequestsMock
) -> None:
    data = b'{"schemaVersion":2}'
    digest = "sha256:" + hashlib.sha256(data).hexdigest()
    rsps.get(f"https://registry.example.com/v2/team/app/manifests/{digest}", body=data)
    index = CacheIndex(tmp_path / "index.db")
    index.remember_scheme("registry.example.com", "http")  # a downgrade planted in the cache
    client = RegistryClient(ClientOptions(), lambda _r, _p: Credential(), index)
    raw_bytes, _, _ = client.get_manifest(parse_reference(f"registry.example.com/team/app@{digest}"))
    assert raw_bytes == data
    assert [c.request.url.split(":")[0] for c in rsps.calls] == ["https"]
    assert index.scheme_for("registry.example.com") == "https"  # overwritten by what worked
    index.close()


def test_a_remembered_plain_http_scheme_is_kept_for_a_host_allowed_plain_http(
    tmp_path: Path, rsps: RequestsMock
) -> None:
    data = b'{"schemaVersion":2}'
    digest = "sha256:" + hashlib.sha256(data).hexdigest()
    rsps.get(f"http://registry.example.com/v2/team/app/manifests/{digest}", body=data)
    index = CacheIndex(tmp_path / "index.db")
    index.remember_scheme("registry.example.com", "http")
    options = ClientOptions(insecure_hosts=frozenset({"registry.example.com"}))
    client = RegistryClient(options, lambda _r, _p: Credential(), index)
    client.get_manifest(parse_reference(f"registry.example.com/team/app@{digest}"))
    assert [c.request.url.split(":")[0] for c in rsps.calls] == ["http"]  # no failed https attempt
    index.close()


def test_garbage_in_place_of_the_index_is_a_clear_error_naming_the_file_and_the_repair(tmp_path: Path) -> None:
    path = tmp_path / "index.db"
    path.write_bytes(b"\x00garbage, not SQLite" * 200)
    with pytest.raises(CacheError) as caught:
        CacheIndex(path)
    assert str(path) in caught.value.message
    assert caught.value.hint is not None
    assert "cache verify --repair" in caught.value.hint


def test_a_directory_in_place_of_the_index_is_a_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "index.db"
    path.mkdir()
    with pytest.raises(CacheError) as caught:
        CacheIndex(path)
    assert str(path) in caught.value.message
    assert "not a regular file" in caught.value.message


def test_an_index_truncated_after_use_fails_clearly_on_the_next_query(tmp_path: Path) -> None:
    path = tmp_path / "index.db"
    index = CacheIndex(path)
    blob = BlobRow(digest=Digest("a" * 64), size=1, media_type=MANIFEST_TYPE)
    index.record_ref(REF, blob, "image", [])
    index.close()
    data = path.read_bytes()
    path.write_bytes(data[:100] + b"\xff" * (len(data) - 100))
    with pytest.raises(CacheError) as caught:
        CacheIndex(path).ref(REF)
    assert str(path) in caught.value.message


def test_an_index_at_the_current_schema_opens_without_running_the_schema_script(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "index.db"
    CacheIndex(path).close()
    with sqlite3.connect(path) as db:
        assert db.execute("PRAGMA user_version").fetchone() == (SCHEMA_VERSION,)
        assert db.execute("SELECT schema_version FROM meta").fetchall() == [(SCHEMA_VERSION,)]
        assert db.execute("PRAGMA journal_mode").fetchone() == ("wal",)  # the file keeps WAL mode
    monkeypatch.setattr(connection_module, "_SCHEMA", "SELECT no_such_column FROM no_such_table;")
    reopened = CacheIndex(path)  # the stamp matches: the (now broken) script is not run
    reopened.record_ref(REF, BlobRow(digest=Digest("a" * 64), size=1, media_type=MANIFEST_TYPE), "image", [])
    assert reopened.ref(REF) is not None
    reopened.close()
    with pytest.raises(CacheError):  # a new file has no stamp: the script runs
        CacheIndex(tmp_path / "new.db")


def test_an_index_stamped_before_user_version_is_migrated_and_stamped(tmp_path: Path) -> None:
    path = tmp_path / "index.db"
    with sqlite3.connect(path) as db:  # schema 1: meta says 1, no user_version, no possession table
        db.executescript("CREATE TABLE meta(schema_version INTEGER NOT NULL); INSERT INTO meta VALUES (1);")
    index = CacheIndex(path)
    assert index.held("r.io/team/app", [Digest("a" * 64)]) == frozenset()
    index.close()
    with sqlite3.connect(path) as db:
        assert db.execute("PRAGMA user_version").fetchone() == (SCHEMA_VERSION,)
        assert db.execute("SELECT schema_version FROM meta").fetchall() == [(SCHEMA_VERSION,)]
        assert ("possession",) in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'").fetchall()


def test_a_new_index_is_made_in_one_transaction_and_its_commits_wait_for_no_sync(tmp_path: Path) -> None:
    """The WAL of a new index holds each page of it once: a commit per table would write the schema page each time.

    WAL with synchronous = NORMAL: a commit is not synced (a kill loses nothing committed, the WAL is synced when it is
    checkpointed), where FULL syncs the WAL at every commit.
    """
    index = CacheIndex(tmp_path / "index.db")
    db = index._sql.connection()
    pages, page_size = db.execute("PRAGMA page_count").fetchone()[0], db.execute("PRAGMA page_size").fetchone()[0]
    frames = ((tmp_path / "index.db-wal").stat().st_size - 32) // (24 + page_size)  # a header, then one per frame
    assert frames == pages
    assert db.execute("PRAGMA synchronous").fetchone() == (1,)  # NORMAL
    index.close()


def _statements(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every statement the index's connections run from now on (PRAGMAs too), as SQLite's trace callback sees them."""
    seen: list[str] = []
    connect = sqlite3.connect

    def traced(*args: Any, **kwargs: Any) -> sqlite3.Connection:
        db = connect(*args, **kwargs)
        db.set_trace_callback(seen.append)
        return db

    monkeypatch.setattr(sqlite3, "connect", traced)
    return seen


def test_only_an_empty_file_is_made_an_index_without_syncs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A new index: `synchronous = OFF` while it is made, NORMAL again before anything else is written to it.

    An index with content (here one of schema 1, migrated) is never written unsynced: a power loss could tear it.
    """
    seen = _statements(monkeypatch)
    index = CacheIndex(tmp_path / "index.db")
    db = index._sql.connection()
    pragmas = [s for s in seen if s.startswith("PRAGMA synchronous")]
    assert pragmas == ["PRAGMA synchronous = NORMAL", "PRAGMA synchronous = OFF", "PRAGMA synchronous = NORMAL"]
    assert seen.index("PRAGMA synchronous = OFF") < seen.index("PRAGMA journal_mode = WAL")
    assert seen[-2:] == ["COMMIT;", "PRAGMA synchronous = NORMAL"]  # back as soon as the schema is committed
    assert db.execute("PRAGMA synchronous").fetchone() == (1,)  # NORMAL for every later commit
    index.close()
    old = tmp_path / "old.db"
    with sqlite3.connect(old) as made:  # schema 1: meta says 1, no user_version
        made.executescript("CREATE TABLE meta(schema_version INTEGER NOT NULL); INSERT INTO meta VALUES (1);")
    seen.clear()
    migrated = CacheIndex(old)
    migrated._sql.connection()
    migrated.close()
    assert "PRAGMA synchronous = OFF" not in seen
    assert "PRAGMA journal_mode = WAL" in seen  # the script did run


STRACE = shutil.which("strace")


@pytest.mark.skipif(STRACE is None, reason="strace counts the syncs")
def test_a_new_index_is_made_with_no_sync_and_its_first_commit_adds_none(tmp_path: Path) -> None:
    """No sync while a new index is made, nor at its first commit (strace counts every kind of sync call).

    With NORMAL throughout, making it cost five (journal, directory, file, WAL header, directory) before a cold call's
    first request, each waiting for the file system's journal: 1-8 ms apiece on a busy disk.
    """
    script = (
        "import sys\n"
        "from ocivendir.cache.index import BlobRow, CacheIndex\n"
        "from ocivendir.oci.reference import Digest\n"
        "index = CacheIndex(sys.argv[1])\n"
        "index._sql.connection()\n"
        "sys.stderr.write('made\\n')\n"
        "index.record_ref('r.io/team/app@sha256:' + 'a' * 64, "
        "BlobRow(digest=Digest('a' * 64), size=1, media_type='m'), 'image', [])\n"
        "sys.stderr.write('recorded\\n')\n"
        "import os; os._exit(0)\n"  # as a served call ends: the connection is kept, not closed (no checkpoint)
    )
    done = subprocess.run(
        [str(STRACE), "-f", "-qq", "-e", "trace=fsync,fdatasync,sync_file_range,syncfs",
         sys.executable, "-c", script, str(tmp_path / "index.db")],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert lines[-2:] == ["made", "recorded"], done.stderr
    assert lines == ["made", "recorded"]  # no sync before, between or after


@pytest.mark.parametrize("fault", ["read-only", "full"])
def test_an_index_that_cannot_be_written_is_read_and_each_write_says_why(tmp_path: Path, fault: str) -> None:
    """Never the advice to rebuild or remove it: the filesystem is the problem, and its reads are all still good."""
    with small_tmpfs(tmp_path / "cache", "1m") as mount:
        written = CacheIndex(mount.path / "index.db")
        written.put_tag("r.example/app:v1", Digest("a" * 64))
        written.close()
        if fault == "read-only":
            mount.read_only()
        else:
            fill(mount.path)
        index = CacheIndex(mount.path / "index.db")
        try:
            assert index.tag("r.example/app:v1") is not None
            with pytest.raises(CacheUnwritable) as caught:
                index.put_tag("r.example/app:v2", Digest("b" * 64))
        finally:
            index.close()
        reason = "read-only file system" if fault == "read-only" else "no space left on device"
        assert reason in caught.value.message
        assert "rebuild" not in str(caught.value)


@pytest.mark.parametrize("linked", [False, True], ids=["file", "symlink"])
def test_a_read_only_index_whose_wal_holds_commits_is_never_read_without_them(tmp_path: Path, linked: bool) -> None:
    """A writer killed with a commit in its WAL, the `-shm` gone, the mount then read-only: SQLite cannot read it.

    Reading the main file alone (`immutable=1`) would give rows the WAL replaced. SQLite keeps the WAL beside the file
    a symlink names, so that is where it must be looked for.
    """
    import os  # noqa: PLC0415

    with small_tmpfs(tmp_path / "cache", "2m") as mount:
        if linked:
            (mount.path / "index.db").symlink_to("real.db")
        written = CacheIndex(mount.path / "index.db")
        written.put_tag("r.example/app:v1", Digest("a" * 64))
        written.close()
        pid = os.fork()
        if pid == 0:  # killed after its commit: the WAL keeps it, unmerged
            CacheIndex(mount.path / "index.db").put_tag("r.example/app:v1", Digest("b" * 64))
            os._exit(0)
        os.waitpid(pid, 0)
        for shm in mount.path.glob("*-shm"):
            shm.unlink()
        mount.read_only()
        with pytest.raises(CacheUnwritable):  # when it is opened, or at its first read
            CacheIndex(mount.path / "index.db").tag("r.example/app:v1")
