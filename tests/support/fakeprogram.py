"""Test support: a fake `ocivendir` program, the native client's fallback and server-start target.

Owns: recording how it was run — argv (argv[0] as the client passed it, through a small C shim: a `#!` script
loses argv[0]), the environment block exactly as exec'd (/proc/self/environ), open descriptors, session, parent and
unreaped children — as JSON in the record directory. Run as `server start --foreground` it then lets the start lock
go (after `OCIVENDIR_SERVER_TEST_START_HOLD_MS`, default 0) without listening, as a server that cannot listen does,
and sleeps (the test kills it); otherwise it writes `in-process` to stdout and exits 3.

Usage (by the shim): python -I fakeprogram.py SHIM_PATH ARGV0 ARGS... — records go to `records/` next to the shim.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path


def _descriptors() -> dict[str, str]:
    """Open descriptors and what they point at (the listing's own descriptor vanishes before its readlink)."""
    found: dict[str, str] = {}
    for entry in list(Path("/proc/self/fd").iterdir()):
        try:
            found[entry.name] = str(entry.readlink())
        except OSError:
            continue
    return found


def _children() -> str:
    try:
        pid, _ = os.waitpid(-1, os.WNOHANG)
    except ChildProcessError:
        return "none"
    return "running" if pid == 0 else f"zombie {pid}"


def _release_start(record_dir: Path, hold_ms: int) -> None:
    """Let the start lock (descriptor 3) go after `hold_ms`, as a server that could not listen does when it ends.

    Clients that found the server starting wait for it; with it let go and no socket they run in-process. A
    `released-<pid>` record is made just before, so a run can tell whether it came after.
    """
    time.sleep(hold_ms / 1000)
    (record_dir / f"released-{os.getpid()}").write_text("")
    try:
        os.close(3)
    except OSError:
        pass


def main() -> None:
    fds = _descriptors()  # first: anything opened later would show up
    shim, *argv = sys.argv[1:]
    record_dir = Path(shim).parent / "records"
    block = Path("/proc/self/environ").read_bytes()
    env = [entry.decode("utf-8", "surrogateescape") for entry in block.split(b"\0")[:-1]]
    serving = argv[1:] == ["server", "start", "--foreground"]
    record = {"argv": argv, "env": env, "fds": fds, "pid": os.getpid(), "ppid": os.getppid(), "sid": os.getsid(0),
              "pgid": os.getpgid(0), "children": _children(), "cwd": str(Path.cwd()),
              "after_release": any(record_dir.glob("released-*"))}  # fmt: skip
    name = f"{'start' if serving else 'run'}-{os.getpid()}.json"
    partial = record_dir / (name + ".tmp")
    partial.write_text(json.dumps(record), encoding="utf-8")
    partial.rename(record_dir / name)
    if serving:
        _release_start(record_dir, int(os.environ.get("OCIVENDIR_SERVER_TEST_START_HOLD_MS", "0") or 0))
        time.sleep(120)
        return
    sys.stdout.write("in-process\n")
    sys.stdout.flush()
    sys.exit(3)


if __name__ == "__main__":
    main()
