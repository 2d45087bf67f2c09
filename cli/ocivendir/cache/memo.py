"""Owns: the index's read memo — what a warm run asks the index, answered from small files without opening SQLite.

A warm run asks the index a few things about the content it syncs: which of its blobs a repository possesses, who
may read its manifest (grants), a bundle's relocation verdict, the ref's row and a tag's last answer. Answering them
from SQLite cost a tenth of a warm run's CPU: loading the library, then creating and removing the WAL's `-wal` and
`-shm` files. So a run that had to ask SQLite writes what it read, as the rows SQLite returned, to
`memo/<sha256 of the repository>.json`, and later runs read them there. The rows are decoded by `cache/rows.py`, as
rows from SQLite are.

A shard holds only while what it answers is unchanged. Every write to the index changes a generation token before it
begins and after it commits: the repository's (`memo/<sha256>.gen`) when the write concerns one repository (its
refs, possession, grants, verdicts, tags: a ref's last-use refresh invalidates that repository's answers only), the
whole index's (`index.gen`) when it may concern any (removing refs and blobs, a new or migrated index). A shard
records both tokens as its run read them before asking SQLite, and is used only while both are the same; a run saves
nothing when a token changed while it ran. The index's token also carries the boot id: a token written just before
a power loss may not have reached the disk when the index's commit did. The decisions that depend on time (a
verdict's recheck, refreshing a ref's last use) stay with the callers, on the rows' own times, as with SQLite.
"""

from __future__ import annotations

import hashlib
import json
import os
from stat import S_ISREG

from ocivendir import diag, jsondoc
from ocivendir.fs.remove import remove_file
from ocivendir.fs.swap import atomic_write

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = ["GENERATION", "MEMO_DIR", "Memo", "bump", "generation", "state"]

_log = diag.logger("ocivendir.cache")

GENERATION = "index.gen"
MEMO_DIR = "memo"
_FORMAT = 2
_MAX_BYTES = 256 * 1024  # a shard larger than this is not read (it is rewritten smaller by the next run that learns)
_MAX_ANSWERS = 1024  # answers kept per shard; past that, a shard keeps only the run's own
_SQLITE = b"SQLite format 3\x00"
_BOOT_ID = "/proc/sys/kernel/random/boot_id"


def generation(root: str) -> str:
    """The whole index's generation token ('' when there is none yet, or it is unreadable)."""
    return _token(os.path.join(root, GENERATION))


def _token(path: str) -> str:
    """A generation token ('' when there is none yet)."""
    data = _read_regular(path, 64)
    return "" if data is None else data.decode("ascii", "replace")


