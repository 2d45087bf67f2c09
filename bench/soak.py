"""Owns: the soak of a reused worker — many warm calls through ONE worker, and whether anything grows.

A server with one worker that is never retired for its call count (`OCIVENDIR_SERVER_WORKERS=1`,
`OCIVENDIR_SERVER_MAX_CALLS` above the count) serves a warm digest-pinned kapp-controller sync again and again,
through a client that speaks the wire itself (so the `P` frame's pid shows which worker served). Reported: how many
workers served (1 unless one was retired, with the server's last reason), and the worker's descriptors and resident
size after call 100 and after the last (issue 33: within 10 %, descriptors unchanged).
`python -m bench.soak [CALLS]` (default 10,000) against a registry it starts itself.
"""

from __future__ import annotations

import json
import os
import socket
import struct
import sys
import tempfile
from pathlib import Path

from tests.support.builders import Pusher, make_image
from tests.support.registry import Registry
from tests.support.server import ServerPlace, program

from ocivendir.server import wire
from ocivendir.server.build import build_id

__all__ = ["soak"]

_ARGS = ("sync", "-f", "-", "--lock-file", "/dev/null")
_PLACEHOLDER = "apiVersion: v1\nkind: Secret\nmetadata:\n  name: my-pkgi-fetch-0\n---\n"
_CONFIG = (
    "apiVersion: vendir.k14s.io/v1alpha1\ndirectories:\n- contents:\n  - image:\n      url: {ref}\n"
    '      secretRef:\n        name: my-pkgi-fetch-0\n    path: .\n  path: "0"\nkind: Config\n'
    'minimumRequiredVersion: ""\n'
)


def _call(place: ServerPlace, argv0: str, work: Path, stdin: bytes, env: dict[str, str]) -> tuple[int, int]:
    """One call over the wire: (exit status, the serving worker's pid)."""
    request = wire.Request(op="call", build=build_id(), umask=0o022, cwd=str(work), argv=[argv0, *_ARGS], env=env)
    with tempfile.TemporaryFile() as given, open(os.devnull, "wb") as null, socket.socket(socket.AF_UNIX) as sock:  # noqa: PTH123
        given.write(stdin)
        given.seek(0)
        directory = os.open(work, os.O_RDONLY | os.O_DIRECTORY)
        try:
            sock.connect(str(place.dir / f"server-{build_id()}.sock"))
            wire.send_request(
                sock, wire.encode_request(request), [given.fileno(), null.fileno(), null.fileno(), directory]
            )
        finally:
            os.close(directory)
        kind, payload = wire.read_frame(sock) or (b"", b"")
        if kind != b"P":
            raise RuntimeError(f"the server did not take the call: {kind!r} {payload!r}")
        pid = struct.unpack(">I", payload)[0]
        code = -1
        while (got := wire.read_frame(sock)) is not None:
            if got[0] == b"X":
                code = struct.unpack(">I", got[1])[0]
        return code, pid


def _footprint(pid: int) -> tuple[int, int]:
    fds = len(list(Path(f"/proc/{pid}/fd").iterdir()))
    pages = int(Path(f"/proc/{pid}/statm").read_text().split()[1])
    return fds, pages * os.sysconf("SC_PAGE_SIZE")


def soak(calls: int) -> dict[str, object]:
    """Run the soak; its figures."""
    root = Path(tempfile.mkdtemp(prefix="ovsoak-"))
    registry = Registry(mode="plain", workdir=root / "registry").start()
    place = ServerPlace()
    try:
        ref = Pusher(registry).image("soak/img", make_image({f"f{i}.yml": f"a: {i}\n" for i in range(20)}))
        stdin = (_PLACEHOLDER + _CONFIG.format(ref=ref)).encode()
        place.start(OCIVENDIR_SERVER_WORKERS="1", OCIVENDIR_SERVER_MAX_CALLS=str(calls * 2))
        env = place.env(VENDIR_CACHE_DIR=str(root / "cache"))
        work = root / "work"
        work.mkdir()
        argv0 = str(program(root / "bin", "vendir"))
        pids: set[int] = set()
        marks: dict[int, tuple[int, int]] = {}
        for number in range(1, calls + 1):
            code, pid = _call(place, argv0, work, stdin, env)
            if code != 0:
                raise RuntimeError(f"call {number} exited {code}")
            pids.add(pid)
            if number in (100, calls):
                marks[number] = _footprint(pid)
        status = place.status()
        return {
            "calls": calls,
            "workers_that_served": len(pids),
            "retired": status.get("retired"),
            "last_retired": status.get("last_retired"),
            "fds_after_100": marks[100][0],
            f"fds_after_{calls}": marks[calls][0],
            "rss_after_100": marks[100][1],
            f"rss_after_{calls}": marks[calls][1],
        }
    finally:
        place.cleanup()
        registry.stop()


if __name__ == "__main__":
    sys.stdout.write(json.dumps(soak(int(sys.argv[1]) if len(sys.argv) > 1 else 10_000), indent=2) + "\n")
