"""Owns: the index's read memo — what a warm run asks the index, answered from small files without opening SQLite.

A warm run asks the index four things about the content it syncs: which of its blobs a repository possesses, who
may read its manifest (grants), a bundle's relocation verdict, and the ref's row. Answering them from SQLite cost a
tenth of a warm run's CPU: loading the library, then creating and removing the WAL's `-wal` and `-shm` files. So a run
that had to ask SQLite writes what it read, as the rows SQLite returned, to `memo/<sha256 of the repository>.json`,
and later runs read them there. The rows are decoded by `cache/rows.py`, as rows from SQLite are.

A memo holds only while the index is as it was read. Every write to the index replaces `index.gen` (a random token)
before it begins and after it commits. A memo records the state it was read in — that token and the identity
(inode, size, modification time) of `index.db` — and is used only while the state is the same and no `index.db-wal`
exists (a connection is open somewhere, or a crash left one for SQLite to recover). The decisions that depend on time
(a verdict's recheck, refreshing a ref's last use) stay with the callers, on the rows' own times, as with SQLite.
"""

from __future__ import annotations

import os

from ocivendir import diag, jsonread
from ocivendir.fs.remove import remove_file
from ocivendir.hashing import sha256_hex

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = ["GENERATION", "MEMO_DIR", "Memo", "bump", "state"]

_log = diag.logger("ocivendir.cache")

GENERATION = "index.gen"
MEMO_DIR = "memo"
_FORMAT = 1
_MAX_BYTES = 256 * 1024  # a shard larger than this is not read (it is rewritten smaller by the next run that learns)
_MAX_ANSWERS = 1024
_SQLITE = b"SQLite format 3\x00"  # answers kept per shard; past that, a shard keeps only the run's own


def state(root: str) -> str | None:
    """The index's state (generation token, `index.db`'s identity and header), or None when no memo may be used now.

    None also when `index.db` does not start as an SQLite file does: opening it is how its error is reported.
    """
    db = os.path.join(root, "index.db")
    try:
        with open(os.path.join(root, GENERATION), "rb") as handle:
            token = handle.read(64).decode("ascii")
        with open(db, "rb") as handle:
            info, header = os.fstat(handle.fileno()), handle.read(32)
    except (OSError, UnicodeDecodeError):
        return None
    if not header.startswith(_SQLITE) or os.path.lexists(db + "-wal"):
        return None
    return f"{token} {info.st_ino} {info.st_size} {info.st_mtime_ns} {header[24:28].hex()}"


def bump(root: str) -> None:
    """Give the index a new generation: every memo read before now stops being used."""
    path = os.path.join(root, GENERATION)
    tmp = f"{path}.{os.getpid()}.{os.urandom(4).hex()}.tmp"
    try:
        _create(tmp, os.urandom(16).hex().encode())
        os.replace(tmp, path)
    except BaseException:
        remove_file(tmp)
        raise


def _shard_name(repository: str) -> str:
    return f"{sha256_hex(repository.encode())}.json"