def _read_regular(path: str, limit: int) -> bytes | None:
    """Up to `limit` bytes of a regular file; None for anything else (a FIFO planted here cannot hang the run)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        if not S_ISREG(os.fstat(fd).st_mode):
            return None
        return os.read(fd, limit)
    except OSError:
        return None
    finally:
        os.close(fd)


def state(db: str) -> str | None:
    """The generation of the index at `db` (its token and the boot id), or None when no memo may be used now.

    None when there is no token yet, and when the file does not start as an SQLite file does (opening it is how its
    error is reported).
    """
    token = generation(os.path.dirname(db))
    if not token or _read_regular(db, 16) != _SQLITE:
        return None
    return f"{token} {_BOOT}"


_BOOT = _token(_BOOT_ID).strip()  # this boot's id: it cannot change while a process lives


def bump(root: str, repository: str | None = None) -> None:
    """A new generation for one repository's answers, or (None) for the whole index's."""
    if repository is None:
        _stamp(os.path.join(root, GENERATION))
        return
    directory = os.path.join(root, MEMO_DIR)
    if os.path.islink(directory):  # tokens and shards live inside the cache only (and such a memo is never read)
        return
    path = os.path.join(directory, _name(repository, ".gen"))
    try:
        _stamp(path)
    except FileNotFoundError:  # the memo's first token
        os.makedirs(directory, mode=0o700, exist_ok=True)
        _stamp(path)


def _stamp(path: str) -> None:
    """Write a new random token to `path`: over the old one in place, when that is a file of the token's length.

    Every token has the same length, so a reader sees the old token, the new one or a mix of both, and a mix is a
    token no run read before: each answers as the new one does. In place, a write creates no file (a cold run bumps
    tokens twice per commit, and a new inode is dear on a busy file system). An empty file (just made) is written too;
    anything else there — a torn token, a FIFO, a file with other links — is replaced by rename, as every token was.
    """
    token = os.urandom(16).hex().encode()
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, 0o600)
    except FileNotFoundError:
        raise
    except OSError:  # a link, a directory, a FIFO nobody reads: replaced by rename, or the error that meets
        fd = -1
    if fd >= 0:
        try:
            info = os.fstat(fd)
            if S_ISREG(info.st_mode) and info.st_nlink == 1 and info.st_size in {0, len(token)}:
                os.pwrite(fd, token, 0)
                return
        except OSError as exc:  # a full filesystem, say: the error names the file, as a failed rename does
            raise OSError(exc.errno, exc.strerror, path) from None
        finally:
            os.close(fd)
    atomic_write(path, token, durable=False)


def _name(repository: str, suffix: str) -> str:
    return f"{hashlib.sha256(repository.encode()).hexdigest()}{suffix}"


class Memo:
    """One run's view of the memo: answers read from the shards, and what the run learned from SQLite."""

    def __init__(self, db: str) -> None:
        """The memo of the index at `db` (in the cache's root).

        The index's generation is read at the first question (the run holds the cache's lock by then) and again
        for every shard read: a shard counts only in the generation of the moment it is read.
        """
        self._db = db
        self._root = root = os.path.dirname(db)
        self._dir = os.path.join(root, MEMO_DIR)
        self.state: str | None = ""  # "": not read yet; None: no memo for this run
        self._shards: dict[str, tuple[str, dict[str, object]]] = {}  # repository -> its token and answers, as read
        self._learned: dict[str, dict[str, object]] = {}  # repository -> answers from SQLite

    def answer(self, repository: str, key: str) -> tuple[bool, object]:
        """`(True, answer)` when the memo holds one for `key` (of `repository`), else `(False, None)`.

        The first question about a repository reads its token: a run asks before it reads SQLite.
        """
        if self.state is None:
            return False, None
        answers = self._shard(repository)[1]
        if self.state is None:  # the index's generation changed since the run's first question
            return False, None
        if key in answers:
            return True, answers[key]
        return False, None

    def disable(self) -> None:
        """Answer nothing more (the run is writing to the index) and save nothing."""
        self.state = None

    def forget(self, repositories: set[str]) -> None:
        """Remove the shards and tokens of repositories the index no longer holds anything of (best effort)."""
        for repository in repositories:
            for suffix in (".json", ".gen"):
                try:
                    remove_file(os.path.join(self._dir, _name(repository, suffix)))
                except OSError as exc:
                    _log.debug("could not remove the memo of %s: %s", repository, exc)

    def learn(self, repository: str, key: str, value: object) -> None:
        """Remember an answer SQLite gave, for `save`."""
        self._learned.setdefault(repository, {})[key] = value

    def save(self, *, wrote: bool) -> None:
        """Write what was learned, unless the run wrote to the index or a generation changed since it was read."""
        if not self._learned or wrote or not self.state or state(self._db) != self.state:
            return
        if os.path.islink(self._dir) or not os.path.isdir(self._dir):  # no token was ever written: nothing to save
            return
        for repository, learned in self._learned.items():
            token, known = self._shard(repository)
            if not token or _token(os.path.join(self._dir, _name(repository, ".gen"))) != token:
                continue  # the repository has no generation yet (never written), or one of its writes ran meanwhile
            answers = {**known, **learned} if len(known) + len(learned) <= _MAX_ANSWERS else dict(learned)
            try:
                data = self._encoded(repository, token, answers)
                if len(data) > _MAX_BYTES:  # too large to be read back: the run's own answers, if they fit
                    data = self._encoded(repository, token, learned)
            except (
                ValueError,
                TypeError,
                UnicodeEncodeError,
            ) as exc:  # a value JSON cannot hold: that shard is not written
                _log.debug("not writing the memo of %s: %s", repository, exc)
                continue
            if len(data) > _MAX_BYTES:
                continue
            try:
                atomic_write(os.path.join(self._dir, _name(repository, ".json")), data, durable=False)
            except OSError as exc:  # the memo is an optimisation: it never fails a run
                _log.debug("could not write the memo of %s: %s", repository, exc)

    def _encoded(self, repository: str, token: str, answers: dict[str, object]) -> bytes:
        doc = {"format": _FORMAT, "state": self.state, "token": token, "repository": repository, "answers": answers}
        return _json(doc).encode()

    def _shard(self, repository: str) -> tuple[str, dict[str, object]]:
        """The repository's token, and the answers of its shard when written in this generation (else none)."""
        known = self._shards.get(repository)
        if known is None:
            now = None if os.path.islink(self._dir) else state(self._db)
            if self.state == "":
                self.state = now
            elif now != self.state:
                self.state = None  # changed since the run's first question: this run reads SQLite from here on
            if self.state is None:
                return "", {}
            path = os.path.join(self._dir, _name(repository, ".gen"))
            token = _token(path)
            if not token:  # never written since the memo exists: start its generation, before SQLite is read
                try:
                    bump(self._root, repository)
                except OSError as exc:
                    _log.debug("no memo generation for %s: %s", repository, exc)
                token = _token(path)
            known = self._shards[repository] = (token, self._read(repository, token) if token else {})
        return known

    def _read(self, repository: str, token: str) -> dict[str, object]:
        path = os.path.join(self._dir, _name(repository, ".json"))
        data = _read_regular(path, _MAX_BYTES + 1)
        if data is None:
            return {}
        expected: dict[str, object] = {"state": self.state, "token": token, "repository": repository}
        return _answers(data, expected, lambda why: _log.debug("ignoring memo %s: %s", path, why))


def _answers(data: bytes, expected: dict[str, object], ignore: Callable[[str], None]) -> dict[str, object]:
    if len(data) > _MAX_BYTES:
        ignore("too large")
        return {}
    try:
        doc = jsondoc.loads(data)  # bytes that are not UTF-8 are a ValueError too; too deep is invalid JSON
    except ValueError:
        ignore("not JSON")
        return {}
    if not (isinstance(doc, dict) and doc.get("format") == _FORMAT and isinstance(doc.get("answers"), dict)):
        ignore("not a memo of this version")
        return {}
    if any(doc.get(field) != value for field, value in expected.items()):
        return {}  # read in another generation (or for another repository): stale, not damaged
    answers: dict[str, object] = doc["answers"]
    return answers


def _json(value: object) -> str:
    """A shard's JSON: compact, keys sorted; NaN, infinities and what JSON cannot hold are refused."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
