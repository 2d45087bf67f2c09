"""The native client of the build in the sidecar's kind of root: chroot, no /proc, PATH=/, UID 1000/GID 0.

/vendir links to the client (/opt/ocivendir/vendir). Without /proc, PyInstaller's bootloader finds its executable
through argv[0]; the client makes sure that resolves to the program, for the in-process fallback (the build's
modes/vendir) and for the server it starts (the program's path). The first call starts the frozen server, the next
is served by it, an unusable server directory means in-process, and a reader of the client's stdout sees EOF
while the server it started lives on.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.packaging.test_sidecar import _require_root, build_root

pytestmark = pytest.mark.dist

UID = 1000
DIRECTORY = f"tmp/ocivendir-{UID}"  # the protocol's default under /tmp: no XDG_RUNTIME_DIR, no TMPDIR


def _enter(root: Path) -> Callable[[], None]:
    def enter() -> None:
        os.chroot(root)
        os.chdir("/tmp")  # noqa: S108 - the root's own /tmp
        os.setgroups([])
        os.setgid(0)
        os.setuid(UID)

    return enter


def _vendir(root: Path, *args: str, **env: str) -> tuple[int, str, str]:
    """`vendir ARGS` as kapp-controller runs it: found on PATH=/, argv[0] `vendir`."""
    process = subprocess.Popen(["vendir", *args], executable="/vendir", stdout=subprocess.PIPE,  # noqa: S607 - in the root
                               stderr=subprocess.PIPE, text=True, preexec_fn=_enter(root),  # noqa: PLW1509 - chroot
                               env={"PATH": "/", "HOME": "/home/kapp-controller", **env})  # fmt: skip
    out, err = process.communicate(timeout=120)  # EOF on both pipes, whatever the client started
    return process.returncode, out, err


def _status(root: Path) -> dict[str, int]:
    """`server status --json`'s result, queried in-process."""
    done = _vendir(root, "server", "status", "--json", OCIVENDIR_SERVER="off")
    return dict(json.loads(done[1])["result"]) if done[0] == 0 else {}


def test_the_native_client_without_proc_starts_the_frozen_server_and_is_served_by_it(frozen: Path,
                                                                                    tmp_path: Path) -> None:  # fmt: skip
    _require_root()
    root = tmp_path / "root"
    root.mkdir()
    (tmp_path / "ca.pem").write_text("unused\n")
    build_root(root, frozen, tmp_path / "ca.pem")
    (root / "vendir").unlink(missing_ok=True)
    (root / "vendir").symlink_to("/opt/ocivendir/vendir")
    version = subprocess.run([str(frozen / "modes" / "vendir"), "version"], capture_output=True, text=True,
                             check=True).stdout  # fmt: skip
    assert version.startswith("vendir version ")
    server = 0
    try:
        first = _vendir(root, "version", "--debug")
        assert first == (0, version, f"vendir: debug: ocivendir server unavailable (/{DIRECTORY}: No such file or "
                                     "directory); running in-process\n")  # fmt: skip
        deadline = time.monotonic() + 60
        while not list((root / DIRECTORY).glob("server-*.sock")) and time.monotonic() < deadline:
            time.sleep(0.05)
        build = (frozen / "BUILD_ID").read_text()
        assert (root / DIRECTORY / f"server-{build}.sock").exists()
        server = _status(root)["pid"]
        assert _vendir(root, "version", "--debug") == (0, version, "")  # served: no fallback line
        assert _status(root)["calls"] == 2  # the first status query and this call
        (root / DIRECTORY).chmod(0o755)
        assert _vendir(root, "version", "--debug") == (0, version, f"vendir: debug: ocivendir server unavailable "
                                                       f"(/{DIRECTORY} has mode 0755, not 0700); running in-process\n")  # fmt: skip
        (root / DIRECTORY).chmod(0o700)
    finally:
        if server:
            os.kill(server, 9)
