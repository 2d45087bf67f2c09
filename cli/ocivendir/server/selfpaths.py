"""Owns: whether a call names paths that only its own process can open — which no worker can open for it.

A worker is handed the caller's descriptors 0-2 and working directory, nothing else. `/dev/fd/N`, `/proc/self/…` and
`/proc/thread-self/…` name the descriptors and files of the process that opens them: in a worker, the worker's own.
Bash's process substitution (`-f <(…)`), `--lock-file /dev/fd/3 3>file` or `SSL_CERT_FILE=/dev/fd/4` would read or
write whatever the worker has under that number — nothing, its /dev/null, its listening socket, or a cache index it
keeps open between calls (which a lock written there would overwrite). Such a call runs in the caller's own process
instead, where the names mean what the caller meant. `/dev/stdin`, `/dev/stdout` and `/dev/stderr` name 0-2, which
the worker holds as the caller's, and so stay served.

The check is textual and errs towards in-process: any argument or environment value mentioning `dev/fd`, `dev/tty`
(the opening process's terminal: a worker has none) or the self links, as written or once `//` and `.`/`..` are
folded (`/dev//fd/3`, `/dev/./fd/3`; relative spellings from `/` included), and any working directory under `/dev` or
`/proc`, from which a relative `fd/3` would reach them. A symbolic link to one of them is not seen.
"""

from __future__ import annotations

import os

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

__all__ = ["names_own_descriptors"]

_MARKS = ("dev/fd", "proc/self", "proc/thread-self", "dev/tty")  # /dev/tty: the opener's terminal (a worker has none)
_PLACES = ("/dev", "/proc")


def names_own_descriptors(argv: Sequence[str], env: Mapping[str, str], cwd: str) -> str | None:
    """Why the call must run in its own process, or None. The reason names no value (one may be a secret)."""
    for place in _PLACES:
        if cwd == place or cwd.startswith(place + "/"):
            return f"its working directory is under {place}, where names reach the calling process's own descriptors"
    for position, value in enumerate(argv[1:], 1):
        if _marked(value):
            return f"argument {position} may name the calling process's own descriptors, which a worker does not have"
    for name, value in env.items():
        if _marked(value):
            return f"${name} may name the calling process's own descriptors, which a worker does not have"
    return None


def _marked(value: str) -> bool:
    """Whether `value` mentions a mark, spelt as given or as the path resolves textually (`/dev//fd`, `/dev/./fd`)."""
    if any(mark in value for mark in _MARKS):
        return True
    if "/" not in value or ("dev" not in value and "proc" not in value):  # nothing to fold into a mark
        return False
    while "//" in value:
        value = value.replace("//", "/")
    return any(mark in os.path.normpath(value) for mark in _MARKS)
