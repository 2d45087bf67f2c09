"""A flag always wins over the environment, before or after the subcommand, for every option that has a variable.

The options are read from the click tree (the root group's, which every registry-facing command shares, plus each
command's own that name a variable), so an option added later is covered, or fails here until it has a sample value.
"""

from __future__ import annotations

from dataclasses import fields
from pathlib import Path
from typing import Any

import click
import pytest

from ocivendir.commands import cli
from ocivendir.settings import OPTION_ENV
from tests.conftest import run_cli

DIGEST = "sha256:" + "ab" * 32
# a subcommand line that reaches Run.start (where the settings are read) in each program mode
COMMANDS = {"ocivendir": ["pull", "-b", f"registry.example.com/team/app@{DIGEST}", "-o", "out"], "vendir": ["sync"]}
# by metavar (or type): a value for the flag and a different one for the variable
SAMPLES = {
    "DIR": ("/flag/dir", "/env/dir"),
    "SIZE": ("2MiB", "3MiB"),
    "DURATION": ("2h", "3h"),
    "N": ("3", "5"),
    "HOST": ("flag.example", "env.example"),
    "FILE": ("/flag/file", "/env/file"),
    "PATH": ("/flag/vendir", "/env/vendir"),
    "TEXT": ("flag-value", "env-value"),
    "INTEGER": ("3", None),
    "BOOLEAN": ("false", None),
}


class _Stop(Exception):
    pass


def _options(command: click.Command) -> list[click.Option]:
    return [p for p in command.params if isinstance(p, click.Option) and not p.hidden and p.name != "version"]


def _root_options() -> list[click.Option]:
    return _options(cli)


def _command_only_options() -> list[tuple[str, click.Option]]:
    root = {p.name for p in _root_options()}
    found = []
    for name, command in sorted(cli.commands.items()):  # type: ignore[attr-defined]
        found += [(name, p) for p in _options(command) if p.name in OPTION_ENV and p.name not in root]
    return found


def _switch_with_variable(option: click.Option) -> bool:
    return bool(option.is_flag and option.name in OPTION_ENV)


def _flag_args(option: click.Option) -> list[str]:
    """Arguments giving the option a value that differs from what its variable (at `_env_value`) would give."""
    if _switch_with_variable(option):
        # the variable turns the switch away from its default; the flag turns it back (Go's `--x=false` included)
        return [option.opts[0]] if option.name == "color" else [f"{option.opts[0]}=false"]
    if option.is_flag:
        return [option.opts[0]]
    metavar = option.metavar or option.type.name.upper()
    return [option.opts[0], SAMPLES[metavar][0]]


def _env_value(option: click.Option) -> str | None:
    if option.name == "color":
        return "1"  # NO_COLOR
    if option.is_flag:
        return "true"
    return SAMPLES[option.metavar or option.type.name.upper()][1]


@pytest.fixture
def observe(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Any:
    """Run a command line with an environment; return the settings and command flags it would run with."""
    from ocivendir.commands import runtime  # noqa: PLC0415

    real = runtime.settings_from
    seen: list[dict[str, Any]] = []

    def capture(given: dict[str, Any]) -> Any:
        settings, values = real(given)
        seen.append(
            {
                **{f.name: getattr(settings, f.name) for f in fields(settings)},
                **{f"flag:{k}": v for k, v in values.items()},
            }
        )
        raise _Stop

    monkeypatch.setattr(runtime, "settings_from", capture)
    monkeypatch.chdir(tmp_path)

    def run(prog: str, before: list[str], after: list[str], env: dict[str, str]) -> dict[str, Any]:
        for name in {n for names in OPTION_ENV.values() for n in names}:
            monkeypatch.delenv(name, raising=False)
        for name, value in env.items():
            monkeypatch.setenv(name, value)
        seen.clear()
        subcommand = COMMANDS[prog]
        result = run_cli(*before, subcommand[0], *after, *subcommand[1:], prog=prog)
        assert seen, result.stderr
        return seen[0]

    return run


def _settled(observed: dict[str, Any]) -> dict[str, Any]:
    """What the run uses: the settings, plus the command flags that settings do not hold."""
    return {k: v for k, v in observed.items() if not k.startswith("flag:") or k[5:] not in OPTION_ENV}


@pytest.mark.parametrize("prog", ["ocivendir", "vendir"])
@pytest.mark.parametrize("option", _root_options(), ids=lambda o: o.opts[0])
def test_a_global_flag_means_the_same_before_and_after_the_subcommand_and_beats_its_variable(
    observe: Any,
    option: click.Option,
    prog: str,
) -> None:
    env_value = _env_value(option)
    flag = _flag_args(option)
    base = {"IMGPKG_USERNAME": "u"} if option.name == "registry_password" else {}  # a password alone is no credential
    plain = _settled(observe(prog, [], [], base))
    given = _settled(observe(prog, [], flag, base))
    if not _switch_with_variable(option):
        assert given != plain, f"{flag} changes nothing"
    assert _settled(observe(prog, flag, [], base)) == given
    for name in OPTION_ENV.get(option.name or "", ()):
        assert env_value is not None
        from_env = _settled(observe(prog, [], [], {**base, name: env_value}))
        assert from_env != plain, f"{name}={env_value} changes nothing"
        assert from_env != given, f"{name}={env_value} gives what {flag} gives"
        assert _settled(observe(prog, flag, [], {**base, name: env_value})) == given, f"{flag} before the subcommand"
        assert _settled(observe(prog, [], flag, {**base, name: env_value})) == given, f"{flag} after the subcommand"


@pytest.mark.parametrize(("command", "option"), _command_only_options(), ids=lambda x: getattr(x, "opts", [x])[0])
def test_a_command_flag_beats_its_variable(observe: Any, command: str, option: click.Option) -> None:
    prog = "vendir" if command == "sync" else "ocivendir"
    env_value = _env_value(option)
    flag = _flag_args(option)
    given = _settled(observe(prog, [], flag, {}))
    for name in OPTION_ENV[option.name or ""]:
        assert _settled(observe(prog, [], [], {name: str(env_value)})) != given
        assert _settled(observe(prog, [], flag, {name: str(env_value)})) == given


def test_every_variable_in_the_table_belongs_to_an_option() -> None:
    names = {p.name for p in _root_options()} | {p.name for _, p in _command_only_options()}
    assert set(OPTION_ENV) <= names


# every persistent flag of imgpkg's root command (ui_flags.go, debug_flags.go) and vendir's (ui_flags.go), with a value
UPSTREAM_ROOT_FLAGS = ["--tty", "--color=false", "--json", "-y", "--yes", "--column", "name", "--debug"]


def _leaf_commands(group: click.Group = cli, prefix: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    found: list[tuple[str, ...]] = []
    for name, command in sorted(group.commands.items()):
        if command.hidden:
            continue
        if isinstance(command, click.Group):
            found += _leaf_commands(command, (*prefix, name))
        else:
            found.append((*prefix, name))
    return found


@pytest.mark.parametrize("prog", ["ocivendir", "vendir"])
@pytest.mark.parametrize("path", _leaf_commands(), ids=" ".join)
def test_imgpkgs_and_vendirs_root_flags_are_accepted_by_every_command_before_and_after_it(
    path: tuple[str, ...], prog: str
) -> None:
    after = run_cli(*path, *UPSTREAM_ROOT_FLAGS, "--help", prog=prog)
    assert after.exit_code == 0, after.stderr
    before = run_cli(*UPSTREAM_ROOT_FLAGS, *path, "--help", prog=prog)
    assert before.exit_code == 0, before.stderr
