"""Owns: the idle registry connections a server worker keeps between calls, and which later call may use them.

A warm tag reconcile over https costs its worker a TCP connect and a TLS handshake (~2.7 ms of CPU, and the
registry's own handshake) for one HEAD. A worker (`serve_calls`, called once at its birth) therefore keeps each
transport's requests adapter (`registry/pools.py`: its urllib3 pools per origin and per proxy) when the call ends,
keyed by the trust its agent was made for — verification on or off, `SSL_CERT_FILE`, `SSL_CERT_DIR`, the CA files
named by flags, the `registries.yaml` TLS files: the key of its TLS context — and the pool size. A later call's
transport with the same key takes it back, and a kept connection serves it only where that call would have made the
very same connection:
- the scheme, host and port are the pool's own (urllib3's pools are per origin);
- the proxy is the pool manager's (requests keeps one per proxy URL, credentials included). A connection through an
  https proxy is never kept: its TLS to the proxy is urllib3's default trust, read from the caller's environment;
- an https connection is reused only while the TLS context it was made with is the one the new call's agent gets
  (`registry/pools._TLSPool`): `registry/tlscontexts.py` hands out the same context object only for the same inputs
  and unchanged files, so a caller with other CAs, `SSL_CERT_FILE` or client certificate connects anew;
- the network namespace, resolver settings and credentials of every caller a worker serves are its own
  (`server/identity.py`, `server/interpreter.py`).

What is kept is bounded as Go's `http.DefaultTransport` bounds it: at most `PER_ORIGIN` idle connections per origin
(the rest are closed as the call ends), through at most `PROXIES` proxies (the most recently used: requests keeps a
manager per proxy URL, so callers each with proxy credentials of their own would add a connection each), and none
idle longer than `IDLE_SECONDS` (each connection's own idle time, not its adapter's, which a call to another origin
keeps in use; closed when the next call looks, or when the worker waiting for it wakes for them: `next_expiry`).
At most `KEPT` adapters and `MAX_IDLE` connections in all stay, the least recently used adapters closed first. A
connection the registry closed meanwhile is found dropped before reuse (urllib3), or, closed as the request went out,
sent again once on a new one (`registry/connections.py`), as within a call. The leak check (`server/leaks.py`)
counts the kept sockets as the worker's own. A process that makes one call (the CLI) keeps nothing: its transport
closes its connections as before.
"""

from __future__ import annotations

import logging
import os
from collections import OrderedDict
from threading import Lock
from time import monotonic

from ocivendir.fs.fileid import device_inode

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Hashable

    from ocivendir.registry.pools import Adapter

__all__ = [
    "IDLE_SECONDS",
    "KEPT",
    "MAX_IDLE",
    "PER_ORIGIN",
    "PROXIES",
    "close_all",
    "expire",
    "keep",
    "kept_sockets",
    "next_expiry",
    "serve_calls",
    "take",
]

KEPT = 4  # adapters: one per TLS profile the worker's callers use
PER_ORIGIN = 2  # idle connections kept per origin (Go's DefaultMaxIdleConnsPerHost)
PROXIES = 2  # proxies whose connections an adapter keeps: a call's HTTP_PROXY and HTTPS_PROXY
MAX_IDLE = 16  # idle connections kept in all (Go's DefaultTransport: 100): a worker's descriptors are its callers' too
IDLE_SECONDS = 90.0  # an idle connection is closed after this long (Go's DefaultTransport IdleConnTimeout)
_SLACK = 0.05  # seconds past an expiry a waiting worker wakes (so that it is past, not at it)

_LOCK = Lock()
_URLLIB3_LOG = logging.getLogger("urllib3.connectionpool")  # what names the connections a call makes
_serving = [False]  # per-process: set once in a server worker, never unset
# key → (since when its longest idle connection is idle, the adapter, the identities of the sockets it holds), least
# recently used first
_kept: OrderedDict[Hashable, tuple[float, Adapter, frozenset[str]]] = OrderedDict()


def serve_calls() -> None:
    """This process serves call after call (a server worker): transports keep their idle connections from now on."""
    _serving[0] = True


def take(key: Hashable) -> Adapter | None:
    """The adapter kept for `key` (no longer kept: it is the caller's now), or None; expired ones are closed first.

    None for a call that logs urllib3's debug lines (`--debug`): they name each connection it makes ("Starting new
    HTTPS connection (1): …", numbered per pool), which a call on kept connections would not write as in-process.
    """
    expire()
    if _URLLIB3_LOG.isEnabledFor(logging.DEBUG):
        return None
    with _LOCK:
        kept = _kept.pop(key, None)
    return kept[1] if kept is not None else None


def keep(key: Hashable, adapter: Adapter) -> bool:
    """Keep `adapter`'s idle connections for a later call in this worker; False (nothing kept) outside a worker.

    Only `PER_ORIGIN` idle connections per origin stay open, none through an https proxy; an adapter left with
    none is closed and not kept. The caller must not use or close a kept adapter.
    """
    if not _serving[0]:
        return False
    _keep(key, adapter, recent=True)
    return True


def next_expiry() -> float | None:
    """Seconds until a kept connection has been idle `IDLE_SECONDS` (`expire` closes it then), or None: none kept.

    A worker waiting for its next call wakes then: a registry closes its end of an idle connection sooner or later,
    and the worker's would otherwise stay open (CLOSE_WAIT) until the next call, however long that takes.
    """
    with _LOCK:
        if not _kept:
            return None
        oldest = min(since for since, _, _ in _kept.values())
    return max(0.0, oldest + IDLE_SECONDS - monotonic()) + _SLACK


def _keep(key: Hashable, adapter: Adapter, *, recent: bool) -> None:
    """Keep `adapter`'s idle connections under `key`, as the most recently used adapter or (not `recent`) the least."""
    idle = adapter.keep_idle(PER_ORIGIN, PROXIES, monotonic() - IDLE_SECONDS, MAX_IDLE)
    if not idle:
        adapter.close()
        return
    identities = frozenset(device_inode(os.fstat(fd)) for fd, _ in idle)
    oldest = min(since for _, since in idle)
    dropped: list[Adapter] = []
    with _LOCK:
        if (previous := _kept.pop(key, None)) is not None:  # two transports of one call with the same profile
            dropped.append(previous[1])
        _kept[key] = (oldest, adapter, identities)
        if not recent:
            _kept.move_to_end(key, last=False)
        while len(_kept) > KEPT or (len(_kept) > 1 and sum(len(each[2]) for each in _kept.values()) > MAX_IDLE):
            dropped.append(_kept.popitem(last=False)[1][1])
    for each in dropped:
        each.close()


def kept_sockets() -> frozenset[str]:
    """The `device:inode` identities of the sockets kept open on purpose (the leak check's allowance)."""
    with _LOCK:
        return frozenset().union(*(identities for _, _, identities in _kept.values()))


def close_all() -> None:
    """Close every kept connection (a test's fresh start)."""
    with _LOCK:
        adapters = [adapter for _, adapter, _ in _kept.values()]
        _kept.clear()
    for adapter in adapters:
        adapter.close()


def expire() -> None:
    """Close the connections idle past `IDLE_SECONDS`, and an adapter left with none.

    A worker waiting for calls looks when `next_expiry` says, a transport when it takes an adapter.
    """
    now = monotonic()
    with _LOCK:
        due = [key for key, (oldest, _, _) in _kept.items() if now - oldest > IDLE_SECONDS]
        taken = [(key, _kept.pop(key)[1]) for key in due]
    for key, adapter in taken:
        _keep(key, adapter, recent=False)  # not used since: the least recently used, with what is left of it
