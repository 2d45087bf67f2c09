"""Owns: walking a repository's endpoints (its mirrors in order, then the origin) and each endpoint's limits.

A mirror is trusted for availability, never for content. Each mirror of the plan is asked in turn, and the walk moves
on when one cannot answer — unreachable, 404, 5xx or 429 after its own retries, an auth or TLS failure (with a
warning) — or answers with bytes that do not match the digest asked for (a warning: that mirror is skipped for that
object, and nothing it sent is kept, because the caller verifies before anything is published). The origin is asked
last; its answer, or its error, is final. A mirror that cannot be reached, or sends no response headers within the
response-header timeout, is not asked again in the same run (a warning says which).

Every endpoint has a cap on concurrent operations (registries.yaml `concurrency`, else the run's default), and a
429's `Retry-After` holds back every later request to that endpoint, not only the one retried.
"""

from __future__ import annotations

import contextlib
import time
from collections import deque
from collections.abc import Callable, Iterator
from threading import Lock

from ocivendir import diag
from ocivendir.errors import (
    Denied,
    DigestMismatch,
    RegistryError,
    ResponseTimeout,
    TLSVerifyError,
    Transient,
    Unauthorized,
)
from ocivendir.oci.reference import Repository
from ocivendir.registry.mirrors import Endpoint, MirrorPlan

__all__ = ["EndpointWalker", "Slots", "Unreachable"]

_log = diag.logger("ocivendir.endpoints")

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import TypeVar

    _T = TypeVar("_T")


class Slots:
    """At most `size` holders at once, served in arrival order (which threading.Semaphore does not promise)."""

    def __init__(self, size: int) -> None:  # noqa: D107
        self._free = size
        self._mutex = Lock()
        self._waiting: deque[Lock] = deque()

    def __enter__(self) -> None:
        """Take a slot, waiting for one to be handed over when none is free."""
        with self._mutex:
            if self._free:
                self._free -= 1
                return
            turn = Lock()
            turn.acquire()
            self._waiting.append(turn)
        turn.acquire()  # released by the holder that hands its slot over

    def __exit__(self, *_exc: object) -> None:
        """Give the slot back: to the longest waiter, else to the free count."""
        with self._mutex:
            if self._waiting:
                self._waiting.popleft().release()
            else:
                self._free += 1


class Unreachable(Transient):
    """No connection could be opened to an endpoint, after its retries."""


class _Refused(Exception):
    """A mirror answered, but not with what was asked for (e.g. `missing` for a presence probe)."""


class EndpointWalker:
    """One run's endpoint state: the plan, dead mirrors, per-endpoint slots and hold-offs, and which one served."""

    def __init__(
        self,
        plan: MirrorPlan,
        default_cap: int,
        *,
        served: Callable[[str, str], None],
        pause: Callable[[float], None],
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """`served(thing, endpoint)` records who answered; `pause` sleeps (the retry policy's, so tests need none)."""
        self._plan = plan
        self._default_cap = max(1, default_cap)
        self._served = served
        self._pause = pause
        self._clock = clock
        self._lock = Lock()
        self._slots: dict[str, Slots] = {}
        self._not_before: dict[str, float] = {}
        self._dead: set[str] = set()
        self._warned: set[tuple[str, str]] = set()
        self.warn: Callable[[str], None] = _log.warning

    def endpoints(self, repo: Repository) -> tuple[Endpoint, ...]:
        """The plan for a repository: mirrors first, the origin last."""
        return self._plan.endpoints(repo)

    def walk(
        self,
        repo: Repository,
        thing: str | None,
        attempt: Callable[[Endpoint], _T],
        accept: Callable[[_T], bool] = lambda _result: True,
    ) -> _T:
        """`attempt` at each live mirror until one answers acceptably, else at the origin (whose result is final)."""
        *mirrors, origin = self.endpoints(repo)
        for endpoint in mirrors:
            if endpoint.host in self._dead:
                continue
            try:
                with self.slot(endpoint):
                    result = attempt(endpoint)
                if not accept(result):
                    raise _Refused(str(result))  # noqa: TRY301 - one path for every way a mirror can fall short
            except (_Refused, DigestMismatch, RegistryError) as exc:
                self._moved_on(endpoint, thing, exc)
                continue
            self._record(thing, endpoint)
            return result
        with self.slot(origin):
            result = attempt(origin)
        self._record(thing, origin)
        return result

    def _record(self, thing: str | None, endpoint: Endpoint) -> None:
        if thing is not None:
            self._served(thing, endpoint.name)
            _log.info("%s served by %s", thing, endpoint.name)

    def _moved_on(self, endpoint: Endpoint, thing: str | None, exc: Exception) -> None:
        what = thing or "a probe"
        if isinstance(exc, DigestMismatch):
            self.warn(f"mirror {endpoint.name} served content that does not match {what}; not used ({exc})")
        elif isinstance(exc, Unreachable):
            self._give_up(endpoint, "is unreachable")
        elif isinstance(exc, ResponseTimeout):  # a hung mirror would cost the timeout again for every object
            self._give_up(endpoint, f"did not answer within {exc.waited:g}s")
        elif isinstance(exc, Unauthorized | Denied | TLSVerifyError):
            self._warn_once(endpoint, type(exc).__name__, f"mirror {endpoint.name} refused: {exc}; asking the next")
        else:
            _log.debug("mirror %s cannot serve %s: %s", endpoint.name, what, exc)

    def _give_up(self, endpoint: Endpoint, why: str) -> None:
        with self._lock:
            self._dead.add(endpoint.host)
        self._warn_once(endpoint, "down", f"mirror {endpoint.name} {why}; not asked again this run")

    def _warn_once(self, endpoint: Endpoint, kind: str, message: str) -> None:
        with self._lock:
            if (endpoint.host, kind) in self._warned:
                return
            self._warned.add((endpoint.host, kind))
        self.warn(message)

    @contextlib.contextmanager
    def slot(self, endpoint: Endpoint) -> Iterator[None]:
        """Hold one of the endpoint's concurrent-operation slots."""
        with self._lock:
            semaphore = self._slots.get(endpoint.host)
            if semaphore is None:
                semaphore = Slots(endpoint.config.concurrency or self._default_cap)
                self._slots[endpoint.host] = semaphore
        with semaphore:
            yield

    def hold_off(self, endpoint: Endpoint, seconds: float) -> None:
        """After a 429 with Retry-After: no request to this endpoint for `seconds`."""
        until = self._clock() + seconds
        with self._lock:
            self._not_before[endpoint.host] = max(until, self._not_before.get(endpoint.host, 0.0))

    def wait_turn(self, endpoint: Endpoint) -> None:
        """Sleep out what is left of the endpoint's hold-off, if any."""
        with self._lock:
            left = self._not_before.get(endpoint.host, 0.0) - self._clock()
        if left > 0:
            self._pause(left)
