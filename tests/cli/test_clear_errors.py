"""Leftovers of issue 22.10: clear errors for credentials in a reference, `image: {}`, and OS errors naming their path."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ocivendir.errors import TLSVerifyError
from ocivendir.registry.transport import ClientOptions, _ssl_context
from tests.conftest import run_cli
from tests.support.mounts import small_tmpfs

SECRET = "hunter2-pass"
CONFIG = """apiVersion: vendir.k14s.io/v1alpha1
kind: Config
directories:
- path: vendor
  contents:
  - path: a
{content}
"""


def write_config(where: Path, content: str) -> None:
    (where / "vendir.yml").write_text(CONFIG.format(content=content))


@pytest.mark.parametrize("flag", ["-i", "-b"])
@pytest.mark.parametrize("json_out", [False, True])
def test_credentials_in_a_pulled_reference_are_a_reference_error_that_never_echoes_them(
    tmp_path: Path, flag: str, json_out: bool
) -> None:
    extra = ["--json"] if json_out else []
    done = run_cli("pull", flag, f"user:{SECRET}@r.example/team/app:v1", "-o", str(tmp_path / "o"), *extra)
    assert done.exit_code == 2
    assert SECRET not in done.stdout + done.stderr
    assert "digest" not in done.stdout + done.stderr  # was: "unsupported digest algorithm"
    text = json.loads(done.stdout)["error"]["message"] if json_out else done.stderr
    assert "could not parse reference: <credentials>@r.example/team/app:v1: a reference holds no credentials" in text


@pytest.mark.parametrize("prog", ["ocivendir", "vendir"])
def test_credentials_in_a_synced_url_are_refused_and_never_echoed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, prog: str
) -> None:
    monkeypatch.chdir(tmp_path)
    write_config(tmp_path, f"    image: {{url: 'user:{SECRET}@r.example/team/app:v1'}}")
    done = run_cli("sync", "--no-cache", prog=prog)
    assert done.exit_code == (2 if prog == "ocivendir" else 1)
    assert SECRET not in done.stdout + done.stderr
    assert "<credentials>@r.example/team/app:v1: a reference holds no credentials" in done.stderr
    if prog == "ocivendir":
        assert "Fetching: vendor + a (image from <credentials>@r.example/team/app:v1)" in done.stderr


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("    image: {}", "Expected non-empty URL"),
        ("    image: {url: ''}", "Expected non-empty URL"),
        ("    imgpkgBundle: {}", "Expected non-empty image"),
    ],
)
@pytest.mark.parametrize("prog", ["ocivendir", "vendir"])
def test_an_image_without_a_url_is_a_config_error_in_vendirs_words(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, content: str, message: str, prog: str
) -> None:
    monkeypatch.chdir(tmp_path)
    write_config(tmp_path, content)
    done = run_cli("sync", "--no-cache", prog=prog)
    assert done.exit_code == (2 if prog == "ocivendir" else 1)  # vendir mode: 0 or 1 only
    kind = "image" if "image:" in content else "imgpkgBundle"
    assert f"Syncing directory 'vendor':\n  Syncing directory 'a' with {kind} contents:\n    {message}\n" in done.stderr
    assert not (tmp_path / "vendor").exists()


def test_a_directory_source_that_is_a_file_names_it_without_an_errno(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "afile").write_text("x")
    write_config(tmp_path, "    directory: {path: afile}")
    done = run_cli("sync", "--no-cache")
    assert done.exit_code == 1
    assert f"Copying another directory contents into directory 'a': '{tmp_path / 'afile'}': not a directory" in (
        done.stderr
    )
    assert "Errno" not in done.stderr


def test_a_delegated_vendir_that_is_missing_is_named_without_an_errno(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    write_config(tmp_path, "    git: {url: 'https://example.invalid/x', ref: main}")
    done = run_cli("sync", "--no-cache", "--delegate-vendir", "/nonexistent/vendir")
    assert done.exit_code == 1
    assert "Running /nonexistent/vendir: '/nonexistent/vendir': no such file or directory" in done.stderr
    assert "Errno" not in done.stderr


@pytest.mark.parametrize("cache", [["--no-cache"], []])
def test_an_output_directory_below_a_file_is_refused_before_anything_is_made(tmp_path: Path, cache: list[str]) -> None:
    (tmp_path / "afile").write_text("x")
    done = run_cli("pull", "-i", "127.0.0.1:1/a/b:v1", "-o", str(tmp_path / "afile/out"), *cache,
                   "--cache-dir", str(tmp_path / "cache"))  # fmt: skip
    assert done.exit_code == 2  # was 1 with "[Errno 17] File exists"
    assert f"below '{tmp_path / 'afile'}', which is not a directory" in done.stderr
    assert "Errno" not in done.stderr
    assert (tmp_path / "afile").read_text() == "x"


def test_a_missing_ca_file_is_named_without_an_errno(tmp_path: Path) -> None:
    missing = tmp_path / "ca.pem"
    with pytest.raises(TLSVerifyError) as caught:
        _ssl_context(ClientOptions(ca_files=(str(missing),)), verify=True)
    assert caught.value.message == f"Loading CA certificate '{missing}': no such file or directory"


def test_os_reason_names_the_paths_in_gos_words() -> None:
    from ocivendir.errors import os_reason  # noqa: PLC0415 - the one test of the helper itself

    assert os_reason(IsADirectoryError(21, "Is a directory", "/c/blobs/sha256/ab")) == (
        "'/c/blobs/sha256/ab': is a directory"
    )
    assert os_reason(FileNotFoundError(2, "No such file or directory", "/a", None, "/b")) == (
        "'/a' -> '/b': no such file or directory"
    )
    assert os_reason(OSError("cannot create the cache key /k")) == "cannot create the cache key /k"
    assert os_reason(PermissionError(13, "Permission denied")) == "permission denied"


def test_os_reason_names_the_full_filesystem_by_where_it_is_mounted(tmp_path: Path) -> None:
    """ENOSPC says so, with the path, and the mount point of the filesystem that is full (issue 34, finding 13)."""
    from ocivendir.errors import os_reason  # noqa: PLC0415 - the one test of the helper itself

    with small_tmpfs(tmp_path / "small", "64k") as mount:
        full = mount.path / "tmp" / "ab.partial"
        assert os_reason(OSError(28, "No space left on device", str(full))) == (
            f"'{full}': no space left on device (on the filesystem mounted at '{mount.path}')"
        )
