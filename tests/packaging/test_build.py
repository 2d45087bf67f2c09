"""The artifacts of ./scripts/dist.sh: a glibc-only onedir build, its tarball, a wheel and an sdist that install."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest
from scripts.dist import elfcheck

from ocivendir import __version__

pytestmark = pytest.mark.dist
ROOT = Path(__file__).resolve().parents[2]


def test_every_elf_file_needs_only_glibc_from_the_system_and_at_most_glibc_2_36(frozen: Path) -> None:
    report = elfcheck.check(frozen)
    assert report.problems == []
    assert len(report.elf_files) >= 20  # the bootloader, libpython, OpenSSL, libffi, sqlite, the extension modules
    assert report.floor <= (2, 36)
    assert report.system_libraries <= elfcheck.GLIBC_FAMILY
    names = {p.name for p in report.elf_files}
    assert {"libssl.so.3", "libcrypto.so.3", "libffi.so.8", "libsqlite3.so.0", "libz.so.1"} <= names
    assert any(n.startswith("_yaml.") for n in names)  # libyaml's binding travels too
    assert elfcheck.needed(frozen / "ocivendir") == ["libc.so.6"]  # the bootloader has zlib built in


def test_the_check_fails_loudly_on_a_library_outside_glibc(tmp_path: Path) -> None:
    libssl = next(p for p in (Path("/usr/lib/x86_64-linux-gnu/libssl.so.3"), Path("/lib/x86_64-linux-gnu/libssl.so.3"),
                              Path("/usr/lib/aarch64-linux-gnu/libssl.so.3")) if p.exists())  # fmt: skip
    shutil.copy(libssl, tmp_path / "libssl.so.3")
    done = subprocess.run([sys.executable, str(ROOT / "scripts/dist/elfcheck.py"), str(tmp_path)],
                          capture_output=True, text=True, check=False)  # fmt: skip
    assert done.returncode == 1
    assert "libssl.so.3 needs libcrypto.so.3, which is neither a glibc library nor in the build" in done.stderr


def test_code_ships_as_bytecode_and_the_symlink_named_vendir_is_vendir(frozen: Path, tmp_path: Path) -> None:
    assert list(frozen.rglob("*.py")) == []
    pycs = {str(p.relative_to(frozen / "_internal")) for p in frozen.rglob("*.pyc")}
    assert {"ocivendir/commands/__init__.pyc", "click/core.pyc", "yaml/__init__.pyc", "json/__init__.pyc"} <= pycs
    assert "ctypes/__init__.pyc" in pycs  # fs/swap.py exchanges trees with renameat2 through ctypes
    link = tmp_path / "vendir"
    link.symlink_to(frozen / "ocivendir")
    env = {"PATH": "/nonexistent", "OCIVENDIR_SERVER": "off"}  # named vendir, it would start the user's own server
    as_vendir = subprocess.run([str(link), "version"], capture_output=True, text=True, env=env, check=True)
    assert as_vendir.stdout.startswith(f"vendir version 0.41.1+ocivendir.{__version__}\n")
    as_self = subprocess.run([str(frozen / "ocivendir"), "--version"], capture_output=True, text=True, env=env,
                             check=True)  # fmt: skip
    assert as_self.stdout == f"ocivendir {__version__}\n"


def test_the_build_carries_re2_for_registries_yaml_rewrites_and_its_cpp_runtime(frozen: Path, tmp_path: Path) -> None:
    names = {p.name for p in elfcheck.check(frozen).elf_files}
    assert any(n.startswith("_re2.") for n in names)
    assert "libstdc++.so.6" in names  # RE2 is C++: its runtime travels in the build (glibc 2.36 for arc4random)
    config = tmp_path / "registries.yaml"
    config.write_text(
        'mirrors:\n  "127.0.0.1:1":\n    endpoint: ["http://127.0.0.1:2"]\n    rewrite:\n      "(?=x)": y\n'
    )
    done = subprocess.run([str(frozen / "ocivendir"), "pull", "-i", "127.0.0.1:1/a/b:v1", "-o", str(tmp_path / "out"),
                           "--no-cache", "--registry-config", str(config)], capture_output=True, text=True,
                          check=False, env={"PATH": "/nonexistent"})  # fmt: skip
    assert done.returncode == 2
    assert done.stderr == (
        f"ocivendir: Error: {config}:5: invalid rewrite pattern '(?=x)' for mirror '127.0.0.1:1': "
        "invalid perl operator: (?=\n"
    )


def test_start_up_runs_no_runtime_hook_that_imports_setuptools_multiprocessing_inspect_or_pkgutil(frozen: Path) -> None:
    from PyInstaller.archive.readers import CArchiveReader  # noqa: PLC0415 - installed by scripts/dist.sh

    entries = set(CArchiveReader(str(frozen / "ocivendir")).toc)
    hooks = {name for name in entries if name.startswith(("pyi_rth_", "rth_"))}
    # scripts/dist/hooks replaces those of inspect and pkgutil; cryptography's only points OpenSSL at its modules
    assert hooks == {"pyi_rth_skip", "rth_environ", "pyi_rth_cryptography_openssl"}


def test_the_tarball_is_the_build_directory(dist_dir: Path, frozen: Path) -> None:
    arch = os.uname().machine
    tarball = dist_dir / f"ocivendir-{__version__}-linux-{arch}.tar.gz"
    with tarfile.open(tarball) as archive:
        members = {m.name: m for m in archive.getmembers()}
    files = {str(p.relative_to(frozen.parent)) for p in frozen.rglob("*")} | {"ocivendir"}
    assert set(members) == files
    executable = members["ocivendir/ocivendir"]
    assert executable.mode & 0o111 == 0o111
    assert {(m.uid, m.gid, m.mtime) for m in members.values()} == {(0, 0, 0)}


def _fresh_venv(where: Path, artifact: Path) -> Path:
    subprocess.run([sys.executable, "-m", "venv", str(where)], check=True, capture_output=True)
    python = where / "bin" / "python"
    subprocess.run([str(python), "-m", "pip", "install", "-q", str(artifact)], check=True, capture_output=True)
    return python


@pytest.mark.parametrize("kind", ["wheel", "sdist"])
def test_wheel_and_sdist_install_in_a_fresh_venv_with_runtime_dependencies_only(
    dist_dir: Path, tmp_path: Path, kind: str
) -> None:
    pattern = f"ocivendir-{re.escape(__version__)}-py3-none-any.whl" if kind == "wheel" else \
        f"ocivendir-{re.escape(__version__)}.tar.gz"  # fmt: skip
    artifact = next(p for p in dist_dir.iterdir() if re.fullmatch(pattern, p.name))
    python = _fresh_venv(tmp_path / "venv", artifact)
    helped = subprocess.run([str(python.parent / "ocivendir"), "--help"], capture_output=True, text=True, check=True)
    assert helped.stdout.startswith("Usage: ocivendir [OPTIONS] COMMAND [ARGS]...")
    listed = subprocess.run([str(python), "-m", "pip", "list", "--format=freeze"], capture_output=True, text=True,
                            check=True).stdout.lower()  # fmt: skip
    installed = {line.split("==")[0] for line in listed.splitlines()}
    assert {"ocivendir", "click", "pyyaml", "rich", "platformdirs", "google-re2", "requests", "urllib3"} <= installed
    assert not installed & {
        "oras",
        "pytest",
        "mypy",
        "ruff",
        "responses",
        "pyinstaller",
        "build",
    }


def test_the_build_holds_the_native_client_compiled_with_the_builds_id(frozen: Path) -> None:
    build_id = (frozen / "BUILD_ID").read_text()
    assert re.fullmatch(r"[0-9a-f]{16}", build_id)
    computed = subprocess.run([shutil.which("bash") or "/bin/bash", str(ROOT / "scripts" / "client.sh"), "--build-id",
                               str(frozen)], capture_output=True, text=True, check=True).stdout.strip()  # fmt: skip
    assert computed == build_id
    client = frozen / "vendir"
    assert client.stat().st_mode & 0o111 == 0o111
    assert build_id.encode() in client.read_bytes()
    assert elfcheck.needed(client) in ([], ["libc.so.6"])  # static where libc.a is installed, else glibc alone
    assert client.stat().st_size < (1 << 20 if not elfcheck.needed(client) else 64 << 10)
    for mode in ("vendir", "imgpkg"):
        assert (frozen / "modes" / mode).readlink() == Path("../ocivendir")


def test_the_client_without_a_usable_server_runs_the_build_in_process(frozen: Path, tmp_path: Path) -> None:
    unusable = tmp_path / "d"
    unusable.mkdir(mode=0o755)
    env = {"PATH": "/nonexistent", "OCIVENDIR_SERVER_DIR": str(unusable)}
    done = subprocess.run([str(frozen / "vendir"), "version"], capture_output=True, text=True, env=env, check=True)
    direct = subprocess.run([str(frozen / "modes" / "vendir"), "version"], capture_output=True, text=True, check=True,
                            env={**env, "OCIVENDIR_SERVER": "off"})  # fmt: skip
    assert done.stdout == direct.stdout
    assert done.stdout.startswith("vendir version ")
    assert f"+ocivendir.{__version__}\n" in done.stdout
    assert done.stderr == ""
    unshare = shutil.which("unshare")
    if unshare is None or os.geteuid() != 0:
        pytest.skip("no /proc-less namespace here (unshare as root)")
    script = f'PATH=/usr/bin:/bin umount -l /proc && test ! -e /proc/self/exe && exec "{frozen}/vendir" version'
    no_proc = subprocess.run([unshare, "--mount", "--propagation", "private", "/bin/sh", "-c", script],
                             capture_output=True, text=True, env=env, check=False)  # fmt: skip
    if no_proc.returncode != 0 and "umount" in no_proc.stderr + no_proc.stdout:
        pytest.skip(f"cannot unmount /proc here: {no_proc.stderr}")
    assert (no_proc.returncode, no_proc.stdout, no_proc.stderr) == (0, done.stdout, "")
