"""The click-free fast paths: the same flags as click, click only when needed, and cheap start-up.

Vendir mode's `sync …` is parsed by commands/vendirargs.py, `pull …` (ocivendir and imgpkg modes) by
commands/pullargs.py, `version` in main(); anything they do not know goes to click, so errors keep click's and
pflag's texts. Counts of imported modules, never durations.
"""

from __future__ import annotations

import errno
import subprocess
import sys
from dataclasses import fields
from pathlib import Path
from typing import Any

import pytest

from ocivendir.commands import pull as pull_command
from ocivendir.commands import pullrun, runtime, syncrun
from ocivendir.commands import sync as sync_command
from ocivendir.commands.goflags import normalize
from ocivendir.commands.pullargs import parse_pull
from ocivendir.commands.vendirargs import parse_sync
from tests.conftest import run_cli

_SETTINGS_FROM = runtime.settings_from  # the real one, even while an earlier _observe's patch is still in place
_RUNS = ((syncrun, "run_sync"), (sync_command, "run_sync"), (pullrun, "run_pull"), (pull_command, "run_pull"))
_PARSERS = ("ocivendir.commands.vendirargs.parse_sync", "ocivendir.commands.pullargs.parse_pull")


class _Stop(Exception):
    pass


def _observe(
    monkeypatch: pytest.MonkeyPatch, args: list[str], *, via_click: bool, prog: str = "vendir"
) -> dict[str, Any]:
    """The command's flags and the global flag values one command line reaches Run with, on one of the two paths."""
    seen: dict[str, Any] = {}

    def settings(given: dict[str, Any]) -> Any:
        seen["given"] = dict(given)
        return _SETTINGS_FROM(given)

    def run(flags: Any, start: Any) -> None:
        seen["flags"] = {name: getattr(flags, name) for name in (f.name for f in fields(type(flags)))}
        start()
        raise _Stop

    monkeypatch.setattr(runtime, "settings_from", settings)
    for module, name in _RUNS:
        monkeypatch.setattr(module, name, run)
    for parser in _PARSERS if via_click else ():
        monkeypatch.setattr(parser, lambda _a: None)
    result = run_cli(*args, prog=prog)
    assert seen, result.stderr
    return seen


@pytest.mark.parametrize(
    "args",
    [
        ["sync", "-f", "-", "--lock-file", "/dev/null"],
        ["sync", "--file=a.yml,b.yml", "-f", "c.yml", "--lock-file=x.lock", "-l", "--chdir", "."],
        ["sync", "-d", "v/a", "--directory=v/b=../b", "--no-lazy", "--dangerous-allow-all-symlink-destinations"],
        ["sync", "-f=-", "--locked=false", "--lazy=false", "--json", "-q", "--debug", "--tty", "--no-color"],
        ["sync", "--cache-dir", "/c", "--no-cache", "--timeout=2m", "--offline=false", "--stale-if-error", "1h",
         "--relocation-recheck", "0", "--cache-max-size", "2GiB", "--max-extract-size=1GiB", "-y", "--column", "x",
         "--delegate-vendir", "/bin/vendir", "--registry-config", "/r.yaml", "--offline", "--lock-file", "--locked"],
    ],
)  # fmt: skip
def test_the_fast_path_reads_every_flag_as_click_does(monkeypatch: pytest.MonkeyPatch, args: list[str]) -> None:
    assert parse_sync(normalize(args)) is not None  # main() hands the parser Go-normalized arguments
    fast = _observe(monkeypatch, args, via_click=False)
    click = _observe(monkeypatch, args, via_click=True)
    assert fast == click


@pytest.mark.parametrize(
    "args",
    [
        ["sync", "--help"],
        ["sync", "extra"],
        ["sync", "--nope"],
        ["sync", "-z"],
        ["sync", "-lq"],
        ["sync", "-f"],
        ["sync", "--concurrency", "3"],
        ["sync", "--registry-insecure"],
        ["sync", "--", "-f"],
        ["--json", "sync"],
        ["tools", "sort-semver"],
    ],
)
def test_anything_the_fast_path_does_not_know_is_left_to_click(args: list[str]) -> None:
    assert parse_sync(args) is None


