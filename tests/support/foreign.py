"""Test support: a Unix socket listened on by another user (uid 65534), recording every byte it is handed.

Needs root and setpriv(1); the test is skipped otherwise.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from collections.abc import Iterator

__all__ = ["ForeignListener", "foreign_listener"]

_SCRIPT = """
import socket, sys
s = socket.socket(socket.AF_UNIX)
s.bind(sys.argv[1])
s.listen(1)
print('ready', flush=True)
conn, _ = s.accept()
conn.settimeout(10)
data = b''
try:
    while chunk := conn.recv(65536):
        data += chunk
except OSError:
    pass
open(sys.argv[2], 'wb').write(data)
"""


class ForeignListener:
    """The socket's path, and what was received once the listener ended (None: nobody connected)."""

    def __init__(self, directory: Path) -> None:
        self.socket = directory / "sock"
        self._received = directory / "received"
        self.received: bytes | None = None


@contextmanager
def foreign_listener() -> Iterator[ForeignListener]:
    """A listener running as uid 65534 in a directory of /tmp that it can write; removed when the block ends."""
    setpriv = shutil.which("setpriv")
    if os.geteuid() != 0 or setpriv is None:
        pytest.skip("needs root and setpriv to listen as another user")
    directory = Path(tempfile.mkdtemp(prefix="ovi-foreign-", dir="/tmp"))
    directory.chmod(0o777)
    found = ForeignListener(directory)
    listener = subprocess.Popen(
        [setpriv, "--reuid=65534", "--regid=65534", "--clear-groups", sys.executable, "-c", _SCRIPT,
         str(found.socket), str(found._received)], stdout=subprocess.PIPE, text=True)  # fmt: skip
    try:
        assert listener.stdout is not None
        assert listener.stdout.readline() == "ready\n"
        yield found
    finally:
        try:
            listener.wait(30)
        finally:
            listener.kill()
            listener.wait()
            if found._received.exists():
                found.received = found._received.read_bytes()
            shutil.rmtree(directory)
