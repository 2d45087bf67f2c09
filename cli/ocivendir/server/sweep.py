"""Owns: removing what servers of other builds left in the socket directory once none of them runs or starts.

Every build that ever served from a directory leaves its start lock (`server-<build>.start`) and its lock
(`server-<build>.lock`) there, and a server killed outright its socket (`server-<build>.sock`) and, killed between its
bind and its rename, the socket's temporary name (`.server-<build>.<pid>`). Each upgrade, and every edit of an
editable install, is a new build: the directory would grow by two files a build for as long as it lives. A server
that has just started therefore sweeps the other builds' files (`server/daemon.run_server`, once it listens).

A build's files go only while the sweeper holds its locks, taken without waiting on the files already there (none is
made, and one removed before it was locked is no lock: another sweeper's): its start lock held elsewhere means one of
its servers is starting, its lock held elsewhere that one runs, and either leaves all of the build's files alone.
The socket and its temporary names go only under the build's lock (a server binds and renames them holding it).
A lock file goes only while it is still the file held (`fs/locks.py`).
A starter that opened a lock file before it went and locks it after finds it gone from its path and takes the lock
again on a new file (`fs/locks.hold_lock`; the native client does the same), so no two servers of a build ever hold
two different files. A call that meanwhile finds the build's lock held (by the sweeper) starts no server and runs
in-process, as a call that finds one starting does. Anything the sweep cannot remove stays for a later one.
"""

from __future__ import annotations

import contextlib
import os

from ocivendir.fs.locks import LockBusy, release_removed, take_existing
from ocivendir.fs.remove import remove_file
from ocivendir.server.place import lock_path, socket_path, start_path

__all__ = ["sweep"]

_BUILD_LENGTH = 16  # hex digits of a build id (`server/build.py`)
_HEX = frozenset("0123456789abcdef")
_SUFFIXES = (".lock", ".start", ".sock")


def sweep(directory: str, own: str) -> list[str]:
    """Remove the files of every build but `own` whose server neither runs nor starts; the names removed."""
    try:
        names = os.listdir(directory)
    except OSError:
        return []
    temporaries: dict[str, list[str]] = {}  # by build, in one pass over the names: not one a build (thousands)
    for name in names:
        if (build := _build_of(name)) is not None and build != own:
            temporary = temporaries.setdefault(build, [])
            if name.startswith("."):
                temporary.append(name)
    removed: list[str] = []
    for build in sorted(temporaries):
        removed += _sweep_build(directory, build, temporaries[build])
    return removed


def _build_of(name: str) -> str | None:
    """The build a file of the socket directory belongs to, or None for a name no server makes."""
    if name.startswith("server-") and name.endswith(_SUFFIXES):
        build = name[len("server-") :].rpartition(".")[0]
    elif name.startswith(".server-"):
        build, dot, pid = name[len(".server-") :].partition(".")
        if not dot or not pid.isdigit():
            return None
    else:
        return None
    return build if len(build) == _BUILD_LENGTH and set(build) <= _HEX else None


def _sweep_build(directory: str, build: str, temporaries: list[str]) -> list[str]:
    """Remove one build's files under its locks (`temporaries`: its socket's temporary names); what went.

    Nothing goes while a server of the build starts or runs.
    """
    start_file, lock_file = start_path(directory, build), lock_path(directory, build)
    try:
        start = take_existing(start_file)
    except LockBusy:
        return []
    try:
        lock = take_existing(lock_file)
    except LockBusy:
        if start is not None:
            os.close(start)
        return []
    gone = []
    if lock is not None:  # held here: no server of the build runs, nor binds its socket
        for path in (socket_path(directory, build), *(os.path.join(directory, name) for name in temporaries)):
            if os.path.lexists(path):
                with contextlib.suppress(OSError):
                    remove_file(path)
                    gone.append(os.path.basename(path))
        if release_removed(lock, lock_file):
            gone.append(os.path.basename(lock_file))
    if start is not None and release_removed(start, start_file):
        gone.append(os.path.basename(start_file))
    return gone
