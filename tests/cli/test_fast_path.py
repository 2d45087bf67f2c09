"""Vendir mode's click-free fast path: the same flags as click, click only when needed, and cheap start-up.

`vendir sync …` and `version` are parsed by commands/vendirargs.py; anything it does not know goes to click, so
errors keep click's and pflag's texts. Counts of imported modules, never durations.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from ocivendir.commands import runtime, syncrun
from ocivendir.commands import sync as sync_command
from ocivendir.commands.goflags import normalize
from ocivendir.commands.vendirargs import parse_sync
from ocivendir.record import fields
from tests.conftest import run_cli


class _Stop(Exception):
    pass


def _observe(monkeypatch: pytest.MonkeyPatch, args: list[str], *, via_click: bool) -> dict[str, Any]:
    """The sync flags and the global flag values one command line reaches Run with, on one of the two paths."""
    seen: dict[str, Any] = {}
    real_settings = runtime.settings_from

    def settings(given: dict[str, Any]) -> Any:
        seen["given"] = dict(given)
        return real_settings(given)

    def run(flags: syncrun.SyncFlags, start: Any) -> None:
        seen["flags"] = {name: getattr(flags, name) for name in (f.name for f in fields(syncrun.SyncFlags))}
        start()
        raise _Stop

    monkeypatch.setattr(runtime, "settings_from", settings)
    monkeypatch.setattr(syncrun, "run_sync", run)
    monkeypatch.setattr(sync_command, "run_sync", run)
    if via_click:
        monkeypatch.setattr("ocivendir.commands.vendirargs.parse_sync", lambda _a: None)
    result = run_cli(*args, prog="vendir")
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


def _loaded_after(argv: list[str], stdin: str = "") -> list[str]:
    probe = (
        "import sys\nfrom ocivendir.commands import main\n"
        f"sys.argv = {argv!r}\n"
        "try:\n    main()\nexcept SystemExit as exc:\n    code = exc.code\n"
        "sys.stderr.write(repr((code, sorted(sys.modules))))\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], input=stdin, capture_output=True, text=True, check=False)
    code, modules = eval(done.stderr.strip().splitlines()[-1])  # noqa: S307 - our own probe's repr
    assert code == 0, done.stderr
    return list(modules)


@pytest.mark.parametrize("prog", ["vendir", "ocivendir"])
def test_version_imports_five_of_our_modules_and_no_click_typing_or_dataclasses(prog: str) -> None:
    modules = _loaded_after([prog, "version"])
    ours = [m for m in modules if m.startswith("ocivendir")]
    assert ours == ["ocivendir", "ocivendir.commands", "ocivendir.commands.goflags", "ocivendir.errors",
                    "ocivendir.output"]  # fmt: skip
    assert not {"click", "typing", "dataclasses", "re", "pathlib", "json"} & set(modules)


def test_a_vendir_sync_never_imports_click(tmp_path: Path) -> None:
    config = "apiVersion: vendir.k14s.io/v1alpha1\nkind: Config\ndirectories:\n- path: v\n  contents:\n"
    config += "  - path: a\n    inline: {paths: {a.txt: a}}\n"
    modules = _loaded_after(["vendir", "sync", "-f", "-", "--lock-file", "/dev/null", "--chdir", str(tmp_path),
                             "--no-cache"], config)  # fmt: skip
    assert (tmp_path / "v/a/a.txt").read_text() == "a"
    assert "click" not in modules
