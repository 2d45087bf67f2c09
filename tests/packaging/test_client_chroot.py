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
OPENSHIFT_UID = 1000660000  # an arbitrary UID with no passwd entry, as OpenShift runs the sidecar
INLINE = ('apiVersion: vendir.k14s.io/v1alpha1\nkind: Config\ndirectories:\n- path: "0"\n  contents:\n  - path: .\n'
          "    inline:\n      paths:\n        values.yml: 'replicas: 2'\n")  # fmt: skip


def _enter(root: Path, uid: int, cwd: str) -> Callable[[], None]:
    def enter() -> None:
        os.chroot(root)
        os.chdir(cwd)
        os.setgroups([])
        os.setgid(0)
        os.setuid(uid)

    return enter


def _vendir(root: Path, *args: str, uid: int = UID, cwd: str = "/tmp", stdin: str = "",  # noqa: S108 - the root's own
            **env: str) -> tuple[int, str, str]:  # fmt: skip
    """`vendir ARGS` as kapp-controller runs it: found on PATH=/, argv[0] `vendir`."""
    process = subprocess.Popen(["vendir", *args], executable="/vendir", stdout=subprocess.PIPE,  # noqa: S607 - in the root
                               stderr=subprocess.PIPE, stdin=subprocess.PIPE, text=True,
                               preexec_fn=_enter(root, uid, cwd),  # noqa: PLW1509 - chroot
                               env={"PATH": "/", "HOME": "/home/kapp-controller", **env})  # fmt: skip
    out, err = process.communicate(stdin, timeout=120)  # EOF on both pipes, whatever the client started
    return process.returncode, out, err


def _status(root: Path, uid: int = UID) -> dict[str, int]:
    """`server status --json`'s result, queried in-process."""
    done = _vendir(root, "server", "status", "--json", uid=uid, OCIVENDIR_SERVER="off")
    return dict(json.loads(done[1])["result"]) if done[0] == 0 else {}


def _fetch_dir(root: Path, name: str) -> str:
    """A fresh fetch directory in the root's memory-backed tmp, writable by GID 0 (as kapp-controller makes them)."""
    path = root / "etc" / "kappctrl-mem-tmp" / name
    path.mkdir(parents=True)
    path.chmod(0o770)
    return f"/etc/kappctrl-mem-tmp/{name}"


@pytest.mark.parametrize("uid", [UID, OPENSHIFT_UID])
def test_the_native_client_without_proc_starts_the_frozen_server_and_is_served_by_it(frozen: Path, tmp_path: Path,
                                                                                    uid: int) -> None:  # fmt: skip
    _require_root()
    DIRECTORY = f"tmp/ocivendir-{uid}"  # noqa: N806 - the protocol's default under /tmp: no XDG_RUNTIME_DIR, TMPDIR
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
        first = _vendir(root, "version", "--debug", uid=uid)
        assert first == (0, version, "")  # served by the server it started and waited for: no fallback line
        build = (frozen / "BUILD_ID").read_text()
        assert (root / DIRECTORY / f"server-{build}.sock").exists()
        server = _status(root, uid)["pid"]
        assert _vendir(root, "version", "--debug", uid=uid) == (0, version, "")  # served: no fallback line
        assert _status(root, uid)["calls"] == 3  # the first call, the first status query and this call
        # a kapp-shaped sync, served: the worker writes in the caller's directory (a descriptor), as the caller's UID
        cwd = _fetch_dir(root, "kapp-controller-fetch-template-deploy1")
        synced = _vendir(root, "sync", "-f", "-", "--lock-file", "/dev/null", uid=uid, cwd=cwd, stdin=INLINE)
        assert synced[0] == 0, synced[2]
        assert synced[2] == ""
        written = root / cwd.lstrip("/") / "0" / "values.yml"
        assert written.read_text() == "replicas: 2"
        assert written.stat().st_uid == uid
        assert _status(root, uid)["calls"] == 5
        # the server killed: the next call finds a stale socket, starts a new server and is served by it
        os.kill(server, 9)
        time.sleep(0.2)
        assert _vendir(root, "version", "--debug", uid=uid) == (0, version, "")
        assert _status(root, uid)["pid"] not in (None, server)
        server = _status(root, uid)["pid"]
        assert _vendir(root, "version", "--debug", uid=uid) == (0, version, "")
        (root / DIRECTORY).chmod(0o755)
        assert _vendir(root, "version", "--debug", uid=uid) == (0, version, f"vendir: debug: ocivendir server "
                                                                f"unavailable (/{DIRECTORY} has mode 0755, not 0700); "
                                                                "running in-process\n")  # fmt: skip
        (root / DIRECTORY).chmod(0o700)
    finally:
        if server:
            os.kill(server, 9)
