"""The native client's line in the server log (`OCIVENDIR_SERVER_LOG`): why a call ran in-process.

As the Python client writes it (cli/ocivendir/server/log.py): one line, the UTC time and the pid, never through a
link, rotated at 8 MiB; a served call writes nothing.
"""

from __future__ import annotations

import fcntl
import os
import re
from pathlib import Path

from tests.client.conftest import BUILD, Install
from tests.client.test_client import finish_with, refuse
from tests.support.fakeserver import fake_server

LINE = re.compile(rb"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z (\d+) client: runs (\S+) in-process: (.*)\n")
MAX_LOG_BYTES = 8 << 20  # server/log.py's


def test_a_call_run_in_process_says_why_in_the_log(install: Install, tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    with fake_server(install.server_dir, BUILD, refuse) as server:
        done = install.run(env=install.env(OCIVENDIR_SERVER_LOG=str(log)))
        server.only_call()
    assert (done.returncode, done.stderr) == (3, b"")  # the log, not stderr: silent without --debug
    [run] = install.runs()
    match = LINE.fullmatch(log.read_bytes())
    assert match is not None, log.read_bytes()
    assert (int(match[1]), match[2], match[3]) == (run["pid"], b"vendir", b"too busy")
    assert log.stat().st_mode & 0o777 == 0o600


def test_a_served_call_writes_nothing_and_a_program_not_named_vendir_or_imgpkg_is_ocivendir(
    install: Install, tmp_path: Path
) -> None:
    log = tmp_path / "server.log"
    with fake_server(install.server_dir, BUILD, finish_with(0)) as server:
        install.run(env=install.env(OCIVENDIR_SERVER_LOG=str(log)))
        server.only_call()
    assert not log.exists()
    install.run(argv0="ocivendir", env=install.env(OCIVENDIR_SERVER="on", OCIVENDIR_SERVER_DIR="relative",
                                                   OCIVENDIR_SERVER_LOG=str(log)))  # fmt: skip
    match = LINE.fullmatch(log.read_bytes())
    assert match is not None
    assert (match[2], match[3]) == (b"ocivendir", b"OCIVENDIR_SERVER_DIR is not an absolute path: relative")


def test_a_relative_log_path_or_a_link_there_is_never_written(install: Install, tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.write_bytes(b"kept\n")
    link = tmp_path / "server.log"
    link.symlink_to(elsewhere)
    with fake_server(install.server_dir, BUILD, refuse):
        for value in (str(link), "relative.log"):
            done = install.run(env=install.env(OCIVENDIR_SERVER_LOG=value), cwd=tmp_path)
            assert done.returncode == 3  # the call still runs
    assert elsewhere.read_bytes() == b"kept\n"
    assert link.is_symlink()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["elsewhere", "install", "server.log"]


def test_a_full_log_becomes_dot_1_and_a_new_one_is_begun(install: Install, tmp_path: Path) -> None:
    log, older = tmp_path / "server.log", tmp_path / "server.log.1"
    log.write_bytes(b"x" * MAX_LOG_BYTES)
    older.write_bytes(b"the one before\n")
    with fake_server(install.server_dir, BUILD, refuse):
        install.run(env=install.env(OCIVENDIR_SERVER_LOG=str(log)))
    assert older.stat().st_size == MAX_LOG_BYTES
    match = LINE.fullmatch(log.read_bytes())
    assert match is not None
    assert match[3] == b"too busy"


def test_control_characters_in_a_reason_become_spaces(install: Install, tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    install.run(argv0="ocivendir", env=install.env(OCIVENDIR_SERVER="on", OCIVENDIR_SERVER_DIR="rel\r\x1b[2J\nx",
                                                   OCIVENDIR_SERVER_LOG=str(log)))  # fmt: skip
    match = LINE.fullmatch(log.read_bytes())
    assert match is not None
    assert match[3] == b"OCIVENDIR_SERVER_DIR is not an absolute path: rel  [2J x"


def test_a_fifo_or_another_users_file_at_the_log_path_is_never_written(install: Install, tmp_path: Path) -> None:
    fifo = tmp_path / "fifo.log"
    os.mkfifo(fifo)
    with fake_server(install.server_dir, BUILD, refuse):
        done = install.run(env=install.env(OCIVENDIR_SERVER_LOG=str(fifo)))  # no reader: a blocking open hangs
        assert done.returncode == 3
        if os.geteuid() == 0:
            theirs = tmp_path / "theirs.log"
            theirs.write_bytes(b"theirs\n")
            theirs.chmod(0o666)
            os.chown(theirs, 1, 1)
            install.run(env=install.env(OCIVENDIR_SERVER_LOG=str(theirs)))
            assert theirs.read_bytes() == b"theirs\n"


def test_a_full_log_that_cannot_be_set_aside_or_whose_lock_is_held_drops_the_line(
    install: Install, tmp_path: Path
) -> None:
    log = tmp_path / "server.log"
    log.write_bytes(b"x" * MAX_LOG_BYTES)
    (tmp_path / "server.log.1").mkdir()  # the rename onto it fails
    (tmp_path / "server.log.1" / "x").write_bytes(b"")
    with fake_server(install.server_dir, BUILD, refuse):
        install.run(env=install.env(OCIVENDIR_SERVER_LOG=str(log)))
        assert log.stat().st_size == MAX_LOG_BYTES
        (tmp_path / "server.log.1" / "x").unlink()
        (tmp_path / "server.log.1").rmdir()
        holder = os.open(log, os.O_RDONLY)
        try:
            fcntl.flock(holder, fcntl.LOCK_EX)  # anyone who can read it can hold its lock: the client does not wait
            done = install.run(env=install.env(OCIVENDIR_SERVER_LOG=str(log)))
        finally:
            os.close(holder)
    assert done.returncode == 3
    assert log.stat().st_size == MAX_LOG_BYTES
    assert not (tmp_path / "server.log.1").exists()
