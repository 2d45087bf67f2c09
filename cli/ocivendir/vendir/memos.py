"""Owns: what a process that serves calls remembers of vendir's YAML — parsed input streams and rendered locks.

kapp-controller sends the same stdin for an App every time it reconciles it, and the lock it gets back is the same
bytes while the App's content is unchanged; go-yaml's decoding and encoding of them were a sixth of a warm call. So
a parsed stream is remembered by the sha256 of its inputs (every name and every byte, in order: nothing in the
environment changes how they parse), and a lock's bytes by the sha256 of what they render (the lock's fields, as
JSON). Each memo holds at most SIZE entries, least recently used dropped first. A parsed stream is handed out with a
copy of every mapping and list in it (its dataclasses are frozen), so a call that altered what it got could not alter
the next call's; bytes are immutable. Failures are
never remembered: the next call parses again and fails the same way.
"""

from __future__ import annotations

import hashlib
import json
from collections import OrderedDict
from dataclasses import replace

from ocivendir.kept import recall, remember, through
from ocivendir.vendir.config import InputStream, parse_stream

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence
    from typing import Any

    from ocivendir.vendir.lockfile import LockConfig

__all__ = ["SIZE", "dumped", "parsed"]

SIZE = 16
_streams: OrderedDict[bytes, InputStream] = OrderedDict()  # per-process: keyed by sha256 of the inputs' names and bytes
_locks: OrderedDict[bytes, bytes] = OrderedDict()  # per-process: keyed by sha256 of the lock's fields as JSON


def parsed(sources: Sequence[tuple[str, str | bytes]]) -> InputStream:
    """`parse_stream(sources)`, remembered by the inputs' digest; a copy of its own for every caller."""
    sha = hashlib.sha256()
    for name, text in sources:
        data = text.encode("utf-8", "surrogatepass") if isinstance(text, str) else text
        for part in (name.encode("utf-8", "surrogatepass"), data, b"str" if isinstance(text, str) else b"bytes"):
            sha.update(len(part).to_bytes(8, "big"))
            sha.update(part)
    key = sha.digest()
    known = recall(_streams, key)
    if known is not None:
        return _copied(known)
    stream = parse_stream(sources)
    remember(_streams, key, _copied(stream), SIZE)
    return stream


def _fresh(value: Any) -> Any:  # noqa: ANN401 - decoded YAML: mappings, lists and scalars
    """A copy of decoded YAML's mappings and lists (its scalars are immutable)."""
    if isinstance(value, dict):
        return {k: _fresh(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_fresh(v) for v in value]
    return value


def _copied(stream: InputStream) -> InputStream:
    """The stream with a copy of every mapping and list it holds; its dataclasses are frozen.

    `copy.deepcopy` gives the same result several times slower.
    """
    config = stream.config
    directories = tuple(replace(d, contents=tuple(replace(c, source=_fresh(c.source)) for c in d.contents))
                        for d in config.directories)  # fmt: skip
    return InputStream(
        config=replace(config, directories=directories),
        secrets=tuple(replace(s, data=dict(s.data)) for s in stream.secrets),
        config_maps=tuple(replace(m, data=dict(m.data)) for m in stream.config_maps),
    )


def _canonical(value: object) -> object:
    """A JSON value that tells apart every value a lock can hold; a TypeError for any other (never an address)."""
    if value is None or isinstance(value, str | bool | int | float):
        return value
    if isinstance(value, dict):
        if not all(isinstance(k, str) for k in value):
            raise TypeError("a mapping with keys that are not text")
        return ["map", [[k, _canonical(v)] for k, v in value.items()]]
    if isinstance(value, list | tuple):
        return [type(value).__name__, [_canonical(v) for v in value]]
    raise TypeError(f"not remembered: {type(value).__name__}")


def dumped(lock: LockConfig) -> bytes:
    """`lock.dump()`, remembered by the digest of the lock's fields (a lock holding anything else is not remembered)."""
    fields = [
        [d.path, [[c.path, c.source_type, c.config_digest, c.data] for c in d.contents]] for d in lock.directories
    ]
    try:
        key = hashlib.sha256(json.dumps(_canonical(fields), allow_nan=False).encode()).digest()
    except (TypeError, ValueError):
        return lock.dump()
    return through(_locks, key, lock.dump, SIZE)
