"""Owns: the cache's SQLite index — refs, blobs, edges, relocation verdicts, schemes, tag answers, last use."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from ocivendir.cache.store import LayoutEntry
from ocivendir.errors import CacheError
from ocivendir.oci.reference import Digest, parse_digest

__all__ = ["BlobRow", "CacheIndex", "RefRow", "Verdict"]

SCHEMA_VERSION = 1
_T = TypeVar("_T")
_BUSY_RETRIES = 20
_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta(schema_version INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS blobs(digest TEXT PRIMARY KEY, size INTEGER NOT NULL, media_type TEXT NOT NULL,
    created REAL NOT NULL, last_used REAL NOT NULL);
CREATE TABLE IF NOT EXISTS refs(ref TEXT PRIMARY KEY, manifest_digest TEXT NOT NULL, kind TEXT NOT NULL,
    media_type TEXT NOT NULL DEFAULT '', size INTEGER NOT NULL DEFAULT 0, created REAL NOT NULL,
    last_used REAL NOT NULL);
CREATE TABLE IF NOT EXISTS edges(manifest_digest TEXT NOT NULL, blob_digest TEXT NOT NULL,
    PRIMARY KEY(manifest_digest, blob_digest));
CREATE INDEX IF NOT EXISTS edges_blob ON edges(blob_digest);
CREATE TABLE IF NOT EXISTS verdicts(bundle_ref TEXT PRIMARY KEY, relocated INTEGER NOT NULL, method TEXT NOT NULL,
    locations_digest TEXT, missing_json TEXT NOT NULL, checked_at REAL NOT NULL);
CREATE TABLE IF NOT EXISTS schemes(host TEXT PRIMARY KEY, scheme TEXT NOT NULL, checked_at REAL NOT NULL);
CREATE TABLE IF NOT EXISTS tags(ref TEXT PRIMARY KEY, digest TEXT NOT NULL, resolved_at REAL NOT NULL);
"""
_UPSERT_BLOB = (
    "INSERT INTO blobs(digest, size, media_type, created, last_used) VALUES (?,?,?,?,?) "
    "ON CONFLICT(digest) DO UPDATE SET last_used = excluded.last_used"
)
_UPSERT_REF = (
    "INSERT INTO refs(ref, manifest_digest, kind, media_type, size, created, last_used) VALUES (?,?,?,?,?,?,?) "
    "ON CONFLICT(ref) DO UPDATE SET manifest_digest = excluded.manifest_digest, kind = excluded.kind, "
    "media_type = excluded.media_type, size = excluded.size, last_used = excluded.last_used"
)
_PUT_VERDICT = (
    "INSERT OR REPLACE INTO verdicts(bundle_ref, relocated, method, locations_digest, missing_json, checked_at) "
    "VALUES (?,?,?,?,?,?)"
)
_LISTING = (
    "SELECT r.ref, r.manifest_digest, r.kind, r.media_type, r.size, r.created, r.last_used, "
    "COALESCE((SELECT SUM(b.size) FROM edges e JOIN blobs b ON b.digest = e.blob_digest "
    "WHERE e.manifest_digest = r.manifest_digest), 0), v.relocated "
    "FROM refs r LEFT JOIN verdicts v ON v.bundle_ref = r.ref ORDER BY r.last_used DESC, r.ref"
)


@dataclass(frozen=True, kw_only=True)
class RefRow:
    """A cached ref: a fully qualified `registry/repo@sha256:<hex>` and what it is."""

    ref: str
    manifest_digest: Digest
    kind: str
    media_type: str
    size: int
    created: float
    last_used: float


@dataclass(frozen=True, kw_only=True)
class BlobRow:
    """A cached blob."""

    digest: Digest
    size: int
    media_type: str


@dataclass(frozen=True, kw_only=True)
class Verdict:
    """A recorded relocation verdict for a fully qualified bundle ref."""

    bundle_ref: str
    relocated: bool
    method: str
    missing: tuple[str, ...]
    checked_at: float
    locations_digest: Digest | None = None


