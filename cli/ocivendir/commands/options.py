"""Owns: the global flags (defined once, accepted before and after the subcommand) and imgpkg's registry flags."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import click
from click.core import ParameterSource

__all__ = ["flag_values", "global_options", "registry_options"]

_F = TypeVar("_F", bound=Callable[..., Any])
_META = "ocivendir.flags"


def _store(ctx: click.Context, param: click.Parameter, value: object) -> object:
    """Keep explicitly given values in ctx.meta, shared by the root group and the subcommand."""
    if param.name and ctx.get_parameter_source(param.name) is not ParameterSource.DEFAULT:
        ctx.meta.setdefault(_META, {})[param.name] = value
    return value


def flag_values(ctx: click.Context) -> dict[str, Any]:
    """The global flags given anywhere on the command line."""
    values: dict[str, Any] = ctx.meta.get(_META, {})
    return values


def _opt(*names: str, **kwargs: Any) -> Callable[[_F], _F]:  # noqa: ANN401 - click's option kwargs
    return click.option(*names, expose_value=False, callback=_store, **kwargs)


_GLOBAL = (
    _opt("--cache-dir", metavar="DIR", envvar="OCIVENDIR_CACHE_DIR", show_envvar=True,
         help="Cache root (then VENDIR_CACHE_DIR, then the user cache dir)."),
    _opt("--no-cache", is_flag=True, default=None, help="Do not read or write the cache."),
    _opt("--cache-max-size", metavar="SIZE", envvar="OCIVENDIR_CACHE_MAX_SIZE", show_envvar=True,
         help="Total cache budget, e.g. 1GiB (default), 500Mi."),
    _opt("--relocation-recheck", metavar="DURATION", envvar="OCIVENDIR_RELOCATION_RECHECK", show_envvar=True,
         help="Trust a negative relocation verdict this long (default 1h; 0 = every use)."),
    _opt("--timeout", metavar="DURATION", envvar="OCIVENDIR_TIMEOUT", show_envvar=True,
         help="Total network deadline of the run (default 5m)."),
    _opt("--concurrency", metavar="N", type=int, envvar="OCIVENDIR_CONCURRENCY", show_envvar=True,
         help="Parallel fetches and presence checks (default 8; 1 = sequential)."),
    _opt("--offline", is_flag=True, default=None, envvar="OCIVENDIR_OFFLINE", show_envvar=True,
         help="Never open a connection; serve from the cache or fail."),
    _opt("--stale-if-error", metavar="DURATION", envvar="OCIVENDIR_STALE_IF_ERROR", show_envvar=True,
         help="Use a tag's last answer up to this old when the registry cannot be reached."),
    _opt("--registry-config", metavar="FILE", envvar="OCIVENDIR_REGISTRY_CONFIG", show_envvar=True,
         help="registries.yaml: mirrors, per-host auth and TLS (default: ~/.config/ocivendir/registries.yaml)."),
    _opt("--registry-concurrency", metavar="N", type=int, envvar="OCIVENDIR_REGISTRY_CONCURRENCY", show_envvar=True,
         help="Concurrent requests per registry endpoint (default 4; registries.yaml may set it per host)."),
    _opt("--json", "json_output", is_flag=True, default=None, help="Print one JSON envelope on stdout."),
    _opt("-q", "--quiet", is_flag=True, default=None, help="No progress output (warnings and errors still)."),
    _opt("--debug", is_flag=True, default=None, help="Debug logs and tracebacks on stderr."),
    _opt("--tty", is_flag=True, default=None, help="Print progress lines even in vendir mode."),
    _opt("--color/--no-color", "color", default=None, help="Colour on a terminal (NO_COLOR turns it off)."),
)  # fmt: skip

_REGISTRY = (
    _opt("--registry-ca-cert-path", "ca_cert_paths", metavar="FILE", multiple=True,
         help="Add CA certificates (PEM) to the system set (repeatable)."),
    _opt("--registry-verify-certs", "verify_certs", type=bool, default=None,
         help="Set to false to skip certificate verification for every registry."),
    _opt("--registry-insecure", "insecure_all", is_flag=True, default=None,
         help="Allow plain HTTP for every registry of this run."),
    _opt("--insecure-registry", "insecure_hosts", metavar="HOST", multiple=True,
         help="Allow plain HTTP for this registry host (repeatable; env OCIVENDIR_INSECURE_REGISTRIES)."),
    _opt("--registry-username", "registry_username", envvar="IMGPKG_USERNAME", show_envvar=True,
         help="Username for every registry."),
    _opt("--registry-password", "registry_password", envvar="IMGPKG_PASSWORD", show_envvar=True,
         help="Password for every registry."),
    _opt("--registry-token", "registry_token", envvar="IMGPKG_TOKEN", show_envvar=True,
         help="Bearer token for every registry."),
    _opt("--registry-anon", "registry_anon", is_flag=True, default=None, help="Use anonymous access."),
    _opt("--registry-response-header-timeout", "response_header_timeout", metavar="DURATION",
         help="Wait this long for response headers (default 30s)."),
    _opt("--registry-retry-count", "retry_count", type=int, help="Attempts per request (default 5)."),
)  # fmt: skip


def _apply(decorators: tuple[Callable[[_F], _F], ...], func: _F) -> _F:
    for decorator in reversed(decorators):
        func = decorator(func)
    return func


def global_options(func: _F) -> _F:
    """Add the global flags to a command or group."""
    return _apply(_GLOBAL, func)


def registry_options(func: _F) -> _F:
    """Add imgpkg's registry flags (pull, verify-relocation)."""
    return _apply(_REGISTRY, func)
