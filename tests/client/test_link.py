"""How scripts/client.sh links the native client: statically, unless a static client would not work as it is.

Where musl is installed (`musl-gcc`) and CC is not set, with musl, as a static position-independent executable: no
interpreter, no library, and no CPU probing at start (glibc's costs 0.25 ms of CPU per call on a virtual machine).
Otherwise with CC's C library (glibc). Static glibc cannot do what needs its run-time modules (NSS: getpwuid,
getaddrinfo, …; iconv): the linker only warns, and a client built so would fail on a machine with another glibc.
Such a client is linked dynamically instead, and a failed build leaves nothing next to its output.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
from scripts.dist import elfcheck

from tests.client.conftest import BUILD, ROOT, compile_client

NSS_USER = """
#include <pwd.h>
#include <unistd.h>
__attribute__((used)) const char *home_of_caller(void) {  /* linked in with the client: an NSS lookup */
    struct passwd *pw = getpwuid(getuid());
    return pw ? pw->pw_dir : 0;
}
"""


WITH_CC = {**os.environ, "CC": "cc"}  # the compiler named: its own C library (glibc), not musl


def _compiler(env: dict[str, str] | None = None) -> str:
    done = subprocess.run([shutil.which("bash") or "/bin/bash", str(ROOT / "scripts" / "client.sh"), "--compiler"],
                          capture_output=True, text=True, check=True, env=env)  # fmt: skip
    return done.stdout


def _program_headers(path: Path) -> str:
    readelf = shutil.which("readelf") or "/usr/bin/readelf"
    return subprocess.run([readelf, "-h", "-l", "-W", str(path)], capture_output=True, text=True, check=True).stdout


@pytest.mark.skipif(shutil.which("musl-gcc") is None, reason="musl is not installed (apt-get install musl-tools)")
def test_where_musl_is_installed_the_client_is_a_static_position_independent_musl_program(tmp_path: Path) -> None:
    client = compile_client(tmp_path / "vendir")
    headers = _program_headers(client)
    assert _compiler().startswith("musl ")
    assert elfcheck.needed(client) == []
    assert "INTERP" not in headers  # nothing to load: no dynamic linker named
    assert "DYN (Position-Independent Executable file)" in headers  # ASLR kept
    assert b"GLIBC_PRIVATE" not in client.read_bytes()  # what static glibc carries
    done = subprocess.run([str(client), "version"], env={"OCIVENDIR_SERVER": "off"}, capture_output=True, text=True,
                          check=False)  # fmt: skip
    assert (done.returncode, done.stderr) == (1, f"vendir: Error: ocivendir client: cannot run {tmp_path}/ocivendir: "
                                                 "No such file or directory\n")  # fmt: skip


def test_a_compiler_named_in_cc_links_the_client_with_its_own_c_library(tmp_path: Path) -> None:
    client = compile_client(tmp_path / "vendir", env=WITH_CC)
    assert _compiler(WITH_CC).startswith("cc ")
    assert b"GLIBC_PRIVATE" in client.read_bytes() or elfcheck.needed(client) == ["libc.so.6"]


def test_a_client_that_would_need_glibcs_run_time_modules_is_not_linked_statically(tmp_path: Path) -> None:
    """The linker's warning (`Using 'getpwuid' in statically linked applications requires …`) fails the static link."""
    if elfcheck.needed(compile_client(tmp_path / "plain", env=WITH_CC)):
        pytest.skip("no static C library (libc.a) here")
    extra = tmp_path / "nss.c"
    extra.write_text(NSS_USER)
    client = compile_client(tmp_path / "vendir", BUILD, str(extra), env=WITH_CC)
    assert elfcheck.needed(client) == ["libc.so.6"]


def test_a_failed_build_leaves_nothing_next_to_its_output(tmp_path: Path) -> None:
    broken = tmp_path / "broken.c"
    broken.write_text("this is not C\n")
    done = subprocess.run([shutil.which("bash") or "/bin/bash", str(ROOT / "scripts" / "client.sh"),
                           str(tmp_path / "vendir"), BUILD, str(broken)], capture_output=True, text=True, check=False)  # fmt: skip
    assert done.returncode != 0
    assert sorted(path.name for path in tmp_path.iterdir()) == ["broken.c"]
