"""The command line as users and kapp-controller see it: versions, exit codes, error layout, JSON envelope."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import click
import pytest

from ocivendir import IMGPKG_COMPAT_VERSION, VENDIR_COMPAT_VERSION, __version__
from ocivendir.commands.root import cli
from ocivendir.flagscan import ROOT_VALUES
from tests.conftest import run_cli
from tests.support.devfull import FULL, run_into_full_disk


def test_version_in_both_program_modes() -> None:
    assert run_cli("version").stdout == f"ocivendir {__version__}\n"
    assert run_cli("--version").stdout == f"ocivendir {__version__}\n"
    vendir = f"vendir version {VENDIR_COMPAT_VERSION}+ocivendir.{__version__}\n"
    assert run_cli("version", prog="/usr/local/bin/vendir").stdout == vendir
    assert run_cli("--version", prog="vendir").stdout == vendir
    imgpkg = f"imgpkg version {IMGPKG_COMPAT_VERSION}+ocivendir.{__version__}\n"
    assert run_cli("version", prog="/usr/local/bin/imgpkg").stdout == imgpkg
    assert run_cli("--version", prog="imgpkg").stdout == imgpkg


@pytest.mark.parametrize("command", ["sync", "cache", "verify-relocation", "tools"])
def test_imgpkg_mode_offers_only_pull_and_version(command: str) -> None:
    result = run_cli(command, prog="/usr/bin/imgpkg")
    assert result.exit_code == 1
    assert result.stderr.startswith("imgpkg: Error: ")
    assert "No such command" in result.stderr
    assert run_cli(command, "--help").exit_code == 0  # ocivendir mode still has it


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["pull", "-b", "x/y"], 'required flag(s) "output" not set'),
        (["pull", "-b", "x/y", "-o", "."], "Disallowed output directory (trying to avoid accidental deletion)"),
        (["pull", "-b", "x/y", "-i", "x/z", "-o", "out"], "Expected only one of image, bundle, or lock"),
        (["pull", "-o", "out"], "Expected either image or bundle reference"),
        (["pull", "-i", "x/y", "-r", "-o", "out"], "Cannot use --recursive (-r) flag when pulling a bundle"),
        (["pull", "-b", "x/y", "--image-is-bundle-check=false", "-o", "out"],
         "Cannot set --image-is-bundle-check while using -b flag"),
        (["pull", "-i", "http://r.io/app", "-o", "out"], "could not parse reference: http://r.io/app"),
        (["pull", "-i", "r.io/app:v1", "-o", "out", "--cache-max-size", "lots"], "invalid size 'lots'"),
        (["pull", "-i", "r.io/app:v1", "-o", "out", "--timeout", "5"], "invalid duration '5'"),
        (["no-such-command"], "No such command"),
    ],
)  # fmt: skip
def test_problems_found_without_the_network_exit_2_in_ocivendir_mode_and_1_as_vendir(
    args: list[str], message: str
) -> None:
    result = run_cli(*args)
    assert result.exit_code == 2
    assert result.stderr.startswith("ocivendir: Error: ")
    assert message in result.stderr
    assert result.stdout == ""
    as_vendir = run_cli(*args, prog="vendir")
    assert as_vendir.exit_code == 1
    assert as_vendir.stderr.startswith("vendir: Error: ")
    if args[0] == "pull":
        as_imgpkg = run_cli(*args, prog="imgpkg")
        assert as_imgpkg.exit_code == 1
        assert as_imgpkg.stderr.startswith("imgpkg: Error: ")
        assert message in as_imgpkg.stderr


def test_json_errors_are_one_envelope_on_stdout_with_a_stable_code() -> None:
    result = run_cli("pull", "-o", "out", "--json")
    assert result.exit_code == 2
    doc = json.loads(result.stdout)
    assert set(doc) == {"command", "error", "schemaVersion", "status"}
    assert doc["status"] == "error"
    assert doc["command"] == "pull"
    assert set(doc["error"]) == {"code", "hint", "message"}
    assert doc["error"]["code"] == "usage"


def test_global_flags_are_accepted_before_and_after_the_subcommand() -> None:
    before = run_cli("--json", "pull", "-o", "out")
    after = run_cli("pull", "-o", "out", "--json")
    assert json.loads(before.stdout)["error"] == json.loads(after.stdout)["error"]


@pytest.mark.parametrize("command", sorted(n for n, c in cli.commands.items() if not c.hidden))
def test_every_command_has_help_with_examples_or_description(command: str) -> None:
    result = run_cli(command, "--help")
    assert result.exit_code == 0
    assert f"Usage: ocivendir {command}" in result.stdout


def test_python_dash_m_runs_and_help_imports_no_network_stack() -> None:
    code = (  # the check runs at exit: an atexit callback makes run() finalize as usual (test_entry.py)
        "import sys, runpy, atexit; sys.argv=['ocivendir','--help']\n"
        "atexit.register(lambda: sys.stderr.write(repr([m for m in ('requests', 'oras', 'rich', 'sqlite3')"
        " if m in sys.modules])))\n"
        "runpy.run_module('ocivendir', run_name='__main__')\n"
    )
    env = {**os.environ, "OCIVENDIR_SERVER": "off"}  # what this process imports, even in a through-server run
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False, env=env)
    assert "Usage: ocivendir" in done.stdout
    assert done.stderr.strip() == "[]"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["sync", "--nope"], "unknown flag: --nope"),
        (["sync", "-z"], "unknown shorthand flag: 'z' in -z"),
        (["sync", "extra"], "command 'vendir sync' does not accept extra arguments 'extra'"),
    ],
)
def test_go_flag_errors_keep_pflags_texts_in_vendir_mode(args: list[str], message: str) -> None:
    result = run_cli(*args, prog="vendir")
    assert result.exit_code == 1
    assert result.stderr == f"vendir: Error: {message}\n"


def test_go_flag_syntax_is_accepted(tmp_path: Path) -> None:
    (tmp_path / "vendir.yml").write_text(
        "apiVersion: vendir.k14s.io/v1alpha1\nkind: Config\ndirectories:\n- path: v\n  contents:\n  - path: .\n"
        "    lazy: true\n    inline: {paths: {a.txt: a}}\n"
    )
    for args in (["--lazy=false", "--locked=false", "--tty=true"], ["-f=vendir.yml", "--lazy=true", "-l=f"]):
        result = run_cli("sync", f"--chdir={tmp_path}", "--no-cache", *args, prog="vendir")
        assert result.exit_code == 0, result.stderr
        assert (tmp_path / "v/a.txt").read_text() == "a"


def test_vendir_tools_are_refused_clearly() -> None:
    result = run_cli("tools", "sort-semver", "--versions", "1.0.0", prog="vendir")
    assert result.exit_code == 1
    assert result.stderr == "vendir: Error: not supported by ocivendir\n"


def test_an_unexpected_failure_is_one_error_line_and_a_traceback_only_with_debug(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    def broken(*_args: object, **_kwargs: object) -> None:
        msg = "disk vanished"
        raise RuntimeError(msg)

    monkeypatch.setattr("ocivendir.engine.pull.pull", broken)
    args = ["pull", "-i", "r.io/some/app:v1", "-o", str(tmp_path / "o"), "--no-cache"]
    result = run_cli(*args)
    assert result.exit_code == 1
    assert result.stderr == (
        "ocivendir: Error: RuntimeError: disk vanished (hint: run again with --debug for a traceback)\n"
    )
    debug = run_cli(*args, "--debug")
    assert "Traceback (most recent call last)" in debug.stderr


BILLION_LAUGHS = "\n".join(
    ['a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    + [f"{name}: &{name} [{','.join(['*' + below] * 9)}]" for below, name in zip("abcdefgh", "bcdefghi", strict=True)]
)


@pytest.mark.parametrize(
    ("data", "problem"),
    [
        (b"\x00\x01\xff\xfe\x89PNG\r\n\x1a\n", "control characters are not allowed"),
        (b"apiVersion: vendir.k14s.io/v1alpha1\nkind: Config\nx: caf\xe9\n", "incomplete UTF-8 octet sequence"),
        (f"apiVersion: vendir.k14s.io/v1alpha1\nkind: Config\n{BILLION_LAUGHS}\n".encode(),
         "document contains excessive aliasing"),
        (b"apiVersion: vendir.k14s.io/v1alpha1\nkind: Config\nx: " + b"[" * 100_000, "line 3: exceeded max depth of 1000"),
    ],
    ids=["binary", "latin-1", "billion-laughs", "deep"],
)  # fmt: skip
def test_hostile_yaml_is_one_readable_usage_error_from_a_file_or_stdin(
    tmp_path: Path, data: bytes, problem: str
) -> None:
    (tmp_path / "vendir.yml").write_bytes(data)
    expected = f"Unmarshaling doc: error converting YAML to JSON: yaml: {problem}"
    result = run_cli("sync", "--chdir", str(tmp_path))
    assert result.exit_code == 2
    assert result.stderr.splitlines()[1:] == [f"  {expected}"]
    assert result.stderr.splitlines()[0] == "ocivendir: Error: Parsing resource config 'vendir.yml':"
    as_vendir = run_cli("sync", "-f", "-", "--lock-file", "/dev/null", prog="vendir", stdin=data)
    assert as_vendir.exit_code == 1
    assert as_vendir.stderr == f"vendir: Error: Parsing resource config '-':\n  {expected}\n"
    assert as_vendir.stdout == ""
    assert sorted(p.name for p in tmp_path.iterdir()) == ["vendir.yml"]


def test_a_lock_file_that_cannot_be_written_names_it_instead_of_a_bare_errno(tmp_path: Path) -> None:
    (tmp_path / "vendir.yml").write_text(
        "apiVersion: vendir.k14s.io/v1alpha1\nkind: Config\ndirectories:\n- path: v\n  contents:\n  - path: .\n"
        "    inline: {paths: {a: b}}\n"
    )
    (tmp_path / "lockdir").mkdir()
    result = run_cli("sync", "--chdir", str(tmp_path), "--lock-file", "lockdir", "--no-cache")
    assert result.exit_code == 1
    assert result.stderr.splitlines()[-1] == "ocivendir: Error: Writing lock config 'lockdir': is a directory"
    assert "Errno" not in result.stderr


@pytest.mark.skipif(not FULL.exists(), reason="no /dev/full")
@pytest.mark.parametrize(
    "args",
    [["sync", "--no-cache"], ["sync", "--no-cache", "--json"], ["cache", "ls", "--cache-dir", "c"], ["cache", "ls", "--cache-dir", "c", "--json"],
     ["version"]],
    ids=" ".join,
)  # fmt: skip
def test_a_stdout_on_a_full_disk_is_one_error_line_naming_it_and_exit_1(tmp_path: Path, args: list[str]) -> None:
    """The result cannot be written: `<prog>: Error: '/dev/stdout': no space left on device`, never a traceback."""
    (tmp_path / "src").mkdir()
    (tmp_path / "src/a.txt").write_text("a\n")
    (tmp_path / "vendir.yml").write_text(
        "apiVersion: vendir.k14s.io/v1alpha1\nkind: Config\ndirectories:\n- path: v\n  contents:\n  - path: a\n"
        "    directory: {path: src}\n"
    )
    done = run_into_full_disk(*args, cwd=tmp_path)
    assert done.returncode == 1, done.stderr
    assert done.stderr.splitlines()[-1] == "ocivendir: Error: '/dev/stdout': no space left on device"
    assert "Traceback" not in done.stderr
    assert done.stderr.count("Error:") == 1
    if args[0] == "sync":  # the sync itself was done: only its report was lost
        assert (tmp_path / "v/a/a.txt").read_text() == "a\n"


@pytest.mark.skipif(not FULL.exists(), reason="no /dev/full")
def test_an_error_whose_json_envelope_cannot_be_written_is_still_its_own_line_on_stderr(tmp_path: Path) -> None:
    done = run_into_full_disk("pull", "-i", "Bad/Ref:1", "-o", "out", "--json", cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    assert done.stderr == "ocivendir: Error: could not parse reference:\n  Bad/Ref:1\n"


def _root_value_flags() -> list[click.Option]:
    return [p for p in cli.params if isinstance(p, click.Option) and not p.is_flag and p.name != "version"]


def test_the_root_flags_that_take_a_value_are_the_ones_the_command_name_skips() -> None:
    assert {name for p in _root_value_flags() for name in p.opts if name.startswith("--")} == ROOT_VALUES


@pytest.mark.parametrize("flag", _root_value_flags(), ids=lambda p: p.opts[-1])
@pytest.mark.parametrize("joined", [False, True], ids=["separate", "joined"])
def test_the_json_envelope_names_the_subcommand_after_a_root_flag_and_its_value(
    flag: click.Option, joined: bool
) -> None:
    """`ocivendir --cache-dir sync pull …` is a pull: a root flag's value is never taken for the command."""
    value = "2" if flag.type is click.INT else "true" if flag.type is click.BOOL else "sync"
    name = next(n for n in flag.opts if n.startswith("--"))
    given = [f"{name}={value}"] if joined else [name, value]
    result = run_cli(*given, "pull", "-o", "out", "--json")
    assert result.exit_code != 0
    assert json.loads(result.stdout)["command"] == "pull"


