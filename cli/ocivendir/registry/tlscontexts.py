"""Owns: the TLS contexts a process keeps between calls, each used again only while every file it was made from is.

Making a context reads the system roots as Go does (`registry/truststore.py`: Debian's bundle and every file of
/etc/ssl/certs) and loads them into OpenSSL: 30-40 ms of CPU for Debian's 144 roots, paid by every call that opens a
TLS connection, where a warm vendir call costs 5-7 ms in all. A reused server worker keeps the last `MAX_KEPT`
contexts, keyed by what a call asks of TLS (verification on or off, `SSL_CERT_FILE`, `SSL_CERT_DIR`, the CA files
named by flags and a `registries.yaml` entry, its client certificate and key), and hands one out again only when each
path its making consulted — every bundle file tried, each certificate directory and every entry read from it, each
named file — still has the identity (`fs/fileid.py`: device, inode, size, mtime, ctime) it had before it was read. A
file added to or removed from a directory changes the directory's; a file rewritten in place, its own. A context made
while one of those files had not settled (changed within `SETTLED_NS`, where a later change could keep every field)
is not kept. What a call would have made is what it gets: the same roots, the same certificate, the same warning when
Go would find no root at all. A context is never changed once made (urllib3 sets on it only what it already holds),
so calls and threads share it as the connections of one call always did.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from dataclasses import dataclass
from threading import Lock

from ocivendir.fs.fileid import SETTLED_NS
from ocivendir.registry.truststore import path_identity, report

TYPE_CHECKING = False
if TYPE_CHECKING:
    import ssl
    from collections.abc import Callable, Hashable

    from ocivendir.registry.truststore import Consulted, TrustStore

__all__ = ["MAX_KEPT", "Made", "forget_all", "kept"]

MAX_KEPT = 8  # contexts kept: one per TLS profile a worker's callers use (a profile per registries.yaml CA, say)

_LOCK = Lock()
_KEPT: OrderedDict[Hashable, Made] = OrderedDict()  # key → the context made for it, least recently used first


@dataclass(frozen=True)
class Made:
    """A context, the paths its making consulted with their identities then, and the system roots it holds (if any)."""

    context: ssl.SSLContext
    consulted: Consulted
    store: TrustStore | None = None


def kept(key: Hashable, make: Callable[[], Made]) -> ssl.SSLContext:
    """The context kept for `key` if every file it was made from is unchanged, else `make()`'s (kept if settled)."""
    with _LOCK:
        made = _KEPT.get(key)
    if made is not None and _unchanged(made.consulted):
        with _LOCK:
            if key in _KEPT:
                _KEPT.move_to_end(key)
        if made.store is not None:
            report(made.store)  # the warning its making printed, printed again for this call
        return made.context
    made = make()  # raises for a file that cannot be loaded: nothing is kept then
    with _LOCK:
        if _settled(made.consulted):
            _KEPT[key] = made
            _KEPT.move_to_end(key)
            while len(_KEPT) > MAX_KEPT:
                _KEPT.popitem(last=False)
        else:
            _KEPT.pop(key, None)
    return made.context


def forget_all() -> None:
    """Drop every kept context (a test's fresh start)."""
    with _LOCK:
        _KEPT.clear()


def _unchanged(consulted: Consulted) -> bool:
    return all(path_identity(path) == then for path, then in consulted)


def _settled(consulted: Consulted) -> bool:
    now = time.time_ns()
    return all(then is None or now - then[4] >= SETTLED_NS for _, then in consulted)
