"""The build id (`scripts/client.sh --build-id DIR`): what the client is compiled with and the server names its socket by."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.client.conftest import ROOT, compile_client


def build_id(directory: Path) -> str:
    done = subprocess.run([shutil.which("bash") or "/bin/bash", str(ROOT / "scripts" / "client.sh"), "--build-id",
                           str(directory)], capture_output=True, text=True, check=True)  # fmt: skip
    return done.stdout.strip()


def test_any_change_of_the_build_changes_its_id_and_the_client_and_its_id_do_not(tmp_path: Path) -> None:
    build = tmp_path / "ocivendir"
    (build / "_internal").mkdir(parents=True)
    (build / "ocivendir").write_bytes(b"\x7fELF program")
    (build / "_internal" / "a.pyc").write_bytes(b"code")
    (build / "modes").mkdir()
    (build / "modes" / "vendir").symlink_to("../ocivendir")
    first = build_id(build)
    assert re.fullmatch(r"[0-9a-f]{16}", first)
    (build / "vendir").write_bytes(b"the client")
    (build / "BUILD_ID").write_text(first)
    assert build_id(build) == first  # written after the id is taken: not part of it
    (build / "_internal" / "a.pyc").write_bytes(b"code!")
    changed = build_id(build)
    assert changed != first
    (build / "_internal" / "a.pyc").rename(build / "_internal" / "b.pyc")
    renamed = build_id(build)
    assert renamed not in (first, changed)
    (build / "modes" / "vendir").unlink()
    (build / "modes" / "vendir").symlink_to("../other")
    assert build_id(build) not in (first, changed, renamed)


@pytest.mark.parametrize("bad", ["0123", "0123456789ABCDEF", "0123456789abcdeg", "0123456789abcdef0"])
def test_the_client_is_built_only_with_a_16_hex_digit_id(tmp_path: Path, bad: str) -> None:
    with pytest.raises(subprocess.CalledProcessError) as failed:
        compile_client(tmp_path / "vendir", bad)
    assert "BUILD_ID must be 16 lowercase hex digits" in failed.value.stderr
    assert not (tmp_path / "vendir").exists()


def test_the_client_carries_its_build_id_and_compiles_warning_free(tmp_path: Path) -> None:
    client = compile_client(tmp_path / "vendir", "fedcba9876543210", "-Wpedantic", "-Wshadow", "-Wconversion")
    assert b"fedcba9876543210" in client.read_bytes()
    assert b"server-%s.sock" in client.read_bytes()


@pytest.mark.skipif(not any(Path(d, "libc.a").exists() for d in ("/usr/lib/x86_64-linux-gnu", "/usr/lib/aarch64-linux-gnu",
                                                                  "/usr/lib64", "/usr/lib")),
                    reason="the C library's static archive (libc6-dev) is not installed")  # fmt: skip
def test_the_client_needs_no_shared_library_and_keeps_aslr(tmp_path: Path) -> None:
    """Linked statically: kapp-controller's every call execs it, and nothing is loaded or relocated; still a PIE."""
    client = compile_client(tmp_path / "vendir")
    readelf = shutil.which("readelf") or "readelf"
    dynamic = subprocess.run(
        [readelf, "-d", "-h", "-W", str(client)], capture_output=True, text=True, check=True
    ).stdout
    assert "(NEEDED)" not in dynamic
    assert re.search(r"Type:\s+DYN", dynamic), "a position-independent executable (ASLR)"
