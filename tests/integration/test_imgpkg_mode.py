"""imgpkg mode against a real registry: a failed fetch reads as imgpkg's `Fetching image: <ggcr's text>`."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import run_cli
from tests.support.registry import Registry


def expected_error(registry: Registry, repo: str) -> str:
    """Imgpkg 0.43.1's text for this registry's answer (go-containerregistry's transport error, MultiLineError)."""
    return (
        "imgpkg: Error: Fetching image:\n"
        f"  GET http://{registry.host}/v2/{repo}/manifests/latest:\n"
        "    MANIFEST_UNKNOWN: manifest unknown; map[Tag:latest]\n"
    )


@pytest.mark.parametrize("flag", ["-i", "-b"])
def test_a_missing_image_is_framed_as_imgpkg_frames_it(
    registry: Registry, repo_prefix: str, tmp_path: Path, flag: str
) -> None:
    repo = f"{repo_prefix}/nothing"
    mark = registry.mark()
    result = run_cli("pull", flag, f"{registry.host}/{repo}", "-o", str(tmp_path / "out"), "--no-cache",
                     prog="/usr/local/bin/imgpkg")  # fmt: skip
    assert (result.exit_code, result.stdout) == (1, "")
    assert result.stderr == expected_error(registry, repo)
    manifest = f"/v2/{repo}/manifests/latest"
    assert registry.since(mark) == [("HEAD", manifest, 404), ("GET", manifest, 404)]
    assert not (tmp_path / "out").exists()


def test_imgpkg_fetches_before_it_looks_at_the_output_directory(registry: Registry, repo_prefix: str) -> None:
    repo = f"{repo_prefix}/nothing"
    result = run_cli("pull", "--tty", "-i", f"{registry.host}/{repo}", "-o", "/dev/null", "--no-cache",
                     prog="imgpkg")  # fmt: skip
    assert result.exit_code == 1
    assert result.stderr == expected_error(registry, repo)


def test_ocivendir_mode_keeps_its_own_messages(registry: Registry, repo_prefix: str, tmp_path: Path) -> None:
    ref = f"{registry.host}/{repo_prefix}/nothing"
    result = run_cli("pull", "-i", ref, "-o", str(tmp_path / "out"), "--no-cache")
    assert result.exit_code == 1
    assert result.stderr == (
        f"ocivendir: Error: Fetching manifest '{ref}:latest': not found (MANIFEST_UNKNOWN: manifest unknown)\n"
    )
    refused = run_cli("pull", "-i", ref, "-o", "/dev/null", "--no-cache")
    assert refused.exit_code == 2
    assert refused.stderr.startswith("ocivendir: Error: Disallowed output directory")
