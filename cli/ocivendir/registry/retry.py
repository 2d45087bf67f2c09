"""Owns: the retry policy — which failures are retried, backoff with jitter, Retry-After, and the run's deadline."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from ocivendir.errors import RateLimited, Transient

__all__ = ["Deadline", "RetryPolicy", "parse_retry_after"]


def _sleep(seconds: float) -> None:
    time.sleep(seconds)


def _jitter() -> float:
    """A uniform draw in [0, 1); `random` (with its hashing and `os.urandom` seed) loads only for a retry."""
    import random  # noqa: PLC0415

    return random.random()  # noqa: S311 - jitter, not a secret


_NOT_RETRIED_5XX = frozenset({501, 505})
_RETRIED_4XX = frozenset({408, 429})


def parse_retry_after(value: str | None, now: float) -> float | None:
    """Seconds to wait from a Retry-After header (delta seconds or an HTTP date), or None."""
    if not value:
        return None
    value = value.strip()
    if value.isascii() and value.isdigit():  # "²" is a digit to str.isdigit, not to float()
        return float(value)
    import email.utils  # noqa: PLC0415 - an HTTP date is rare: email loads a dozen modules

    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError, OverflowError):  # not a date; a year past what datetime holds
        return None
    return max(0.0, float(when.timestamp()) - now)


@dataclass(frozen=True, kw_only=True)
class RetryPolicy:
    """Bounded retries: 408, 429, 5xx but 501/505, and connection errors; full-jitter exponential backoff."""

    attempts: int = 5
    base_delay: float = 0.25
    max_delay: float = 8.0
    max_retry_after: float = 30.0
    sleep: Callable[[float], None] | None = field(default=None, compare=False)
    wall_clock: Callable[[], float] = field(default=time.time, compare=False)
    jitter: Callable[[], float] = field(default=_jitter, compare=False)

    def pause(self, seconds: float) -> None:
        """Sleep between attempts (the injected sleep, else the module's, looked up at call time)."""
        (self.sleep or _sleep)(seconds)

    @staticmethod
    def retryable_status(status: int) -> bool:
        """True for statuses worth another attempt."""
        return status in _RETRIED_4XX or (status >= 500 and status not in _NOT_RETRIED_5XX)  # noqa: PLR2004

    def delay(self, attempt: int, retry_after: str | None, what: str) -> float:
        """The wait before attempt `attempt + 1`; a Retry-After over the cap fails fast as RateLimited."""
        demanded = parse_retry_after(retry_after, self.wall_clock())
        if demanded is not None:
            if demanded > self.max_retry_after:
                raise RateLimited(
                    f"{what}: the registry asks to retry after {demanded:.0f}s",
                    hint=f"waits over {self.max_retry_after:.0f}s are not honoured; try again later",
                )
            return demanded
        ceiling: float = min(self.max_delay, self.base_delay * 2.0**attempt)
        return ceiling * self.jitter()


@dataclass
class Deadline:
    """The total network time one run may spend; `remaining` raises Transient once it has passed."""

    seconds: float
    clock: Callable[[], float] = time.monotonic
    started: float = field(default=-1.0)

    def __post_init__(self) -> None:
        """Start counting now."""
        if self.started < 0:
            self.started = self.clock()

    def until(self, what: str) -> float:
        """When it passes, as a `time.monotonic()` value (what a socket's reads are bounded by); Transient if it has."""
        return time.monotonic() + self.remaining(what)

    def remaining(self, what: str) -> float:
        """Seconds left, or Transient naming the operation if none are."""
        left = self.seconds - (self.clock() - self.started)
        if left <= 0:
            raise Transient(
                f"{what}: network deadline of {self.seconds:g}s exceeded",
                hint="raise it with --timeout or OCIVENDIR_TIMEOUT",
            )
        return left
