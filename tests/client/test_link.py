"""How scripts/client.sh links the native client: statically, unless a static client would not work as it is.

Static glibc cannot do what needs its run-time modules (NSS: getpwuid, getaddrinfo, …; iconv): the linker only warns,
and a client built so would fail on a machine with another glibc. Such a client is linked dynamically instead, and a
failed build leaves nothing next to its output.
"""

from __future__ import annotations

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


def test_a_client_that_would_need_glibcs_run_time_modules_is_not_linked_statically(tmp_path: Path) -> None:
    """The linker's warning (`Using 'getpwuid' in statically linked applications requires …`) fails the static link."""
    if elfcheck.needed(compile_client(tmp_path / "plain")):
        pytest.skip("no static C library (libc.a) here")
    extra = tmp_path / "nss.c"
    extra.write_text(NSS_USER)
    client = compile_client(tmp_path / "vendir", BUILD, str(extra))
    assert elfcheck.needed(client) == ["libc.so.6"]


def test_a_failed_build_leaves_nothing_next_to_its_output(tmp_path: Path) -> None:
    broken = tmp_path / "broken.c"
    broken.write_text("this is not C\n")
    done = subprocess.run([shutil.which("bash") or "/bin/bash", str(ROOT / "scripts" / "client.sh"),
                           str(tmp_path / "vendir"), BUILD, str(broken)], capture_output=True, text=True, check=False)  # fmt: skip
    assert done.returncode != 0
    assert sorted(path.name for path in tmp_path.iterdir()) == ["broken.c"]