@pytest.mark.parametrize(
    ("tail", "message"),
    [
        ("---\n---\n", "Parsing resource config '-':\n  Unknown apiVersion '' or kind '' for resource"),
        ("---\n---", "Parsing resource config '-':\n  Unknown apiVersion '' or kind '' for resource"),
        ("--- x\n", "Parsing config '-': invalid Yaml document separator: x"),
    ],
    ids=["empty-document", "unterminated-separator", "bad-separator"],
)
def test_a_config_on_stdin_is_split_into_documents_as_vendir_splits_it(
    tail: str, message: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """kapp-controller's `vendir sync -f -`: the stdin stream is read by the Kubernetes reader, as vendir 0.40.0 does."""
    monkeypatch.setenv("VENDIR_CACHE_DIR", str(tmp_path / "cache"))
    config = "apiVersion: vendir.k14s.io/v1alpha1\nkind: Config\ndirectories: []\n"
    result = run_cli("sync", "-f", "-", "--lock-file", "/dev/null", prog="vendir", stdin=config + tail)
    assert (result.exit_code, result.stdout) == (1, "")
    assert result.stderr == f"vendir: Error: {message}\n"
    fine = run_cli("sync", "-f", "-", "--lock-file", "/dev/null", prog="vendir", stdin="---\n" + config + "---\n")
    assert fine.exit_code == 0, fine.stderr