class CacheIndex:
    """One connection to `index.db`, shared by the run's threads under a lock; busy waits never reach users."""

    def __init__(self, path: Path, clock: Callable[[], float] = time.time) -> None:
        """Open (and create or migrate) the index."""
        import sqlite3  # noqa: PLC0415 - keeps `--help` and `version` from importing sqlite3

        self._sqlite3 = sqlite3
        self._clock = clock
        self._lock = threading.RLock()
        try:
            self._db = sqlite3.connect(path, timeout=5.0, check_same_thread=False, isolation_level=None)
            self._db.execute("PRAGMA busy_timeout = 5000")
            self._retry(lambda: self._db.execute("PRAGMA journal_mode = WAL"))
            self._retry(lambda: self._db.executescript(_SCHEMA))
            self._retry(self._stamp_version)
        except sqlite3.DatabaseError as exc:
            raise CacheError(f"Cannot open cache index '{path}': {exc}") from None

    def _stamp_version(self) -> None:
        if self._db.execute("SELECT schema_version FROM meta").fetchone() is None:
            self._db.execute("INSERT INTO meta(schema_version) VALUES (?)", (SCHEMA_VERSION,))

    def close(self) -> None:
        """Close the connection."""
        with self._lock:
            self._db.close()

    def _retry(self, action: Callable[[], _T]) -> _T:
        for attempt in range(_BUSY_RETRIES):
            try:
                with self._lock:
                    return action()
            except self._sqlite3.OperationalError as exc:
                if "locked" not in str(exc) and "busy" not in str(exc):
                    raise
                time.sleep(min(0.05 * (attempt + 1), 0.5))
        with self._lock:
            return action()

    @property
    def now(self) -> float:
        """The index's clock."""
        return self._clock()

    def _write(self, statements: Iterable[tuple[str, tuple[object, ...]]]) -> None:
        items = list(statements)

        def run() -> None:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                for sql, params in items:
                    self._db.execute(sql, params)
                self._db.execute("COMMIT")
            except BaseException:
                self._db.execute("ROLLBACK")
                raise

        self._retry(run)

    def _rows(self, sql: str, params: tuple[object, ...] = ()) -> list[tuple[object, ...]]:
        return self._retry(lambda: self._db.execute(sql, params).fetchall())

    # --- blobs and refs -------------------------------------------------------------------------------------

    def record_ref(self, ref: str, manifest: BlobRow, kind: str, blobs: Iterable[BlobRow]) -> None:
        """Record a ref whose manifest and blobs are all present, with the blobs it needs."""
        now = self.now
        rows = [manifest, *blobs]
        statements: list[tuple[str, tuple[object, ...]]] = [
            (_UPSERT_BLOB, (str(b.digest), b.size, b.media_type, now, now)) for b in rows
        ]
        statements += [
            (
                "INSERT OR IGNORE INTO edges(manifest_digest, blob_digest) VALUES (?,?)",
                (str(manifest.digest), str(b.digest)),
            )
            for b in rows
        ]
        statements.append(
            (_UPSERT_REF, (ref, str(manifest.digest), kind, manifest.media_type, manifest.size, now, now))
        )
        self._write(statements)

    def ref(self, ref: str) -> RefRow | None:
        """A cached ref, if recorded."""
        rows = self._rows(
            "SELECT ref, manifest_digest, kind, media_type, size, created, last_used FROM refs WHERE ref = ?", (ref,)
        )
        return _ref_row(rows[0]) if rows else None

    def refs(self) -> list[RefRow]:
        """Every cached ref, most recently used first."""
        rows = self._rows(
            "SELECT ref, manifest_digest, kind, media_type, size, created, last_used FROM refs "
            "ORDER BY last_used DESC, ref"
        )
        return [_ref_row(r) for r in rows]

    def layout_entries(self) -> list[LayoutEntry]:
        """What index.json lists: one descriptor per cached ref."""
        return [
            LayoutEntry(ref=r.ref, digest=r.manifest_digest, media_type=r.media_type, size=r.size) for r in self.refs()
        ]

    def blob(self, digest: Digest) -> BlobRow | None:
        """A recorded blob."""
        rows = self._rows("SELECT digest, size, media_type FROM blobs WHERE digest = ?", (str(digest),))
        if not rows:
            return None
        return BlobRow(digest=parse_digest(str(rows[0][0])), size=int(str(rows[0][1])), media_type=str(rows[0][2]))

    def iter_blobs(self) -> Iterator[BlobRow]:
        """Every recorded blob."""
        for row in self._rows("SELECT digest, size, media_type FROM blobs ORDER BY digest"):
            yield BlobRow(digest=parse_digest(str(row[0])), size=int(str(row[1])), media_type=str(row[2]))

    def edges(self, manifest_digest: Digest) -> list[Digest]:
        """The blobs a manifest needs (itself included)."""
        rows = self._rows("SELECT blob_digest FROM edges WHERE manifest_digest = ?", (str(manifest_digest),))
        return [parse_digest(str(r[0])) for r in rows]

    def listing(self) -> list[tuple[RefRow, int, bool | None]]:
        """Every ref with the bytes of the blobs it needs and its verdict, in one query (fast for 10,000 refs)."""
        rows = self._rows(_LISTING)
        listed = []
        for row in rows:
            verdict = None if row[8] is None else bool(row[8])
            listed.append((_ref_row(row[:7]), int(str(row[7])), verdict))
        return listed

    def graph(self) -> tuple[dict[str, set[str]], dict[str, int]]:
        """All edges (manifest digest → blob digests) and all blob sizes, for planning prunes in memory."""
        edges: dict[str, set[str]] = {}
        for manifest, blob in self._rows("SELECT manifest_digest, blob_digest FROM edges"):
            edges.setdefault(str(manifest), set()).add(str(blob))
        sizes = {str(d): int(str(n)) for d, n in self._rows("SELECT digest, size FROM blobs")}
        return edges, sizes

    def unique_bytes(self) -> int:
        """Bytes of all recorded blobs, each counted once."""
        rows = self._rows("SELECT COALESCE(SUM(size), 0) FROM blobs")
        return int(str(rows[0][0]))

    def remove_refs(self, refs: Iterable[str]) -> list[Digest]:
        """Drop refs (and their verdicts); return the blobs no remaining ref needs, whose rows are deleted too."""
        refs = list(refs)
        self._write(("DELETE FROM refs WHERE ref = ?", (r,)) for r in refs)
        orphans = self._rows(
            "SELECT digest FROM blobs WHERE digest NOT IN ("
            " SELECT e.blob_digest FROM edges e JOIN refs r ON r.manifest_digest = e.manifest_digest)"
        )
        digests = [parse_digest(str(r[0])) for r in orphans]
        statements: list[tuple[str, tuple[object, ...]]] = []
        for digest in digests:
            statements.append(("DELETE FROM blobs WHERE digest = ?", (str(digest),)))
            statements.append(("DELETE FROM edges WHERE manifest_digest = ?", (str(digest),)))
        self._write(statements)
        return digests

    def forget_blob(self, digest: Digest) -> list[str]:
        """A blob is gone: drop its row and every ref that needs it; return those refs."""
        rows = self._rows(
            "SELECT r.ref FROM refs r JOIN edges e ON e.manifest_digest = r.manifest_digest WHERE e.blob_digest = ?",
            (str(digest),),
        )
        refs = sorted({str(r[0]) for r in rows})
        statements: list[tuple[str, tuple[object, ...]]] = [("DELETE FROM refs WHERE ref = ?", (r,)) for r in refs]
        statements.append(("DELETE FROM blobs WHERE digest = ?", (str(digest),)))
        self._write(statements)
        return refs

    # --- verdicts, schemes, tags ----------------------------------------------------------------------------

    def verdict(self, bundle_ref: str) -> Verdict | None:
        """The last recorded relocation verdict for a fully qualified bundle ref."""
        rows = self._rows(
            "SELECT relocated, method, missing_json, checked_at, locations_digest FROM verdicts WHERE bundle_ref = ?",
            (bundle_ref,),
        )
        if not rows:
            return None
        relocated, method, missing_json, checked_at, locations = rows[0]
        return Verdict(
            bundle_ref=bundle_ref,
            relocated=bool(relocated),
            method=str(method),
            missing=tuple(json.loads(str(missing_json))),
            checked_at=float(str(checked_at)),
            locations_digest=parse_digest(str(locations)) if locations else None,
        )

    def put_verdict(self, bundle_ref: str, *, relocated: bool, method: str, missing: Iterable[str]) -> None:
        """Record a verdict reached now."""
        params = (bundle_ref, int(relocated), method, None, json.dumps(list(missing)), self.now)
        self._write([(_PUT_VERDICT, params)])

    def put_locations(self, bundle_ref: str, digest: Digest) -> None:
        """Record the digest of the locations image behind a bundle's verdict (its nested-bundle hints, offline)."""
        sql = "UPDATE verdicts SET locations_digest = ? WHERE bundle_ref = ?"
        self._write([(sql, (str(digest), bundle_ref))])

    def verdicts(self) -> dict[str, Verdict]:
        """Every recorded verdict by bundle ref."""
        return {
            ref: v
            for ref in (str(r[0]) for r in self._rows("SELECT bundle_ref FROM verdicts"))
            if (v := self.verdict(ref))
        }

    def scheme_for(self, host: str) -> str | None:
        """The scheme that last worked for a host."""
        rows = self._rows("SELECT scheme FROM schemes WHERE host = ?", (host,))
        return str(rows[0][0]) if rows else None

    def remember_scheme(self, host: str, scheme: str) -> None:
        """Record the scheme that worked for a host."""
        self._write(
            [("INSERT OR REPLACE INTO schemes(host, scheme, checked_at) VALUES (?,?,?)", (host, scheme, self.now))]
        )

    def put_tag(self, ref: str, digest: Digest) -> None:
        """Record a tag's answer (used only by --stale-if-error)."""
        self._write(
            [("INSERT OR REPLACE INTO tags(ref, digest, resolved_at) VALUES (?,?,?)", (ref, str(digest), self.now))]
        )

    def tag(self, ref: str) -> tuple[Digest, float] | None:
        """The last recorded answer for a tag and when it was given."""
        rows = self._rows("SELECT digest, resolved_at FROM tags WHERE ref = ?", (ref,))
        return (parse_digest(str(rows[0][0])), float(str(rows[0][1]))) if rows else None


def _ref_row(row: tuple[object, ...]) -> RefRow:
    return RefRow(
        ref=str(row[0]),
        manifest_digest=parse_digest(str(row[1])),
        kind=str(row[2]),
        media_type=str(row[3]),
        size=int(str(row[4])),
        created=float(str(row[5])),
        last_used=float(str(row[6])),
    )
