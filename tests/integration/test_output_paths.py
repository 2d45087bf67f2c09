"""Output paths are checked after resolution (issue 9.3).

`pull -o` and sync's directory and content paths never replace the project, its parents, HOME or the cache, and
never write outside the working directory.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import run_cli
from tests.support.builders import Pusher, make_image
from tests.support.registry import Registry

HEAD = "apiVersion: vendir.k14s.io/v1alpha1\nkind: Config\n"
DISALLOWED = "Disallowed output directory (trying to avoid accidental deletion)"


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, isolated_env: Path) -> Path:
    """tmp/project (the cwd) and everything around it carry sentinels; the cache lives in tmp/cache."""
    work = tmp_path / "project"
    (work / "sub").mkdir(parents=True)
    (work / "conf").mkdir()
    (work / "conf/vendir.yml").write_text("")
    (work / "self").symlink_to(".")
    (work / "up").symlink_to("..")
    (work / "a-file").write_text("sentinel")
    (work / "file-link").symlink_to("a-file")
    (tmp_path / "cache").mkdir()
    for place in (work, work / "sub", tmp_path, tmp_path / "cache", isolated_env):
        (place / "sentinel.txt").write_text("sentinel")
    monkeypatch.chdir(work)
    monkeypatch.setenv("OCIVENDIR_CACHE_DIR", str(tmp_path / "cache"))
    return work


def snapshot(root: Path) -> dict[str, str]:
    """Every path under root and each file's text (the config the test writes excepted)."""
    return {str(p.relative_to(root)): p.read_text() if p.is_file() and p.name != "vendir.yml" else ""
            for p in sorted(root.rglob("*"))}  # fmt: skip


@pytest.mark.parametrize(
    ("output", "reason"),
    [
        ("./", "which is the working directory"),
        ("{cwd}", "which is the working directory"),
        ("{cwd}/", "which is the working directory"),
        ("self", "which is the working directory"),
        ("sub/..", "which is the working directory"),
        ("../", "which contains the working directory"),
        ("up", "which contains the working directory"),
        ("{home}", "which is the home directory"),
        ("{cache}", "which is the cache"),
        ("{cache}/blobs", "which is inside the cache"),
        ("a-file", "exists and is not a directory"),
        ("file-link", "exists and is not a directory"),
    ],
)  # fmt: skip
def test_pull_refuses_an_output_that_resolves_to_something_that_must_survive(
    registry: Registry, pusher: Pusher, repo_prefix: str, project: Path, isolated_env: Path, output: str, reason: str
) -> None:
    ref = pusher.image(f"{repo_prefix}/img", make_image({"new.txt": "new"}))
    given = output.format(cwd=project, home=isolated_env, cache=project.parent / "cache")
    before = snapshot(project.parent)
    mark = registry.mark()
    result = run_cli("pull", "-i", ref, "-o", given)
    assert result.exit_code == 2
    assert result.stderr.startswith(f"ocivendir: Error: {DISALLOWED}: '{given}' ")
    assert reason in result.stderr
    assert registry.since(mark) == []
    assert snapshot(project.parent) == before


def test_pull_into_a_symlink_to_another_directory_replaces_the_link_not_its_target(
    registry: Registry, pusher: Pusher, repo_prefix: str, project: Path
) -> None:
    ref = pusher.image(f"{repo_prefix}/img", make_image({"new.txt": "new"}))
    (project / "sub/out-link").symlink_to("../../elsewhere")
    (project.parent / "elsewhere").mkdir()
    (project.parent / "elsewhere/keep.txt").write_text("keep")
    assert run_cli("pull", "-i", ref, "-o", "sub/out-link").exit_code == 0
    assert (project / "sub/out-link/new.txt").read_text() == "new"
    assert not (project / "sub/out-link").is_symlink()
    assert (project.parent / "elsewhere/keep.txt").read_text() == "keep"


