"""Owns: man pages (man/*.1) and shell completions (completions/) generated from the click tree.

Run `python -m ocivendir.commands._docgen [OUT_DIR]`; tests regenerate into a temporary directory and compare, so the
committed copies never drift from `--help`.
"""

from __future__ import annotations

import inspect
import sys
from collections.abc import Iterator
from pathlib import Path

import click

from ocivendir import __version__
from ocivendir.commands.root import cli

__all__ = ["generate", "main"]

EXIT_STATUS = (
    ("0", "success"),
    ("1", "a failure learned from a registry or fetched content (as vendir: any failure)"),
    ("2", "a problem found from the arguments and input files alone (not as vendir)"),
    ("3", "verify-relocation only: a bundle is not fully relocated"),
)
ENVIRONMENT = (
    ("OCIVENDIR_CACHE_DIR, VENDIR_CACHE_DIR", "the cache root"),
    ("OCIVENDIR_CACHE_MAX_SIZE", "the total cache budget (default 1GiB)"),
    ("OCIVENDIR_MAX_EXTRACT_SIZE", "the largest tree one image may expand to (default 4GiB)"),
    ("OCIVENDIR_RELOCATION_RECHECK", "how long a negative relocation verdict is trusted (default 1h)"),
    ("OCIVENDIR_TIMEOUT", "the total network deadline of a run (default 5m)"),
    ("OCIVENDIR_CONCURRENCY", "parallel fetches and presence checks (default 8)"),
    ("OCIVENDIR_OFFLINE", "never open a connection"),
    ("OCIVENDIR_STALE_IF_ERROR", "use a tag's last answer this old when the registry cannot be reached"),
    ("OCIVENDIR_DELEGATE_VENDIR", "a real vendir for git, hg, http, helmChart and githubRelease contents"),
    ("OCIVENDIR_INSECURE_REGISTRIES", "hosts allowed over plain HTTP (comma-separated)"),
    ("IMGPKG_REGISTRY_*, IMGPKG_USERNAME, IMGPKG_PASSWORD, IMGPKG_TOKEN, IMGPKG_ANON", "registry credentials"),
    ("DOCKER_CONFIG, HOME, REGISTRY_AUTH_FILE, XDG_RUNTIME_DIR", "where docker config files are read"),
    ("HTTP_PROXY, HTTPS_PROXY, NO_PROXY", "proxies (either case)"),
    ("SSL_CERT_FILE, SSL_CERT_DIR", "the system CA certificates"),
    ("NO_COLOR", "turn colour off"),
)


def _commands(group: click.Group, prefix: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], click.Command]]:
    for name in sorted(group.commands):
        command = group.commands[name]
        if command.hidden:
            continue
        path = (*prefix, name)
        yield path, command
        if isinstance(command, click.Group):
            yield from _commands(command, path)


def _escape(text: str) -> str:
    """Roff text in ASCII: backslashes as \\e, other characters as \\[uXXXX], no line read as a request."""
    ascii_only = "".join(c if c.isascii() else f"\\[u{ord(c):04X}]" for c in text.replace("\\", "\\e"))
    return "\n".join(("\\&" + line) if line.startswith((".", "'")) else line for line in ascii_only.splitlines())


def _description(text: str) -> list[str]:
    """Paragraphs as .PP; click's `\\b` (no-rewrap) paragraphs as .nf/.fi blocks."""
    lines: list[str] = []
    for paragraph in inspect.cleandoc(text).split("\n\n"):
        if paragraph.startswith("\b"):
            lines += [".PP", ".nf", _escape(paragraph[1:].strip("\n")), ".fi"]
        else:
            lines += [".PP", _escape(" ".join(paragraph.split()))]
    return lines


def _options(command: click.Command) -> list[tuple[str, str]]:
    rows = []
    for param in command.params:
        if not isinstance(param, click.Option) or param.hidden:
            continue
        names = ", ".join(param.opts + param.secondary_opts)
        if param.metavar:
            names += f" {param.metavar}"
        help_text = param.help or ""
        if param.envvar:
            help_text += f" (env: {param.envvar})"
        rows.append((names, help_text))
    return rows


