"""The server's pure parts: where its socket lives, who goes through it, the request's bytes, what it preloads."""

from __future__ import annotations

import os
import shutil
import socket
import sys
import time
from pathlib import Path

import pytest

from ocivendir.server import wire
from ocivendir.server.place import SUN_PATH_MAX, Unusable, check_dir, server_dir, socket_path, wanted

# the default places under /tmp and $TMPDIR are what is tested (the directory checks make them safe)
# ruff: noqa: S108


@pytest.mark.parametrize(
    ("environ", "expected"),
    [
        ({"OCIVENDIR_SERVER_DIR": "/run/x", "XDG_RUNTIME_DIR": "/run/user/1"}, "/run/x"),
        ({"XDG_RUNTIME_DIR": "/run/user/1", "TMPDIR": "/var/tmp"}, "/run/user/1/ocivendir"),
        ({"XDG_RUNTIME_DIR": "relative", "TMPDIR": "/var/tmp"}, f"/var/tmp/ocivendir-{os.geteuid()}"),
        ({"TMPDIR": "relative"}, f"/tmp/ocivendir-{os.geteuid()}"),
        ({"OCIVENDIR_SERVER_DIR": "", "XDG_RUNTIME_DIR": ""}, f"/tmp/ocivendir-{os.geteuid()}"),
    ],
)
def test_the_socket_directory_follows_the_environment(environ: dict[str, str], expected: str) -> None:
    assert server_dir(environ) == expected


def test_a_relative_server_dir_is_unusable() -> None:
    with pytest.raises(Unusable, match="not an absolute path"):
        server_dir({"OCIVENDIR_SERVER_DIR": "run/x"})


def test_only_a_private_directory_of_our_own_is_usable(tmp_path: Path) -> None:
    private = tmp_path / "private"
    private.mkdir(mode=0o700)
    private.chmod(0o700)
    check_dir(str(private))
    private.chmod(0o750)
    with pytest.raises(Unusable, match="mode 0750"):
        check_dir(str(private))
    link = tmp_path / "link"
    link.symlink_to(private)
    with pytest.raises(Unusable, match="not a directory"):
        check_dir(str(link))
    with pytest.raises(FileNotFoundError):
        check_dir(str(tmp_path / "missing"))


def test_a_socket_path_too_long_for_sun_path_is_unusable() -> None:
    with pytest.raises(Unusable, match="too long"):
        socket_path("/" + "d" * SUN_PATH_MAX, "0" * 16)


@pytest.mark.parametrize(
    ("argv", "switch", "through"),
    [
        (["/usr/bin/vendir", "sync"], None, True),
        (["vendir", "sync"], "auto", True),
        (["vendir", "sync"], "off", False),
        (["ocivendir", "sync"], None, False),
        (["imgpkg", "pull"], None, False),
        (["ocivendir", "sync"], "on", True),
        (["ocivendir", "server", "status"], "on", False),
        (["ocivendir", "--json", "server", "status"], "on", False),
        (["ocivendir", "--", "server", "status"], "on", False),
        (["vendir"], None, True),
        (["ocivendir", "--cache-dir", "c", "server", "status"], "on", False),  # `c` is the flag's value
        (["ocivendir", "--cache-dir", "server", "sync"], "on", True),
        (["vendir", "sync"], "yes", False),  # a bad value runs in-process, where it is reported
    ],
)
def test_who_goes_through_a_server(argv: list[str], switch: str | None, through: bool) -> None:
    assert wanted(argv, {} if switch is None else {"OCIVENDIR_SERVER": switch}) is through


def test_a_request_reads_back_as_sent() -> None:
    request = wire.Request(op="call", build="ab" * 8, umask=0o27, cwd="/w", argv=["vendir", "sync", "", "ü"],
                           env={"A": "1", "B": "x=y", "EMPTY": ""})  # fmt: skip
    data = wire.encode_request(request)
    assert data[:4] == wire.MAGIC
    back = wire.decode_body(data[8:])
    assert (back.op, back.build, back.umask, back.cwd, back.argv, back.env) == (
        "call", "ab" * 8, 0o27, "/w", ["vendir", "sync", "", "ü"], {"A": "1", "B": "x=y", "EMPTY": ""})  # fmt: skip


