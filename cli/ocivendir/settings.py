"""Owns: Settings — flags over environment over defaults, read once; the only reader of os.environ and platformdirs."""

from __future__ import annotations

import math
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from ocivendir.errors import ConfigError, UsageError
from ocivendir.registry.credentials import CredentialRules, rules_from_env
from ocivendir.registry.proxy import ProxyConfig

if TYPE_CHECKING:
    from ocivendir.registry.mirrors import MirrorPlan

__all__ = [
    "DEFAULT_CACHE_MAX_SIZE",
    "DEFAULT_REGISTRY_CONCURRENCY",
    "Flags",
    "Settings",
    "load_registry_plan",
    "load_settings",
    "parse_duration",
    "parse_size",
]

DEFAULT_CACHE_MAX_SIZE = 1 << 30
DEFAULT_REGISTRY_CONCURRENCY = 4
_GO_CA_FILES = (
    "/etc/ssl/certs/ca-certificates.crt",
    "/etc/pki/tls/certs/ca-bundle.crt",
    "/etc/ssl/ca-bundle.pem",
    "/etc/pki/tls/cacert.pem",
    "/etc/pki/ca-trust/extracted/pem/tls-ca-bundle.pem",
    "/etc/ssl/cert.pem",
)
_GO_CA_DIRS = ("/etc/ssl/certs", "/etc/pki/tls/certs")
_SIZE = re.compile(r"(?i)\s*([0-9]+(?:\.[0-9]+)?)\s*([kmgtpe]?)(i?)(b?)\s*")
_DURATION_PART = re.compile(r"([0-9]+(?:\.[0-9]*)?|\.[0-9]+)(ns|us|µs|ms|s|m|h|d)")
_DURATION_UNITS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1, "m": 60, "h": 3600, "d": 86400}
_POWERS = {"": 0, "k": 1, "m": 2, "g": 3, "t": 4, "p": 5, "e": 6}


def parse_size(text: str, what: str) -> int:
    """A byte count: plain, Kubernetes quantity (`1Mi`, `500M`) or IEC/SI with B (`2GiB`); rounded up."""
    match = _SIZE.fullmatch(text)
    if not match:
        raise UsageError(f"invalid size '{text}' for {what}: use e.g. 1GiB, 512MB, 1Gi or a byte count")
    number, prefix, binary, _ = match.groups()
    base = 1024 if binary else 1000
    if binary and not prefix:
        raise UsageError(f"invalid size '{text}' for {what}")
    scaled: float = float(number) * base ** _POWERS[prefix.lower()]
    return math.ceil(scaled)


def parse_duration(text: str, what: str) -> float:
    """Seconds from Go's duration syntax plus `d` (`90s`, `1h30m`, `7d`); `0` is zero."""
    cleaned = text.strip()
    if cleaned in {"0", "+0", "-0"}:
        return 0.0
    position, total = 0, 0.0
    for match in _DURATION_PART.finditer(cleaned):
        if match.start() != position:
            break
        total += float(match.group(1)) * _DURATION_UNITS[match.group(2)]
        position = match.end()
    if position != len(cleaned) or not cleaned:
        raise UsageError(f"invalid duration '{text}' for {what}: use e.g. 90s, 10m, 1h30m or 7d")
    return total


@dataclass(frozen=True, kw_only=True)
class Flags:
    """Global flags as given on the command line (None = not given)."""

    cache_dir: str | None = None
    no_cache: bool = False
    cache_max_size: str | None = None
    relocation_recheck: str | None = None
    timeout: str | None = None
    concurrency: int | None = None
    offline: bool | None = None
    stale_if_error: str | None = None
    registry_config: str | None = None
    registry_concurrency: int | None = None
    json: bool = False
    quiet: bool = False
    debug: bool = False
    tty: bool = False
    color: bool | None = None


@dataclass(frozen=True, kw_only=True)
class Settings:
    """Everything the commands need from flags and the environment, read once."""

    cache_dir: Path | None
    cache_dir_explicit: bool
    cache_max_size: int
    relocation_recheck: float
    timeout: float
    concurrency: int
    offline: bool
    stale_if_error: float | None
    json: bool
    quiet: bool
    debug: bool
    tty: bool
    color: bool
    umask: int
    proxy: ProxyConfig
    credentials: CredentialRules
    docker_configs: tuple[Path, ...]
    system_ca_file: Path | None
    system_ca_dirs: tuple[Path, ...]
    insecure_registries: frozenset[str] = field(default_factory=frozenset)
    registry_config: Path | None = None
    registry_concurrency: int = DEFAULT_REGISTRY_CONCURRENCY


def _env(environ: Mapping[str, str], *names: str) -> str | None:
    for name in names:
        value = environ.get(name)
        if value:
            return value
    return None


def _read_umask() -> int:
    current = os.umask(0o022)
    os.umask(current)
    return current


def _cache_dir(flags: Flags, environ: Mapping[str, str]) -> tuple[Path | None, bool]:
    if flags.no_cache:
        return None, False
    given = flags.cache_dir or _env(environ, "OCIVENDIR_CACHE_DIR", "VENDIR_CACHE_DIR")
    if given:
        return Path(given).expanduser().absolute(), True
    import platformdirs  # noqa: PLC0415 - only when no directory is named

    return Path(platformdirs.user_cache_dir("ocivendir")), False


