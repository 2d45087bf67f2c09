"""Access grants of a shared cache: keyed fingerprints (never the secret), the key file, the schema migration."""

from __future__ import annotations

import hashlib
import sqlite3
import stat
from pathlib import Path

from ocivendir.cache.grants import ANONYMOUS_PRINCIPAL, Fingerprints, is_principal
from ocivendir.cache.index import CacheIndex
from ocivendir.oci.reference import Digest
from ocivendir.registry.credentials import Credential

ALICE = Credential(username="alice", password="hunter2")


def test_no_credential_is_anonymous_and_needs_no_key(tmp_path: Path) -> None:
    assert Fingerprints(tmp_path / "grants.key").principal("r.io", Credential()) == ANONYMOUS_PRINCIPAL
    assert not (tmp_path / "grants.key").exists()


def test_a_fingerprint_is_keyed_per_cache_and_never_a_plain_hash(tmp_path: Path) -> None:
    one = Fingerprints(tmp_path / "a" / "grants.key")
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    mine = one.principal("r.io", ALICE)
    assert is_principal(mine)
    assert mine == Fingerprints(tmp_path / "a" / "grants.key").principal("r.io", ALICE)  # stable: same key file
    assert mine != Fingerprints(tmp_path / "b" / "grants.key").principal("r.io", ALICE)  # another cache, another key
    assert mine != one.principal("other.io", ALICE)
    assert mine != one.principal("r.io", Credential(username="alice", password="hunter3"))
    for text in ("hunter2", "alice\0hunter2", "r.io\0alice\0hunter2\0\0"):
        assert hashlib.sha256(text.encode()).hexdigest() not in mine
    key = tmp_path / "a" / "grants.key"
    assert stat.S_IMODE(key.stat().st_mode) == 0o600
    assert len(key.read_bytes()) == 32


def test_a_malformed_key_is_replaced(tmp_path: Path) -> None:
    key = tmp_path / "grants.key"
    key.write_bytes(b"short")
    principal = Fingerprints(key).principal("r.io", ALICE)
    assert is_principal(principal)
    assert len(key.read_bytes()) == 32


def test_an_index_from_before_grants_opens_and_gains_the_table(tmp_path: Path) -> None:
    path = tmp_path / "index.db"
    with sqlite3.connect(path) as db:
        db.executescript(
            "CREATE TABLE meta(schema_version INTEGER NOT NULL); INSERT INTO meta VALUES (1);"
            "CREATE TABLE schemes(host TEXT PRIMARY KEY, scheme TEXT NOT NULL, checked_at REAL NOT NULL);"
        )
    index = CacheIndex(path)
    digest = Digest("a" * 64)
    assert index.grants(digest, "r.io/team/app") == frozenset()
    index.grant(digest, "r.io/team/app", ANONYMOUS_PRINCIPAL)
    assert index.grants(digest, "r.io/team/app") == {ANONYMOUS_PRINCIPAL}
    assert index.grants(digest, "r.io/team/other") == frozenset()
    index._write([("INSERT INTO grants VALUES (?,?,?,?)", (str(digest), "r.io/x", "root", 1.0))], repository=None)
    assert index.grants(digest, "r.io/x") == frozenset()  # a tampered principal is ignored
    index.close()
