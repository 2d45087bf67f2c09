"""Owns: the global flags (defined once, accepted before and after the subcommand) and imgpkg's registry flags.

Click only collects what is on the command line. The environment variables named in `--help` come from
`settings.OPTION_ENV` and are read by `settings.choose`, the one precedence rule for every option: a flag, wherever it
stands, wins over the environment.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import click
from click.core import ParameterSource

from ocivendir.settings import OPTION_ENV

__all__ = ["delegate_option", "flag_values", "global_options", "registry_options"]

_F = TypeVar("_F", bound=Callable[..., Any])
_META = "ocivendir.flags"


class _CommandLineOption(click.Option):
    """An option whose variable is shown in help, but read by settings.choose, never by click."""

    def resolve_envvar_value(self, ctx: click.Context) -> str | None:  # noqa: ARG002 - click's signature
        """Click never reads the environment for these options."""
        return None


def _store(ctx: click.Context, param: click.Parameter, value: object) -> object:
    """Keep values given on the command line in ctx.meta, shared by the root group and the subcommand (later wins)."""
    if param.name and ctx.get_parameter_source(param.name) is ParameterSource.COMMANDLINE:
        ctx.meta.setdefault(_META, {})[param.name] = value
    return value


def flag_values(ctx: click.Context) -> dict[str, Any]:
    """The flags given anywhere on the command line (nothing from the environment)."""
    values: dict[str, Any] = ctx.meta.get(_META, {})
    return values


def _opt(*names: str, **kwargs: Any) -> Callable[[_F], _F]:  # noqa: ANN401 - click's option kwargs
    """A flag collected into ctx.meta, showing the variable settings.OPTION_ENV gives its parameter name."""
    declared = [n for n in names if n.isidentifier()]
    name = declared[0] if declared else max(names, key=len).split("/")[0].lstrip("-").replace("-", "_")
    env = OPTION_ENV.get(name, ())
    if env and not kwargs.pop("env_in_help", False):
        kwargs.update(envvar=env[0], show_envvar=True)
    return click.option(*names, cls=_CommandLineOption, expose_value=False, callback=_store, **kwargs)


_GLOBAL = (
    _opt("--cache-dir", metavar="DIR", help="Cache root (then VENDIR_CACHE_DIR, then the user cache dir)."),
    _opt("--no-cache", is_flag=True, default=None, help="Do not read or write the cache."),
    _opt("--cache-max-size", metavar="SIZE", help="Total cache budget, e.g. 1GiB (default), 500Mi."),
    _opt("--max-extract-size", metavar="SIZE", help="Most one image may expand to, e.g. 4GiB (default), 512Mi."),
    _opt("--relocation-recheck", metavar="DURATION",
         help="Trust a negative relocation verdict this long (default 1h; 0 = every use)."),
    _opt("--timeout", metavar="DURATION",
         help="Total network deadline of the run, every read and redirect (default 5m)."),
    _opt("--concurrency", metavar="N", type=int,
         help="Parallel fetches and presence checks (default 8; 1 = sequential)."),
    _opt("--offline/--no-offline", "offline", default=None,
         help="Never open a connection; serve from the cache or fail."),
    _opt("--stale-if-error", metavar="DURATION",
         help="Use a tag's last answer up to this old when the registry cannot be reached."),
    _opt("--registry-config", metavar="FILE",
         help="registries.yaml: mirrors, per-host auth and TLS (default: ~/.config/ocivendir/registries.yaml)."),
    _opt("--registry-concurrency", metavar="N", type=int,
         help="Concurrent requests per registry endpoint (default 4; registries.yaml may set it per host)."),
    _opt("--policy", metavar="PATH",
         help="Signature policies (ClusterImagePolicy YAML, a file or a directory): verify before extracting."),
    _opt("--trusted-root", metavar="PATH",
         help="Sigstore trusted_root.json for keyless policies (Fulcio CAs, Rekor and CT log keys); nothing fetched."),
    _opt("--json", "json_output", is_flag=True, default=None, help="Print one JSON envelope on stdout."),
    _opt("-q", "--quiet", is_flag=True, default=None, help="No progress output (warnings and errors still)."),
    _opt("-v", "--verbose", is_flag=True, default=None,
         help="Say on stderr which endpoint (a registries.yaml mirror or the origin) served each object."),
    _opt("--debug", is_flag=True, default=None, help="Debug logs and tracebacks on stderr."),
    _opt("--tty", is_flag=True, default=None, help="Print progress lines even in vendir mode."),
    _opt("--color/--no-color", "color", default=None, env_in_help=True,
         help="Colour on a terminal (NO_COLOR turns it off)."),
    # imgpkg's and vendir's other root flags (ui_flags.go): accepted on every command, as they are, with no effect
    _opt("-y", "--yes", is_flag=True, default=None, hidden=True, help="Accepted for compatibility; no effect."),
    _opt("--column", multiple=True, hidden=True, help="Accepted for compatibility; no effect."),
)  # fmt: skip

_REGISTRY = (
    _opt("--registry-ca-cert-path", "ca_cert_paths", metavar="FILE", multiple=True,
         help="Add CA certificates (PEM) to the system set (repeatable)."),
    _opt("--registry-verify-certs", "verify_certs", type=bool, default=None,
         help="Set to false to skip certificate verification for every registry."),
    _opt("--registry-insecure", "insecure_all", is_flag=True, default=None,
         help="Allow plain HTTP for every registry of this run."),
    _opt("--insecure-registry", "insecure_hosts", metavar="HOST", multiple=True, env_in_help=True,
         help="Allow plain HTTP for this registry host (repeatable; env OCIVENDIR_INSECURE_REGISTRIES)."),
    _opt("--registry-username", "registry_username", help="Username for every registry."),
    _opt("--registry-password", "registry_password", help="Password for every registry."),
    _opt("--registry-token", "registry_token", help="Bearer token for every registry."),
    _opt("--registry-anon/--no-registry-anon", "registry_anon", default=None, help="Use anonymous access."),
    _opt("--registry-response-header-timeout", "response_header_timeout", metavar="DURATION",
         help="Wait at most this long for the whole response head (default 30s)."),
    _opt("--registry-retry-count", "retry_count", type=int, help="Attempts per request (default 5)."),
)  # fmt: skip

_DELEGATE = (
    _opt("--delegate-vendir", metavar="PATH",
         help="A real vendir binary for git, hg, http, helmChart and githubRelease contents."),
)  # fmt: skip


def _apply(decorators: tuple[Callable[[_F], _F], ...], func: _F) -> _F:
    for decorator in reversed(decorators):
        func = decorator(func)
    return func


def global_options(func: _F) -> _F:
    """Add the global flags to a command or group."""
    return _apply(_GLOBAL, func)


def registry_options(func: _F) -> _F:
    """Add imgpkg's registry flags (the root group and the commands that reach registries)."""
    return _apply(_REGISTRY, func)


def delegate_option(func: _F) -> _F:
    """Add `--delegate-vendir` (sync)."""
    return _apply(_DELEGATE, func)
