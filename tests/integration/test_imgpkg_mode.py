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


@pytest.mark.parametrize(
    ("body", "answer", "detail"),
    [
        (b"{}", "unexpected status code 404 Not Found: {}", "{}"),
        (b'{"errors": null}', 'unexpected status code 404 Not Found: {"errors": null}', '{"errors": null}'),
        (b'{"errors": [1]}', ": ", '{"errors": [1]}'),
        (b"<html>no</html>", "unexpected status code 404 Not Found: <html>no</html>", "<html>no</html>"),
    ],
    ids=["empty-object", "null-errors", "number-error", "html"],
)
def test_a_malformed_error_body_reads_as_ggcr_reads_it(tmp_path: Path, body: bytes, answer: str, detail: str) -> None:
    """A registry's 404 whose body is no distribution error: ggcr's text in imgpkg mode, never a Python exception."""
    from tests.support.hostile import Reply, hostile  # noqa: PLC0415

    with hostile(lambda _: Reply(status=404, reason="Not Found", body=body)) as server:
        ref = f"{server.host}/hostile/app"
        imgpkg = run_cli("pull", "-i", ref, "-o", str(tmp_path / "i"), "--no-cache", prog="imgpkg")
        ocivendir = run_cli("pull", "-i", ref, "-o", str(tmp_path / "o"), "--no-cache")
    assert (imgpkg.exit_code, imgpkg.stdout) == (1, "")
    url = f"http://{server.host}/v2/hostile/app/manifests/latest"
    assert imgpkg.stderr == f"imgpkg: Error: Fetching image:\n  GET {url}: {answer}\n"  # no capital: one line
    assert ocivendir.exit_code == 1
    assert ocivendir.stderr == f"ocivendir: Error: Fetching manifest '{ref}:latest': not found ({detail})\n"
    assert not (tmp_path / "i").exists()
    assert not (tmp_path / "o").exists()
