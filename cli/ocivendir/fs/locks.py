"""Owns: advisory file locks on `fcntl.flock`; nothing else in ocivendir touches fcntl."""

from __future__ import annotations

import contextlib
import fcntl
import os
import time
from collections.abc import Iterator
from pathlib import Path

__all__ = ["LockBusy", "file_lock"]

_POLL_SECONDS = 0.02


class LockBusy(Exception):
    """The lock is held elsewhere and the timeout passed."""


@contextlib.contextmanager
def file_lock(path: Path, *, shared: bool = False, timeout: float | None = None) -> Iterator[None]:
    """Hold a shared or exclusive flock on `path` (created if absent).

    `timeout=None` waits as long as it takes; `0` tries once; otherwise it polls until the timeout and raises
    LockBusy.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        kind = fcntl.LOCK_SH if shared else fcntl.LOCK_EX
        if timeout is None:
            fcntl.flock(fd, kind)
        else:
            deadline = time.monotonic() + timeout
            while True:
                try:
                    fcntl.flock(fd, kind | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    if time.monotonic() >= deadline:
                        raise LockBusy(str(path)) from None
                    time.sleep(_POLL_SECONDS)
        yield
    finally:
        os.close(fd)  # closing the descriptor releases the lock