def test_pflag_error_texts_survive_the_fast_path() -> None:
    result = run_cli("sync", "-f", "-", "--nope", prog="vendir")
    assert (result.exit_code, result.stderr) == (1, "vendir: Error: unknown flag: --nope\n")
    result = run_cli("sync", "--lock-file", prog="vendir")
    assert result.exit_code == 1
    assert result.stderr.startswith("vendir: Error: Option '--lock-file' requires an argument")


REF = "registry.example/app/bundle@sha256:" + "a" * 64
PULL_ARGS = [
    ["pull", "-b", REF, "-o", "out"],
    ["pull", "--bundle=" + REF, "--output", "o", "-r", "--recursive=true", "-b", "x/y:v1", "--output=-q"],
    ["pull", "-i", "x/y:v1", "-o=out", "--image-is-bundle-check=false", "--image-is-bundle-check", "On"],
    ["pull", "--image", "x/y:v1", "-o", "out", "--image-is-bundle-check", "N", "--recursive=false"],
    ["pull", "--lock", "bundle.lock.yml", "-o", "--", "-b", "", "-i", ""],
    ["pull", "-b", REF, "-o", "o", "--cache-dir", "/c", "--no-cache", "--cache-max-size", "2GiB",
     "--max-extract-size=1GiB", "--relocation-recheck", "0", "--timeout=2m", "--concurrency", " 3 ",
     "--offline", "--no-offline", "--offline=1", "--stale-if-error", "1h", "--registry-config", "/r.yaml",
     "--registry-concurrency=+2", "--json", "-q", "--quiet=true", "-v", "--verbose", "--debug", "--tty", "--color",
     "--no-color", "-y", "--yes", "--column", "a", "--column=b"],
    ["pull", "-b", REF, "-o", "o", "--registry-ca-cert-path", "a.pem", "--registry-ca-cert-path=b.pem",
     "--registry-verify-certs", "FALSE", "--registry-insecure", "--insecure-registry", "h1", "--insecure-registry=h2",
     "--registry-username", "u", "--registry-password=p", "--registry-token", "t", "--registry-anon",
     "--registry-anon=false", "--registry-response-header-timeout", "5s", "--registry-retry-count", "2"],
    ["pull", "-o", "o", "--registry-verify-certs=y", "--registry-retry-count=0", "--registry-anon=t"],
]  # fmt: skip


@pytest.mark.parametrize("prog", ["ocivendir", "imgpkg"])
@pytest.mark.parametrize("args", PULL_ARGS)
def test_the_pull_fast_path_reads_every_flag_as_click_does(
    monkeypatch: pytest.MonkeyPatch, args: list[str], prog: str
) -> None:
    assert parse_pull(normalize(args)) is not None
    fast = _observe(monkeypatch, args, via_click=False, prog=prog)
    click = _observe(monkeypatch, args, via_click=True, prog=prog)
    assert fast == click


@pytest.mark.parametrize(
    "args",
    [
        ["pull", "--help"],
        ["pull", "-h"],
        ["pull", "extra"],
        ["pull", "-b", REF, "-o", "o", "extra"],
        ["pull", "--nope"],
        ["pull", "-rq"],
        ["pull", "-bx/y:v1"],
        ["pull", "-o"],
        ["pull", "--output"],
        ["pull", "-o=x"],
        ["pull", "--recursive=yes"],
        ["pull", "--concurrency", "many"],
        ["pull", "--registry-retry-count=1.5"],
        ["pull", "--registry-verify-certs", "maybe"],
        ["pull", "--image-is-bundle-check", ""],
        ["pull", "--image-is-bundle-check", " true"],
        ["pull", "--delegate-vendir", "/bin/vendir"],
        ["pull", "--", "-o", "x"],
        ["--json", "pull", "-b", REF, "-o", "o"],
        ["pull2", "-b", REF],
        ["sync"],
    ],
)
def test_anything_the_pull_fast_path_does_not_know_is_left_to_click(args: list[str]) -> None:
    assert parse_pull(args) is None