def _docker_configs(environ: Mapping[str, str]) -> tuple[Path, ...]:
    paths = []
    if environ.get("DOCKER_CONFIG"):
        paths.append(Path(environ["DOCKER_CONFIG"]) / "config.json")
    elif environ.get("HOME"):
        paths.append(Path(environ["HOME"]) / ".docker" / "config.json")
    if environ.get("XDG_RUNTIME_DIR"):
        paths.append(Path(environ["XDG_RUNTIME_DIR"]) / "containers" / "auth.json")
    return tuple(paths)


def _system_cas(environ: Mapping[str, str]) -> tuple[Path | None, tuple[Path, ...]]:
    ca_file = environ.get("SSL_CERT_FILE")
    chosen = Path(ca_file) if ca_file else next((Path(p) for p in _GO_CA_FILES if Path(p).is_file()), None)
    dirs_text = environ.get("SSL_CERT_DIR")
    dirs = tuple(Path(d) for d in dirs_text.split(":") if d) if dirs_text else tuple(Path(d) for d in _GO_CA_DIRS)
    return chosen, tuple(d for d in dirs if d.is_dir())


def _proxy(environ: Mapping[str, str]) -> ProxyConfig:
    def pick(name: str) -> str:
        return environ.get(name.upper()) or environ.get(name.lower()) or ""

    return ProxyConfig(http_proxy=pick("http_proxy"), https_proxy=pick("https_proxy"), no_proxy=pick("no_proxy"))


def _count(given: int | None, flag: str, environ: Mapping[str, str], variable: str, default: int) -> int:
    if given is not None:
        value, what = str(given), flag
    else:
        value, what = _env(environ, variable) or str(default), variable
    if not value.isdigit() or not 1 <= int(value) <= 64:  # noqa: PLR2004 - a sane pool bound
        raise UsageError(f"invalid value '{value}' for {what}: expected a whole number from 1 to 64")
    return int(value)


def _registry_config(flags: Flags, environ: Mapping[str, str]) -> Path | None:
    given = flags.registry_config or _env(environ, "OCIVENDIR_REGISTRY_CONFIG")
    return Path(given).expanduser().absolute() if given else None


def load_registry_plan(settings: Settings) -> tuple[MirrorPlan, list[str]]:
    """registries.yaml: `--registry-config`, else OCIVENDIR_REGISTRY_CONFIG, else `<user config dir>/registries.yaml`.

    Read only when a registry is about to be asked (a warm cached run never reads it). A file named by the flag or
    variable must exist; the default one is optional. Returns the plan and its warnings (unknown keys).
    """
    from ocivendir.registry.mirrors import MirrorPlan, parse_registries  # noqa: PLC0415 - not on the warm path

    path = settings.registry_config
    if path is None:
        import platformdirs  # noqa: PLC0415 - only when the network is needed

        path = Path(platformdirs.user_config_dir("ocivendir")) / "registries.yaml"
        if not path.is_file():
            return MirrorPlan(), []
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) else "not UTF-8 text"
        raise ConfigError(f"Reading registry config '{path}': {reason}") from None
    return parse_registries(text, str(path))


def _truthy(value: str | None, what: str) -> bool:
    if value is None:
        return False
    lowered = value.lower()
    if lowered in {"1", "true", "yes", "on"}:
        return True
    if lowered in {"0", "false", "no", "off"}:
        return False
    raise UsageError(f"invalid value '{value}' for {what}: expected true or false")


def load_settings(flags: Flags, environ: Mapping[str, str] | None = None) -> Settings:
    """Build Settings from flags and the environment (os.environ unless given)."""
    env = dict(os.environ if environ is None else environ)
    cache_dir, explicit = _cache_dir(flags, env)
    size_text = flags.cache_max_size or _env(env, "OCIVENDIR_CACHE_MAX_SIZE")
    recheck = flags.relocation_recheck or _env(env, "OCIVENDIR_RELOCATION_RECHECK") or "1h"
    timeout = flags.timeout or _env(env, "OCIVENDIR_TIMEOUT") or "5m"
    stale = flags.stale_if_error or _env(env, "OCIVENDIR_STALE_IF_ERROR")
    offline = (
        flags.offline if flags.offline is not None else _truthy(_env(env, "OCIVENDIR_OFFLINE"), "OCIVENDIR_OFFLINE")
    )
    ca_file, ca_dirs = _system_cas(env)
    insecure = _env(env, "OCIVENDIR_INSECURE_REGISTRIES") or ""
    return Settings(
        cache_dir=cache_dir,
        cache_dir_explicit=explicit,
        cache_max_size=parse_size(size_text, "--cache-max-size") if size_text else DEFAULT_CACHE_MAX_SIZE,
        relocation_recheck=parse_duration(recheck, "--relocation-recheck"),
        timeout=parse_duration(timeout, "--timeout") or 300.0,
        concurrency=_count(flags.concurrency, "--concurrency", env, "OCIVENDIR_CONCURRENCY", 8),
        offline=offline,
        stale_if_error=parse_duration(stale, "--stale-if-error") if stale else None,
        json=flags.json,
        quiet=flags.quiet,
        debug=flags.debug,
        tty=flags.tty,
        color=flags.color if flags.color is not None else not env.get("NO_COLOR"),
        umask=_read_umask(),
        proxy=_proxy(env),
        credentials=rules_from_env(env),
        docker_configs=_docker_configs(env),
        system_ca_file=ca_file,
        system_ca_dirs=ca_dirs,
        insecure_registries=frozenset(h.strip() for h in insecure.split(",") if h.strip()),
        registry_config=_registry_config(flags, env),
        registry_concurrency=_count(
            flags.registry_concurrency,
            "--registry-concurrency",
            env,
            "OCIVENDIR_REGISTRY_CONCURRENCY",
            DEFAULT_REGISTRY_CONCURRENCY,
        ),
    )
