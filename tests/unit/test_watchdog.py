"""The deadline watchdog: a socket whose alarm comes due is shut down under its blocked reader; a cancelled one is not.

Socket pairs only (no network); what is asserted is what the reader got, never how long it waited.
"""

from __future__ import annotations

import os
import socket
from time import monotonic

from ocivendir.registry.watchdog import WATCHDOG


def test_a_due_alarm_ends_a_blocked_read_and_says_it_fired() -> None:
    reader, writer = socket.socketpair()
    with reader, writer:
        reader.settimeout(60)  # far longer than the test: only the watchdog can end this read
        alarm = WATCHDOG.arm(reader, monotonic() + 0.05)
        assert reader.recv(1) == b""  # the end of the stream, though the writer never closed
        assert alarm.cancel() is True


def test_a_cancelled_alarm_leaves_its_socket_alone() -> None:
    kept, kept_writer = socket.socketpair()
    shut, shut_writer = socket.socketpair()
    with kept, kept_writer, shut, shut_writer:
        early = WATCHDOG.arm(kept, monotonic() + 0.05)
        assert early.cancel() is False
        WATCHDOG.arm(shut, monotonic() + 0.1)  # due after the cancelled one: once it fired, that one was passed over
        shut.settimeout(60)
        assert shut.recv(1) == b""
        kept_writer.sendall(b"x")
        assert kept.recv(1) == b"x"


def test_a_forked_child_gets_a_watchdog_thread_of_its_own() -> None:
    """The server forks a worker per call: the parent's watchdog thread does not exist in the child."""
    reader, writer = socket.socketpair()
    with reader, writer:
        reader.settimeout(60)
        WATCHDOG.arm(reader, monotonic())
        assert reader.recv(1) == b""  # this process's thread runs
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child reports through its exit code
        code = 1
        try:
            child_reader, _child_writer = socket.socketpair()
            child_reader.settimeout(5)
            WATCHDOG.arm(child_reader, monotonic())
            code = 0 if child_reader.recv(1) == b"" else 2
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
