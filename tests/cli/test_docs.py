"""Generated docs never drift: man pages and completions match the click tree; the README shows every command."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import click
import pytest

from ocivendir.commands._docgen import generate
from ocivendir.commands.root import cli

ROOT = Path(__file__).resolve().parents[2]


def documentation() -> list[Path]:
    """The user-facing documentation: the README (the front door) and the pages of docs/."""
    return [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def all_commands() -> list[tuple[str, ...]]:
    found: list[tuple[str, ...]] = []

    def walk(group: click.Group, prefix: tuple[str, ...]) -> None:
        for name, command in group.commands.items():
            if command.hidden:
                continue
            found.append((*prefix, name))
            if isinstance(command, click.Group):
                walk(command, (*prefix, name))

    walk(cli, ())
    return sorted(found)


def test_committed_man_pages_and_completions_match_a_fresh_generation(tmp_path: Path) -> None:
    written = generate(tmp_path)
    for path in written:
        committed = ROOT / path.relative_to(tmp_path)
        assert committed.exists(), f"{committed} is missing: run python -m ocivendir.commands._docgen"
        assert committed.read_text() == path.read_text(), (
            f"{committed} drifted: run python -m ocivendir.commands._docgen"
        )
    generated = {p.relative_to(tmp_path) for p in written}
    committed_files = {p.relative_to(ROOT) for d in ("man", "completions") for p in (ROOT / d).iterdir()}
    assert committed_files == generated


@pytest.mark.parametrize("path", all_commands(), ids=" ".join)
def test_every_command_has_a_man_page_and_a_readme_example(path: tuple[str, ...]) -> None:
    assert (ROOT / "man" / f"{'-'.join(('ocivendir', *path))}.1").exists()
    readme = (ROOT / "README.md").read_text()
    assert f"ocivendir {' '.join(path)}" in readme


def test_flags_named_in_the_readme_exist() -> None:
    readme = "\n".join(path.read_text() for path in documentation())
    known = {"--help", "--version"}
    for _, command in [((), cli), *[(p, cli.commands[p[0]]) for p in all_commands() if len(p) == 1]]:
        stack = [command]
        while stack:
            current = stack.pop()
            for param in current.params:
                if isinstance(param, click.Option):
                    known.update(param.opts + param.secondary_opts)
            if isinstance(current, click.Group):
                stack.extend(current.commands.values())
    mentioned = set(re.findall(r"(?<![\w-])(--[a-z][a-z0-9-]+)", readme))
    foreign = {"--strict", "--to-repo", "--lock-output", "--preserve-permissions", "--repo-based-tags", "--to-tar"}
    foreign |= {"--frozen", "--prepare", "--onedir", "--standalone"}  # dist.sh, freezers
    foreign |= {"--build-arg", "--data-value"}  # docker, ytt
    foreign |= {"--data-value-yaml", "--data-values-file"}  # ytt
    foreign |= {"--only", "--merge", "--reps"}  # bench/run.sh
    foreign |= {"--from-file"}  # kubectl create configmap
    foreign |= {"--tar"}  # imgpkg copy --tar FILE
    assert mentioned - known - foreign == set()


def _groff() -> str:
    found = shutil.which("groff")
    if found is None:
        if os.environ.get("CI"):
            pytest.fail("groff is not installed and CI is set (scripts/bootstrap.sh installs groff-base)")
        pytest.skip("groff not installed (apt-get install groff-base)")
    return found


def test_man_pages_are_ascii_and_render_without_a_single_groff_warning(tmp_path: Path) -> None:
    groff = _groff()
    pages = sorted(p for p in generate(tmp_path) if p.suffix == ".1")
    assert pages
    for page in pages:
        data = page.read_bytes()
        assert data.isascii(), f"{page.name}: non-ASCII bytes (use roff escapes such as \\[u2026])"
        done = subprocess.run([groff, "-ww", "-man", "-Tutf8", "-z", str(page)], capture_output=True, check=False)
        assert (done.returncode, done.stderr.decode()) == (0, ""), page.name


def test_the_groff_check_sees_a_bad_page(tmp_path: Path) -> None:
    bad = tmp_path / "bad.1"
    bad.write_text('.TH "BAD" 1\n.SH NAME\nbad \\- an ellipsis \u2026 in raw UTF-8\n', encoding="utf-8")
    done = subprocess.run([_groff(), "-ww", "-man", "-Tutf8", "-z", str(bad)], capture_output=True, check=False)
    assert b"warning" in done.stderr