@pytest.mark.parametrize("error", [KeyboardInterrupt(), EOFError(), BrokenPipeError(errno.EPIPE, "Broken pipe")])
@pytest.mark.parametrize(
    ("prog", "args"),
    [
        ("ocivendir", ["pull", "-b", REF, "-o", "out"]),
        ("imgpkg", ["pull", "-i", "x/y:v1", "-o", "out"]),
        ("vendir", ["sync", "-f", "-", "--lock-file", "/dev/null"]),
    ],
)
def test_a_fast_path_ends_an_interrupted_run_or_a_broken_pipe_as_click_does(
    monkeypatch: pytest.MonkeyPatch, prog: str, args: list[str], error: BaseException
) -> None:
    def run(_flags: object, _start: object) -> None:
        raise error

    for module, name in _RUNS:
        monkeypatch.setattr(module, name, run)
    fast = run_cli(*args, prog=prog)
    for parser in _PARSERS:
        monkeypatch.setattr(parser, lambda _a: None)
    click = run_cli(*args, prog=prog)
    assert fast == click
    assert fast.exit_code == 1
    assert fast.stderr == ("" if isinstance(error, OSError) else f"\n{prog}: Error: Aborted\n")


def _loaded_after(argv: list[str], stdin: str = "", code: int = 0) -> list[str]:
    probe = (
        "import sys\nfrom ocivendir.commands import main\n"
        f"sys.argv = {argv!r}\n"
        "try:\n    main()\nexcept SystemExit as exc:\n    code = exc.code\n"
        "sys.stderr.write(repr((code, sorted(sys.modules))))\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], input=stdin, capture_output=True, text=True, check=False)
    exit_code, modules = eval(done.stderr.strip().splitlines()[-1])  # noqa: S307 - our own probe's repr
    assert exit_code == code, done.stderr
    return list(modules)


@pytest.mark.parametrize("prog", ["vendir", "ocivendir"])
def test_version_imports_six_of_our_modules_and_no_click_typing_or_dataclasses(prog: str) -> None:
    modules = _loaded_after([prog, "version"])
    ours = [m for m in modules if m.startswith("ocivendir")]
    assert ours == [
        "ocivendir",
        "ocivendir.commands",
        "ocivendir.commands.goflags",
        "ocivendir.errors",
        "ocivendir.output",
    ]
    assert not {"click", "typing", "dataclasses", "re", "pathlib", "json"} & set(modules)


def test_a_vendir_sync_never_imports_click(tmp_path: Path) -> None:
    config = "apiVersion: vendir.k14s.io/v1alpha1\nkind: Config\ndirectories:\n- path: v\n  contents:\n"
    config += "  - path: a\n    inline: {paths: {a.txt: a}}\n"
    modules = _loaded_after(["vendir", "sync", "-f", "-", "--lock-file", "/dev/null", "--chdir", str(tmp_path),
                             "--no-cache"], config)  # fmt: skip
    assert (tmp_path / "v/a/a.txt").read_text() == "a"
    assert "click" not in modules


@pytest.mark.parametrize("prog", ["ocivendir", "imgpkg"])
def test_pull_imports_click_only_when_its_fast_path_declines_the_command_line(tmp_path: Path, prog: str) -> None:
    """A bad reference fails the same way on both paths (exit 2, or imgpkg's 1), before any network use."""
    code = 1 if prog == "imgpkg" else 2
    argv = [prog, "pull", "-b", "not a reference", "-o", str(tmp_path / "out"), "--no-cache"]
    assert "click" not in _loaded_after(argv, code=code)
    assert "click" in _loaded_after([*argv, "--concurrency", "x"], code=code)
    assert "click" in _loaded_after([*argv, "--help"])
    assert not (tmp_path / "out").exists()
