"""The deadline watchdog: a socket whose alarm comes due is shut down under its blocked reader; a cancelled one is not.

Socket pairs only (no network); what is asserted is what the reader got, never how long it waited.
"""

from __future__ import annotations

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
