"""The server's log file: whole lines appended, 0600, never through a symbolic link, never failing a call."""

from __future__ import annotations

import logging
import os
import stat
import time
from pathlib import Path

import pytest

from ocivendir.errors import UsageError
from ocivendir.fs.locks import lock_open_file
from ocivendir.server.log import MAX_LOG_BYTES, ROTATE_WAIT, AppendHandler, _rotate, append
from ocivendir.settings import load_server_log


def test_each_record_is_one_line_with_the_writers_pid(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    append(str(log), "first")
    append(str(log), "second\nspans lines")
    lines = log.read_text().splitlines()
    assert len(lines) == 2
    assert lines[0].endswith(f"Z {os.getpid()} first")
    assert lines[1].endswith(f"Z {os.getpid()} second spans lines")
    assert stat.S_IMODE(log.stat().st_mode) == 0o600


def test_a_symbolic_link_at_the_path_is_not_followed(tmp_path: Path) -> None:
    target = tmp_path / "elsewhere"
    target.write_text("kept\n")
    (tmp_path / "server.log").symlink_to(target)
    append(str(tmp_path / "server.log"), "planted")
    assert target.read_text() == "kept\n"


def test_a_log_that_cannot_be_written_drops_the_record(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    append(str(tmp_path / "gone" / "server.log"), "dropped")  # no directory: no error
    assert not (tmp_path / "gone").exists()
    monkeypatch.chdir(tmp_path)
    append("server.log", "dropped")  # a relative path: the client's working directory is nobody's log
    assert not (tmp_path / "server.log").exists()


def test_the_handler_writes_debug_records_with_their_level(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    logger = logging.getLogger("ocivendir.test.serverlog")
    logger.propagate = False
    logger.setLevel(logging.DEBUG)
    handler = AppendHandler(str(log))
    logger.addHandler(handler)
    try:
        logger.debug("took %s", "a connection")
        logger.warning("bad %s", "format", "args")  # noqa: PLE1205 - a record that cannot be formatted is dropped, not raised
    finally:
        logger.removeHandler(handler)
    assert log.read_text().splitlines()[0].endswith("debug: took a connection")
    assert len(log.read_text().splitlines()) == 1


def test_the_setting_wants_an_absolute_path() -> None:
    assert load_server_log({}) is None
    assert load_server_log({"OCIVENDIR_SERVER_LOG": "/var/log/ocivendir.log"}) == "/var/log/ocivendir.log"
    with pytest.raises(UsageError, match="OCIVENDIR_SERVER_LOG: expected an absolute path"):
        load_server_log({"OCIVENDIR_SERVER_LOG": "server.log"})


def test_a_full_log_is_set_aside_once_and_a_new_one_begun(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    log.write_bytes(b"old\n" * (MAX_LOG_BYTES // 4))
    (tmp_path / "server.log.1").write_text("older\n")
    append(str(log), "first of the new")
    append(str(log), "second")
    assert (tmp_path / "server.log.1").stat().st_size == MAX_LOG_BYTES  # the older one is gone
    assert [line.split(" ", 2)[2] for line in log.read_text().splitlines()] == ["first of the new", "second"]


def test_a_full_log_found_by_two_writers_at_once_is_set_aside_once(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    log.write_bytes(b"old\n" * (MAX_LOG_BYTES // 4))
    second = os.open(log, os.O_WRONLY | os.O_APPEND)  # a second writer found it full too, and waits for the lock
    append(str(log), "first")  # the first writer sets it aside and begins a new one
    os.close(_rotate(str(log), second))
    assert (tmp_path / "server.log.1").stat().st_size == MAX_LOG_BYTES  # not replaced by the new, short log
    assert log.read_text().endswith(" first\n")


def test_control_characters_in_a_record_become_spaces(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    append(str(log), "dir /tmp/a\rb\x1b[2Jc\x7fd\ttab")
    assert log.read_text().endswith(f" {os.getpid()} dir /tmp/a b [2Jc d tab\n")


def test_a_fifo_at_the_path_is_refused_not_waited_on(tmp_path: Path) -> None:
    fifo = tmp_path / "server.log"
    os.mkfifo(fifo)
    append(str(fifo), "never blocks")  # no reader: a blocking open would hang here
    assert stat.S_ISFIFO(fifo.lstat().st_mode)


@pytest.mark.skipif(os.geteuid() != 0, reason="making a file of another user needs root")
def test_a_log_another_user_made_first_is_not_written_to(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    log.write_text("theirs\n")
    log.chmod(0o666)
    os.chown(log, 1, 1)
    append(str(log), "a reason naming our paths")
    assert log.read_text() == "theirs\n"


def test_a_full_log_that_cannot_be_set_aside_drops_the_record_and_stays_bounded(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    log.write_bytes(b"old\n" * (MAX_LOG_BYTES // 4))
    (tmp_path / "server.log.1").mkdir()  # the rename onto it fails
    (tmp_path / "server.log.1" / "x").write_text("")
    append(str(log), "dropped")
    assert log.stat().st_size == MAX_LOG_BYTES


def test_a_full_log_whose_lock_is_held_past_the_bound_drops_the_record_without_hanging(tmp_path: Path) -> None:
    """Anyone who can read the log can flock it: a writer waits ROTATE_WAIT for a rotation, never longer."""
    log = tmp_path / "server.log"
    log.write_bytes(b"old\n" * (MAX_LOG_BYTES // 4))
    holder = os.open(log, os.O_RDONLY)
    try:
        lock_open_file(holder)
        started = time.monotonic()
        append(str(log), "dropped")
        waited = time.monotonic() - started
    finally:
        os.close(holder)
    assert log.stat().st_size == MAX_LOG_BYTES
    assert ROTATE_WAIT <= waited < ROTATE_WAIT + 5  # bounded (a count, not a timing: it returned at all)