def _sent_request(client: socket.socket, *, whole: bool) -> list[int]:
    """A request sent on `client` with four descriptors: whole, or its header and half its body only."""
    data = wire.encode_request(wire.Request(op="call", build="b", umask=0o22, cwd="/", argv=["vendir"], env={"A": "1"}))
    fds = [os.open(os.devnull, os.O_RDONLY) for _ in range(4)]
    try:
        socket.send_fds(client, [data[:8]], fds)
    finally:
        for fd in fds:
            os.close(fd)
    client.sendall(data[8:] if whole else data[8 : 8 + (len(data) - 8) // 2])
    return fds


def test_a_whole_request_is_received_by_its_deadline_with_no_timer_nor_handler() -> None:
    """What is there is taken without waiting: no SIGALRM handler installed, no interval timer armed per call."""
    from ocivendir.server.worker import _receive  # noqa: PLC0415

    asked: list[str] = []

    def profile(_frame: object, event: str, arg: object) -> None:
        if event == "c_call":
            asked.append(getattr(arg, "__name__", ""))

    ours, client = socket.socketpair()
    with ours, client:
        _sent_request(client, whole=True)
        sys.setprofile(profile)
        try:
            request, fds = _receive(ours)
        finally:
            sys.setprofile(None)
        for fd in fds:
            os.close(fd)
    assert (request.argv, request.env, len(fds)) == (["vendir"], {"A": "1"}, 4)
    assert {"signal", "setitimer", "poll", "select"}.isdisjoint(asked)


def test_a_request_that_does_not_come_whole_by_the_deadline_times_out_and_its_descriptors_are_closed() -> None:
    """However it trickles, the request's deadline is one for all of it; the descriptors received are not kept."""
    ours, client = socket.socketpair()
    with ours, client:
        _sent_request(client, whole=False)
        before = set(Path("/proc/self/fd").iterdir())
        with pytest.raises(TimeoutError):
            wire.receive_request(ours, time.monotonic() + 0.2)
        assert set(Path("/proc/self/fd").iterdir()) <= before


@pytest.mark.parametrize(
    "body",
    [b"", b"call\0b\x0022\0/\0", b"call\0b\0" b"22\0/\x002\0only-one\0", b"call\0b\0" b"22\0/\x000\x002\0A=1\0",
     b"drop\0b\0" b"22\0/\x000\x000\0", b"call\0b\0" b"9999\0/\x000\x000\0", b"call\0b\0" b"22\0/\0x\x000\0",
     b"call\0b\0" b"22\0/\x000\x000"],
)  # fmt: skip
def test_a_malformed_request_is_refused(body: bytes) -> None:
    with pytest.raises(wire.WireError):
        wire.decode_body(body)


def test_the_build_id_changes_with_the_installed_dependencies(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from ocivendir.server.build import build_id  # noqa: PLC0415

    site = tmp_path / "site-packages"
    site.mkdir()
    monkeypatch.setattr("sys.path", [*sys.path, str(site)])
    seen = [build_id()]
    assert build_id() == seen[0]  # stable while nothing changes
    (site / "dep").mkdir()
    (site / "dep-1.0.dist-info").mkdir()  # installed
    seen.append(build_id())
    os.utime(site / "dep-1.0.dist-info", ns=(1, 1))  # reinstalled: the same version's metadata written again
    seen.append(build_id())
    (site / "dep-1.0.dist-info").rename(site / "dep-1.1.dist-info")  # upgraded
    seen.append(build_id())
    (site / "extra.pth").write_text("/somewhere\n")  # a path added at start-up
    seen.append(build_id())
    assert len(set(seen)) == len(seen)


def test_the_build_id_changes_with_any_module_of_the_package_and_not_with_its_bytecode(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An editable install's modules are edited in place: each edit, new module or removal is a new build."""
    from ocivendir.server import build  # noqa: PLC0415

    package = tmp_path / "ocivendir"
    (package / "server").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "server" / "build.py").write_text("")
    (package / "server" / "daemon.py").write_text("a = 1\n")
    monkeypatch.setattr(build, "__file__", str(package / "server" / "build.py"))
    seen = [build.build_id()]
    assert build.build_id() == seen[0]  # stable while nothing changes
    (package / "__pycache__").mkdir()
    (package / "__pycache__" / "x.cpython-311.pyc").write_bytes(b"")
    (package / "server" / "notes.txt").write_text("not a module")
    assert build.build_id() == seen[0]
    (package / "server" / "daemon.py").write_text("a = 2\n")  # in place, the same size
    os.utime(package / "server" / "daemon.py", ns=(1, 1))
    seen.append(build.build_id())
    (package / "server" / "daemon.py").write_text("a = 22\n")
    os.utime(package / "server" / "daemon.py", ns=(1, 1))  # the same mtime, another size
    seen.append(build.build_id())
    (package / "server" / "worker.py").write_text("")
    seen.append(build.build_id())
    (package / "server" / "worker.py").rename(package / "server" / "pool.py")
    seen.append(build.build_id())
    assert len(set(seen)) == len(seen)
    assert all(len(one) == 16 and set(one) <= set("0123456789abcdef") for one in seen)


def test_an_installed_package_is_named_by_its_metadata_which_every_install_writes_anew(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Installed with its metadata (pip, uv), the package is one build per install of it.

    A reinstall of the same version or an upgrade writes the metadata anew and changes the id, bytecode does not, and
    the modules are not walked (150 stat calls a served call saves). Copied into site-packages without its metadata,
    its modules are walked.
    """
    from ocivendir.server import build  # noqa: PLC0415

    site = tmp_path / "site-packages"
    package = site / "ocivendir"
    monkeypatch.setattr("sys.path", [*sys.path, str(site)])
    monkeypatch.setattr(build, "__file__", str(package / "server" / "build.py"))
    walked: list[str] = []
    walk = build._describe_tree

    def counted(top: str) -> list[str]:
        walked.append(top)
        return walk(top)

    monkeypatch.setattr(build, "_describe_tree", counted)

    def install(module: str) -> Path:
        """As an installer does it: the old files and metadata removed, the new ones written."""
        shutil.rmtree(package, ignore_errors=True)
        for old in site.glob("ocivendir-*.dist-info"):
            shutil.rmtree(old)
        (package / "server").mkdir(parents=True)
        (package / "__init__.py").write_text("")
        (package / "server" / "build.py").write_text("")
        (package / "server" / "daemon.py").write_text(module)
        metadata = site / f"ocivendir-{build.__version__}.dist-info"
        metadata.mkdir()
        (metadata / "RECORD").write_text(module)
        return metadata

    os.utime(install("a = 1\n"), ns=(1, 1))  # installed a while ago
    seen = [build.build_id()]
    (package / "__pycache__").mkdir()
    (package / "__pycache__" / "daemon.cpython-311.pyc").write_bytes(b"")
    assert build.build_id() == seen[0]
    install("a = 2\n")  # the same version reinstalled with other files
    seen.append(build.build_id())
    monkeypatch.setattr(build, "__version__", "99.0")
    install("a = 2\n")  # upgraded
    seen.append(build.build_id())
    assert walked == []
    shutil.rmtree(site / "ocivendir-99.0.dist-info")  # a bare copy: walked, an edit in place is a new build
    seen.append(build.build_id())
    assert walked == [str(package)]
    (package / "server" / "daemon.py").write_text("a = 3\n")
    os.utime(package / "server" / "daemon.py", ns=(1, 1))
    seen.append(build.build_id())
    assert len(set(seen)) == len(seen)


def test_bytecode_written_into_site_packages_leaves_the_build_id(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An interpreter that writes bytecode creates `__pycache__` in site-packages: no new build (no server retires)."""
    from ocivendir.server.build import build_id  # noqa: PLC0415

    site = tmp_path / "site-packages"
    site.mkdir()
    (site / "dep.py").write_text("")
    (site / "dep-1.0.dist-info").mkdir()
    monkeypatch.setattr("sys.path", [*sys.path, str(site)])
    before = build_id()
    (site / "__pycache__").mkdir()
    (site / "__pycache__" / "dep.cpython-311.pyc").write_bytes(b"")
    assert build_id() == before


def test_a_start_after_an_earlier_start_listened_starts_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A call that takes the start lock after the first server listened (and let it go) starts no second server.

    It finds that server's own lock held (it used to start one that lost the lock and exited).
    """
    from ocivendir.fs.locks import hold_lock  # noqa: PLC0415
    from ocivendir.server import spawn  # noqa: PLC0415
    from ocivendir.server.place import lock_path  # noqa: PLC0415

    directory = tmp_path / "srv"
    directory.mkdir(mode=0o700)
    spawned: list[list[str]] = []
    monkeypatch.setattr(spawn, "spawn_detached", lambda argv, *_a, **_k: spawned.append(argv))
    running = hold_lock(lock_path(str(directory), "b" * 16))  # a server of this build lives
    try:
        assert spawn.start_server(str(directory), "b" * 16) is False
        assert spawned == []
    finally:
        os.close(running)
    assert spawn.start_server(str(directory), "b" * 16) is True
    assert len(spawned) == 1