class Memo:
    """One run's view of the memo: answers read from the shards, and what the run learned from SQLite."""

    def __init__(self, root: str) -> None:
        """The memo of the cache at `root`, usable when the index's state can be read now."""
        self._root = root
        self._dir = os.path.join(root, MEMO_DIR)
        self.state = state(root)
        self._shards: dict[str, dict[str, object]] = {}  # repository -> answers read
        self._learned: dict[str, dict[str, object]] = {}  # repository -> answers from SQLite

    def answer(self, repository: str, key: str) -> tuple[bool, object]:
        """`(True, answer)` when the memo holds one for `key` (of `repository`), else `(False, None)`."""
        if self.state is None:
            return False, None
        shard = self._shards.get(repository)
        if shard is None:
            shard = self._shards[repository] = self._read(repository)
        if key in shard:
            return True, shard[key]
        return False, None

    def disable(self) -> None:
        """Answer nothing more (the run is writing to the index) and save nothing."""
        self.state = None

    def learn(self, repository: str, key: str, value: object) -> None:
        """Remember an answer SQLite gave, for `save`."""
        self._learned.setdefault(repository, {})[key] = value

    def save(self, *, wrote: bool) -> None:
        """Write what was learned, unless the run wrote to the index or the index changed since the run began."""
        if not self._learned or wrote:
            return
        if self.state is None:  # no generation yet (a new or older index), or the index was busy when the run began
            return
        if state(self._root) != self.state:
            return
        try:
            os.makedirs(self._dir, mode=0o700, exist_ok=True)
        except OSError as exc:  # the memo is an optimisation: it never fails a run
            _log.debug("no memo directory %s: %s", self._dir, exc)
            return
        if os.path.islink(self._dir) or not os.path.isdir(self._dir):  # shards are written inside the cache only
            return
        for repository, learned in self._learned.items():
            known = self._shards.get(repository)
            if known is None:
                known = self._read(repository)
            answers = {**known, **learned} if len(known) + len(learned) <= _MAX_ANSWERS else dict(learned)
            doc = {"format": _FORMAT, "state": self.state, "repository": repository, "answers": answers}
            try:
                data = _json(doc).encode()
            except (ValueError, UnicodeEncodeError) as exc:  # a value JSON cannot hold: that shard is not written
                _log.debug("not writing the memo of %s: %s", repository, exc)
                continue
            _write(os.path.join(self._dir, _shard_name(repository)), data)

    def _read(self, repository: str) -> dict[str, object]:
        """The answers of a shard written in this state for this repository; anything else counts as none."""
        path = os.path.join(self._dir, _shard_name(repository))
        try:
            fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW)
        except OSError:
            return {}
        try:
            data = os.read(fd, _MAX_BYTES + 1)
        except OSError:
            return {}
        finally:
            os.close(fd)
        return _answers(data, self.state, repository, lambda why: _log.debug("ignoring memo %s: %s", path, why))


def _answers(data: bytes, expected: str | None, repository: str, ignore: Callable[[str], None]) -> dict[str, object]:
    if len(data) > _MAX_BYTES:
        ignore("too large")
        return {}
    try:
        doc = jsonread.loads(data.decode())
    except (ValueError, RecursionError):
        ignore("not JSON")
        return {}
    if not (isinstance(doc, dict) and doc.get("format") == _FORMAT and isinstance(doc.get("answers"), dict)):
        ignore("not a memo of this version")
        return {}
    if doc.get("state") != expected or doc.get("repository") != repository:
        return {}  # read in another state of the index (or for another repository): stale, not damaged
    answers: dict[str, object] = doc["answers"]
    return answers


_ESCAPES = {'"': '\\"', "\\": "\\\\", **{chr(c): f"\\u{c:04x}" for c in range(32)}}


def _json(value: object) -> str:
    """JSON for the values rows hold (the json package imports re, whose import alone costs a warm run a tenth)."""
    if value is None or isinstance(value, bool):
        return "null" if value is None else "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if value - value != 0.0:  # nan or infinite (without importing math)
            raise ValueError("not a finite number")
        return repr(value)
    if isinstance(value, str):
        return '"' + "".join(_ESCAPES.get(c, c) for c in value) + '"'
    if isinstance(value, list):
        return "[" + ",".join(_json(item) for item in value) + "]"
    if isinstance(value, dict):
        return "{" + ",".join(f"{_json(str(k))}:{_json(v)}" for k, v in sorted(value.items())) + "}"
    raise ValueError(f"{type(value).__name__} is not a row value")


def _write(path: str, data: bytes) -> None:
    """Replace a shard (temp sibling + rename; no fsync: a shard lost or torn in a crash is not used)."""
    tmp = f"{path}.{os.getpid()}.{os.urandom(4).hex()}.tmp"
    try:
        _create(tmp, data)
        os.replace(tmp, path)
    except OSError as exc:
        remove_file(tmp)
        _log.debug("could not write memo %s: %s", path, exc)


def _create(path: str, data: bytes) -> None:
    """Write `data` to a new file (mode 0600)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
    finally:
        os.close(fd)