def man_page(path: tuple[str, ...], command: click.Command) -> str:
    """A roff page for one command."""
    title = "-".join(("ocivendir", *path))
    with click.Context(cli, info_name="ocivendir") as root:
        ctx = root
        for part in path:
            ctx = click.Context(ctx.command.commands[part], parent=ctx, info_name=part)  # type: ignore[attr-defined]
        usage = command.collect_usage_pieces(ctx)
    lines = [
        f'.TH "{title.upper()}" 1 "" "ocivendir {__version__}" "ocivendir manual"',
        ".SH NAME",
        f"{title} \\- {_escape(command.get_short_help_str(limit=200))}",
        ".SH SYNOPSIS",
        f".B ocivendir {' '.join(path)}",
        _escape(" ".join(usage)),
        ".SH DESCRIPTION",
        *_description(command.help or ""),
    ]
    options = _options(command)
    if options:
        lines.append(".SH OPTIONS")
        for names, help_text in options:
            lines += [".TP", f".B {_escape(names)}", _escape(help_text)]
    lines.append(".SH EXIT STATUS")
    for code, meaning in EXIT_STATUS:
        lines += [".TP", f".B {code}", _escape(meaning)]
    lines += [".SH ENVIRONMENT", "A flag, before or after the subcommand, always wins over its variable."]
    for names, meaning in ENVIRONMENT:
        lines += [".TP", f".B {_escape(names)}", _escape(meaning)]
    lines += [".SH SEE ALSO", "ocivendir(1), vendir, imgpkg"]
    return "\n".join(lines) + "\n"


def _flags(command: click.Command) -> list[str]:
    flags = []
    for param in command.params:
        if isinstance(param, click.Option) and not param.hidden:
            flags.extend(param.opts + param.secondary_opts)
    return sorted(flags)


def bash_completion() -> str:
    """A bash completion function: subcommands, then each command's flags."""
    top = " ".join(sorted(n for n, c in cli.commands.items() if not c.hidden))
    cases = []
    for path, command in _commands(cli):
        words = " ".join(sorted(command.commands) if isinstance(command, click.Group) else _flags(command))
        cases.append(f'        "{" ".join(path)}") words="{words}" ;;')
    body = "\n".join(cases)
    return f"""# bash completion for ocivendir (generated by ocivendir.commands._docgen)
_ocivendir() {{
    local cur words path=""
    cur="${{COMP_WORDS[COMP_CWORD]}}"
    local i
    for ((i = 1; i < COMP_CWORD; i++)); do
        case "${{COMP_WORDS[i]}}" in
            -*) ;;
            *) path="${{path:+$path }}${{COMP_WORDS[i]}}" ;;
        esac
    done
    case "$path" in
        "") words="{top} {" ".join(_flags(cli))}" ;;
{body}
        *) words="" ;;
    esac
    COMPREPLY=($(compgen -W "$words" -- "$cur"))
}}
complete -o default -F _ocivendir ocivendir
complete -o default -F _ocivendir vendir
"""


def zsh_completion() -> str:
    """Zsh completion through bash's (bashcompinit)."""
    header = "#compdef ocivendir vendir\n# zsh completion for ocivendir (generated)\n"
    return header + "autoload -U +X bashcompinit && bashcompinit\n" + bash_completion()


def fish_completion() -> str:
    """Fish completions: subcommands and each command's long flags with their help."""
    lines = ["# fish completion for ocivendir (generated by ocivendir.commands._docgen)"]
    visible = sorted(n for n, c in cli.commands.items() if not c.hidden)
    top = " ".join(visible)
    for name in visible:
        help_text = cli.commands[name].get_short_help_str(limit=80).replace("'", "\\'")
        lines.append(f"complete -c ocivendir -f -n 'not __fish_seen_subcommand_from {top}' -a {name} -d '{help_text}'")
    for path, command in _commands(cli):
        for param in command.params:
            if not isinstance(param, click.Option) or param.hidden:
                continue
            for opt in param.opts + param.secondary_opts:
                if opt.startswith("--"):
                    help_text = (param.help or "").replace("'", "\\'")[:80]
                    lines.append(f"complete -c ocivendir -n '__fish_seen_subcommand_from {path[-1]}' -l {opt[2:]} "
                                 f"-d '{help_text}'")  # fmt: skip
    return "\n".join(lines) + "\n"


def generate(out: Path) -> list[Path]:
    """Write man/ and completions/ under `out`; return the files written."""
    written = []
    (out / "man").mkdir(parents=True, exist_ok=True)
    (out / "completions").mkdir(parents=True, exist_ok=True)
    pages = {"ocivendir": man_page((), cli)}
    for path, command in _commands(cli):
        pages["-".join(("ocivendir", *path))] = man_page(path, command)
    for name, text in pages.items():
        target = out / "man" / f"{name}.1"
        target.write_text(text)
        written.append(target)
    for name, text in (("ocivendir.bash", bash_completion()), ("_ocivendir", zsh_completion()),
                       ("ocivendir.fish", fish_completion())):  # fmt: skip
        target = out / "completions" / name
        target.write_text(text)
        written.append(target)
    return written


def main() -> None:
    """Regenerate into the given directory (the repository root by default)."""
    out = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).resolve().parents[3]
    generate(out)


if __name__ == "__main__":
    main()