def sync(config: str, *args: str, prog: str = "ocivendir") -> tuple[int, str]:
    Path("conf/vendir.yml").write_text(HEAD + config)
    result = run_cli("sync", "-f", "conf/vendir.yml", "--lock-file", "/dev/null", *args, prog=prog)
    return result.exit_code, " ".join(line.strip() for line in result.stderr.splitlines())


def inline(directory: str, content: str = ".") -> str:
    return f'directories:\n- path: "{directory}"\n  contents:\n  - path: "{content}"\n    inline: {{paths: {{f: x}}}}\n'


@pytest.mark.parametrize(
    ("config", "message"),
    [
        (inline("../x"), "Validating directory '../x' (0): Invalid path: '../x' (expected a relative path inside the "
                         "working directory)"),
        (inline("a/../../x"), "Invalid path: '../x' (expected a relative path inside the working directory)"),
        (inline("/var/ocivendir-abs"), "Invalid path: '/var/ocivendir-abs' (expected a relative path inside"),
        (inline("./"), "Validating directory '.' (0): Invalid path: '.' resolves to '{cwd}', which is the working "
                       "directory"),
        (inline("sub/.."), "Invalid path: '.' resolves to '{cwd}', which is the working directory"),
        (inline("self"), "Invalid path: 'self' resolves to '{cwd}', which is the working directory"),
        (inline("up"), "Invalid path: 'up' resolves to '{parent}', which is outside the working directory"),
        (inline("up/x"), "Invalid path: 'up/x' resolves to '{parent}/x', which is outside the working directory"),
        (inline("conf"), "Invalid path: 'conf' resolves to '{cwd}/conf', which is the directory of 'conf/vendir.yml'"),
        (inline("v", "../y"), "Validating directory contents '../y' (0): Invalid path: '../y' (expected a relative "
                              "path inside 'v')"),
        (inline("v", "a/../../y"), "Invalid path: '../y' (expected a relative path inside 'v')"),
        (inline("v", "/etc/y"), "Invalid path: '/etc/y' (expected a relative path inside 'v')"),
    ],
)  # fmt: skip
def test_sync_refuses_paths_that_leave_the_project_or_replace_it(project: Path, config: str, message: str) -> None:
    before = snapshot(project.parent)
    code, stderr = sync(config)
    assert code == 2
    assert message.format(cwd=project, parent=project.parent) in stderr
    assert sync(config, prog="vendir")[0] == 1
    assert snapshot(project.parent) == before


def test_sync_refuses_a_directory_in_or_around_the_cache(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OCIVENDIR_CACHE_DIR", str(project / ".cache/ocivendir"))
    (project / ".cache/ocivendir").mkdir(parents=True)
    before = snapshot(project.parent)
    code, stderr = sync(inline(".cache"))
    assert code == 2
    assert f"Invalid path: '.cache' resolves to '{project}/.cache', which contains the cache" in stderr
    code, stderr = sync(inline(".cache/ocivendir/blobs"))
    assert code == 2
    assert "which is inside the cache" in stderr
    assert snapshot(project.parent) == before


def test_sync_under_d_checks_each_content_target(project: Path) -> None:
    (project / "v").mkdir()
    (project / "v/out").symlink_to("../..")
    before = snapshot(project.parent)
    code, stderr = sync(inline("v", "out"), "-d", "v/out")
    assert code == 2
    assert f"Invalid path: 'out' resolves to '{project.parent}', which is outside directory 'v'" in stderr
    assert snapshot(project.parent) == before


def test_kapp_controllers_paths_keep_working_with_chdir_and_stdin(project: Path) -> None:
    config = HEAD + inline("0")
    result = run_cli("sync", "-f", "-", "--lock-file", "/dev/null", "--chdir", "sub", prog="vendir", stdin=config)
    assert result.exit_code == 0, result.stderr
    assert (project / "sub/0/f").read_text() == "x"
    refused = run_cli("sync", "-f", "-", "--chdir", "sub", prog="vendir", stdin=HEAD + inline("../x"))
    assert refused.exit_code == 1
    assert not (project / "x").exists()
