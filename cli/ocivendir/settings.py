"""Owns: Settings — flags over environment over defaults, read once; the only reader of os.environ and platformdirs."""

from __future__ import annotations

import os
import re
import sys
from collections import OrderedDict
from dataclasses import dataclass, field, replace
from types import MappingProxyType

from ocivendir.errors import ConfigError, UsageError
from ocivendir.fs.limits import DEFAULT_MAX_EXTRACT_SIZE
from ocivendir.fs.paths import absolute, pure
from ocivendir.kept import through
from ocivendir.registry.credentials import CredentialRules, every_registry, rules_from_env

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping

    from ocivendir.registry.mirrors import MirrorPlan
    from ocivendir.registry.proxy import ProxyConfig
    from ocivendir.sign.policy import PolicySet
    from ocivendir.sign.source import PolicySource

__all__ = [
    "DEFAULT_CACHE_MAX_SIZE",
    "DEFAULT_MAX_EXTRACT_SIZE",
    "DEFAULT_REGISTRY_CONCURRENCY",
    "OPTION_ENV",
    "Flags",
    "Settings",
    "choose",
    "load_policies",
    "load_registry_plan",
    "load_server_max_calls",
    "load_server_settings",
    "load_settings",
    "parse_duration",
    "parse_size",
    "user_dir",
]

DEFAULT_CACHE_MAX_SIZE = 1 << 30
DEFAULT_REGISTRY_CONCURRENCY = 4
# Each option's environment variables (the first one set counts), by the option's parameter name. A flag given on the
# command line, before or after the subcommand, always wins over them (`choose`); the CLI's parsers only collect what
# is on the command line and never read the environment themselves.
OPTION_ENV: Mapping[str, tuple[str, ...]] = MappingProxyType({
    "cache_dir": ("OCIVENDIR_CACHE_DIR", "VENDIR_CACHE_DIR"),
    "cache_max_size": ("OCIVENDIR_CACHE_MAX_SIZE",),
    "max_extract_size": ("OCIVENDIR_MAX_EXTRACT_SIZE",),
    "relocation_recheck": ("OCIVENDIR_RELOCATION_RECHECK",),
    "timeout": ("OCIVENDIR_TIMEOUT",),
    "concurrency": ("OCIVENDIR_CONCURRENCY",),
    "offline": ("OCIVENDIR_OFFLINE",),
    "stale_if_error": ("OCIVENDIR_STALE_IF_ERROR",),
    "registry_config": ("OCIVENDIR_REGISTRY_CONFIG",),
    "registry_concurrency": ("OCIVENDIR_REGISTRY_CONCURRENCY",),
    "policy": ("OCIVENDIR_POLICY",),
    "trusted_root": ("OCIVENDIR_TRUSTED_ROOT",),
    "color": ("NO_COLOR",),
    "delegate_vendir": ("OCIVENDIR_DELEGATE_VENDIR",),
    "insecure_hosts": ("OCIVENDIR_INSECURE_REGISTRIES",),
    "registry_username": ("IMGPKG_USERNAME",),
    "registry_password": ("IMGPKG_PASSWORD",),
    "registry_token": ("IMGPKG_TOKEN",),
    "registry_anon": ("IMGPKG_ANON",),
})  # fmt: skip
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
    return -int(-scaled // 1)  # math.ceil (math is a shared library to load; scaled is finite)


def parse_duration(text: str, what: str) -> float:
    """Seconds from Go's duration syntax plus `d` (`90s`, `1h30m`, `7d`); `0` is zero."""
    cleaned = text.strip()
    if cleaned in {"0", "+0", "-0"}:
        return 0.0
    position, total = 0, 0.0
    for part in _DURATION_PART.finditer(cleaned):
        if part.start() != position:
            break
        total += float(part[1]) * _DURATION_UNITS[part[2]]
        position = part.end()
    if position != len(cleaned) or not cleaned:
        raise UsageError(f"invalid duration '{text}' for {what}: use e.g. 90s, 10m, 1h30m or 7d")
    return total


@dataclass(frozen=True, kw_only=True)
class Flags:
    """Global flags as given on the command line (None = not given)."""

    cache_dir: str | None = None
    no_cache: bool = False
    cache_max_size: str | None = None
    max_extract_size: str | None = None
    relocation_recheck: str | None = None
    timeout: str | None = None
    concurrency: int | None = None
    offline: bool | None = None
    stale_if_error: str | None = None
    registry_config: str | None = None
    registry_concurrency: int | None = None
    json: bool = False
    quiet: bool = False
    verbose: bool = False
    debug: bool = False
    tty: bool = False
    color: bool | None = None
    delegate_vendir: str | None = None
    insecure_hosts: tuple[str, ...] = ()
    registry_username: str | None = None
    registry_password: str | None = field(default=None, repr=False)
    registry_token: str | None = field(default=None, repr=False)
    registry_anon: bool | None = None
    policy: str | None = None
    trusted_root: str | None = None


@dataclass(frozen=True, kw_only=True)
class Settings:
    """Everything the commands need from flags and the environment, read once."""

    cache_dir: str | None
    cache_dir_explicit: bool
    cache_max_size: int
    relocation_recheck: float
    max_extract_size: int
    timeout: float
    concurrency: int
    offline: bool
    stale_if_error: float | None
    json: bool
    quiet: bool
    verbose: bool
    debug: bool
    tty: bool
    color: bool
    umask: int
    proxy_vars: tuple[str, str, str]  # HTTP_PROXY, HTTPS_PROXY, NO_PROXY (upper case first)
    credentials: CredentialRules
    docker_configs: tuple[str, ...]
    registry_auth_file: str | None = None  # REGISTRY_AUTH_FILE: read only where the docker config file is absent
    ssl_cert_file: str | None  # SSL_CERT_FILE; registry/truststore.py applies Go's defaults when unset
    ssl_cert_dir: str | None  # SSL_CERT_DIR (colon-separated)
    insecure_registries: frozenset[str] = field(default_factory=frozenset)
    registry_config: str | None = None
    registry_concurrency: int = DEFAULT_REGISTRY_CONCURRENCY
    delegate_vendir: str | None = None
    home: str | None = None  # HOME, as Go's os.UserHomeDir reads it: `pull -o` never replaces it
    policy: str | None = None  # --policy / OCIVENDIR_POLICY: a file or directory of ClusterImagePolicy documents
    trusted_root: str | None = None  # --trusted-root / OCIVENDIR_TRUSTED_ROOT: Sigstore's trusted_root.json

    @property
    def proxy(self) -> ProxyConfig:
        """The proxy choice for connections (its module loads only when a connection is made)."""
        from ocivendir.registry.proxy import ProxyConfig  # noqa: PLC0415

        http_proxy, https_proxy, no_proxy = self.proxy_vars
        return ProxyConfig(http_proxy=http_proxy, https_proxy=https_proxy, no_proxy=no_proxy)


def _env(environ: Mapping[str, str], *names: str) -> str | None:
    for name in names:
        value = environ.get(name)
        if value:
            return value
    return None


def choose(name: str, given: object, environ: Mapping[str, str]) -> object:
    """The precedence rule, the same for every option: command line, then environment, then the default (None).

    A value given on the command line, before or after the subcommand, wins; else the option's first set environment
    variable (an empty one counts as unset); else None, and the caller applies the default.
    """
    if given is not None and given != ():
        return given
    return _env(environ, *OPTION_ENV.get(name, ()))


def _text(name: str, given: object, environ: Mapping[str, str]) -> str | None:
    chosen = choose(name, given, environ)
    return None if chosen is None else str(chosen)


def _read_umask() -> int:
    current = os.umask(0o022)
    os.umask(current)
    return current


def _cache_dir(flags: Flags, environ: Mapping[str, str]) -> tuple[str | None, bool]:
    if flags.no_cache:
        return None, False
    given = _text("cache_dir", flags.cache_dir, environ)
    if given:
        return absolute(os.path.expanduser(given)), True
    base = user_dir("cache", os.environ)  # None: no HOME and no passwd entry (an arbitrary UID), the no-cache fallback
    return (pure(os.path.join(base, "ocivendir")), False) if base else (None, False)


def user_dir(kind: str, environ: Mapping[str, str]) -> str | None:
    """The user's `cache` or `config` base directory (platformdirs' answer); None when the user has no home.

    On Linux that is the XDG rule, spelled out here because "no home" must be an answer (None: an arbitrary UID with
    no `$HOME` and no passwd entry runs without a cache) rather than a path: `$XDG_<KIND>_HOME` when absolute, else
    `<home>/.<kind>`, the home being `$HOME` when absolute, else the passwd entry's.
    """
    if sys.platform != "linux":
        import platformdirs  # noqa: PLC0415 - macOS and others: their own rules

        try:
            return str(getattr(platformdirs, f"user_{kind}_dir")())
        except (RuntimeError, KeyError):
            return None
    given = environ.get(f"XDG_{kind.upper()}_HOME", "")
    if given.startswith("/"):
        return given
    home = environ.get("HOME", "")
    if not home.startswith("/"):
        import pwd  # noqa: PLC0415 - only without an absolute HOME

        try:
            home = pwd.getpwuid(os.getuid()).pw_dir
        except KeyError:
            return None
    return f"{home.rstrip('/')}/.{kind}" if home.startswith("/") else None


def _docker_configs(environ: Mapping[str, str]) -> tuple[str, ...]:
    paths = []
    if environ.get("DOCKER_CONFIG"):
        paths.append(pure(os.path.join(environ["DOCKER_CONFIG"], "config.json")))
    elif environ.get("HOME"):
        paths.append(pure(os.path.join(environ["HOME"], ".docker", "config.json")))
    if environ.get("XDG_RUNTIME_DIR"):
        paths.append(pure(os.path.join(environ["XDG_RUNTIME_DIR"], "containers", "auth.json")))
    return tuple(paths)


def _proxy(environ: Mapping[str, str]) -> tuple[str, str, str]:
    def pick(name: str) -> str:
        return environ.get(name.upper()) or environ.get(name.lower()) or ""

    return pick("http_proxy"), pick("https_proxy"), pick("no_proxy")


def _count(name: str, given: int | None, flag: str, environ: Mapping[str, str], default: int) -> int:
    value = _text(name, given, environ) or str(default)
    what = flag if given is not None else OPTION_ENV[name][0]
    if not value.isdigit() or not 1 <= int(value) <= 64:  # noqa: PLR2004 - a sane pool bound
        raise UsageError(f"invalid value '{value}' for {what}: expected a whole number from 1 to 64")
    return int(value)


def _path(name: str, given: str | None, environ: Mapping[str, str]) -> str | None:
    text = _text(name, given, environ)
    return absolute(os.path.expanduser(text)) if text else None


def read_policy_source(settings: Settings) -> PolicySource | None:
    """The policy files of `--policy` / OCIVENDIR_POLICY, read but not parsed (None when neither is set).

    A file holds one or more YAML documents; a directory (a mounted ConfigMap) holds such files, read in name order;
    names starting with `.` (a ConfigMap's `..data` links) are skipped. A path that cannot be read is a ConfigError.
    """
    path = settings.policy
    if path is None:
        return None
    from ocivendir.sign.source import PolicySource  # noqa: PLC0415 - only with a policy

    try:
        names = sorted(n for n in os.listdir(path) if not n.startswith(".")) if os.path.isdir(path) else None
    except OSError as exc:
        raise ConfigError(f"Reading signature policy '{path}': {exc.strerror}") from None
    files = [path] if names is None else [os.path.join(path, n) for n in names]
    return PolicySource(tuple((name, _config_text(name, "signature policy"))
                              for name in files if names is None or os.path.isfile(name)))  # fmt: skip


def load_policies(settings: Settings) -> PolicySet | None:
    """The signature policies of `--policy` / OCIVENDIR_POLICY, parsed (None when neither is set)."""
    source = read_policy_source(settings)
    return None if source is None else source.parse(trusted_root=settings.trusted_root is not None)


def _config_text(path: str, what: str) -> str:
    """A configuration file's text; a ConfigError naming it when it cannot be read or is not UTF-8."""
    try:
        with open(path, encoding="utf-8") as handle:
            return handle.read()
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) else "not UTF-8 text"
        raise ConfigError(f"Reading {what} '{path}': {reason}") from None


def load_registry_plan(settings: Settings) -> tuple[MirrorPlan, list[str]]:
    """registries.yaml: `--registry-config`, else OCIVENDIR_REGISTRY_CONFIG, else `<user config dir>/registries.yaml`.

    Read only when a registry is about to be asked (a warm cached run never reads it). A file named by the flag or
    variable must exist; the default one is optional. Returns the plan and its warnings (unknown keys).
    """
    from ocivendir.registry.mirrors import MirrorPlan  # noqa: PLC0415 - not on the warm path

    path = settings.registry_config
    if path is None:
        base = user_dir("config", os.environ)  # None: no HOME and no passwd entry (an arbitrary UID), no default file
        path = pure(os.path.join(base, "ocivendir", "registries.yaml")) if base else None
        if path is None or not os.path.isfile(path):
            return MirrorPlan(), []
    text = _config_text(path, "registry config")
    from ocivendir.registry.registriesyaml import parse_registries  # noqa: PLC0415 - only when the file exists

    return parse_registries(text, path)


def _truthy(value: str | None, what: str) -> bool:
    if value is None:
        return False
    lowered = value.lower()
    if lowered in {"1", "true", "yes", "on"}:
        return True
    if lowered in {"0", "false", "no", "off"}:
        return False
    raise UsageError(f"invalid value '{value}' for {what}: expected true or false")


def _switch(name: str, given: bool | None, environ: Mapping[str, str], parse: str = "bool") -> bool:
    """A boolean option by the rule; its variable is read as true/false, or (`parse="imgpkg"`) true only if "true"."""
    if given is not None:
        return given
    text = _text(name, None, environ)
    if parse == "imgpkg":
        return text == "true"  # imgpkg compares the text: `True` is not true
    return _truthy(text, OPTION_ENV[name][0])


def _insecure_hosts(flags: Flags, env: Mapping[str, str]) -> frozenset[str]:
    chosen = choose("insecure_hosts", flags.insecure_hosts, env)
    hosts = chosen.split(",") if isinstance(chosen, str) else flags.insecure_hosts
    return frozenset(h.strip() for h in hosts if h.strip())


def _credentials(flags: Flags, env: Mapping[str, str]) -> CredentialRules:
    """The environment's credential rules, with the every-registry default from imgpkg's flags by the rule."""
    username = _text("registry_username", flags.registry_username, env) or ""
    password = _text("registry_password", flags.registry_password, env) or ""
    token = _text("registry_token", flags.registry_token, env) or ""
    anon = _switch("registry_anon", flags.registry_anon, env, parse="imgpkg")
    given = {"IMGPKG_USERNAME": flags.registry_username, "IMGPKG_PASSWORD": flags.registry_password,
             "IMGPKG_TOKEN": flags.registry_token, "IMGPKG_ANON": flags.registry_anon}  # fmt: skip
    rules = rules_from_env(env)
    kept = tuple((name, value) for name, value in rules.variables if given.get(name) is None)  # a flag beats its own
    default = every_registry(username, password, token, anon=anon)
    flagged = any(value is not None for value in given.values())
    return replace(rules, default=default, flagged=flagged, variables=kept)


_SETTINGS_KEPT = 8
_loaded: OrderedDict[tuple[object, ...], Settings] = OrderedDict()  # see load_settings: keyed by all it reads


def load_settings(flags: Flags, environ: Mapping[str, str] | None = None) -> Settings:
    """Build Settings from flags and the environment (os.environ unless given), by `choose`'s rule.

    A reused worker builds the same Settings for every call of the same App, so they are kept, keyed by all that they
    are made of: the flags, every variable of the environment, the working directory where a path given is relative
    (it is made absolute) and the umask. Only Settings of os.environ are kept (the cache's default path is read from
    it even when `environ` is given), and only with an absolute HOME (else that path comes from the passwd database,
    which is not in the key). Settings are frozen, and a failure is never kept.
    """
    env = dict(os.environ if environ is None else environ)
    umask = _read_umask()
    key = _key(flags, env, umask) if environ is None and env.get("HOME", "").startswith("/") else None
    if key is None:
        return _build(flags, env, umask)
    return through(_loaded, key, lambda: _build(flags, env, umask), _SETTINGS_KEPT)


_RELATIVE_ABLE = ("cache_dir", "registry_config", "policy", "trusted_root")  # the paths made absolute (`_path`)


def _key(flags: Flags, env: dict[str, str], umask: int) -> tuple[object, ...] | None:
    """What Settings are made of; the working directory only where a path is relative (kapp-controller's is new)."""
    try:
        paths = [text for name in _RELATIVE_ABLE if (text := _text(name, getattr(flags, name), env))]
        if any(text.startswith("~") and text != "~" and not text.startswith("~/") for text in paths):
            return None  # `~user` is the passwd database's answer, not in the key
        relative = any(not os.path.expanduser(text).startswith("/") for text in paths)
        key = (flags, frozenset(env.items()), os.getcwd() if relative else None, umask)
        hash(key)
    except OSError:  # the working directory is gone: made anew (a relative path is refused then as before)
        return None
    except TypeError:  # a flag given as a list: made anew each time
        return None
    return key


def _build(flags: Flags, env: dict[str, str], umask: int) -> Settings:
    _server_switch(env)
    cache_dir, explicit = _cache_dir(flags, env)
    size_text = _text("cache_max_size", flags.cache_max_size, env)
    extract_text = _text("max_extract_size", flags.max_extract_size, env)
    recheck = _text("relocation_recheck", flags.relocation_recheck, env) or "1h"
    timeout = _text("timeout", flags.timeout, env) or "5m"
    stale = _text("stale_if_error", flags.stale_if_error, env)
    delegate = _text("delegate_vendir", flags.delegate_vendir, env)
    return Settings(
        cache_dir=cache_dir,
        cache_dir_explicit=explicit,
        cache_max_size=parse_size(size_text, "--cache-max-size") if size_text else DEFAULT_CACHE_MAX_SIZE,
        relocation_recheck=parse_duration(recheck, "--relocation-recheck"),
        max_extract_size=parse_size(extract_text, "--max-extract-size") if extract_text else DEFAULT_MAX_EXTRACT_SIZE,
        timeout=parse_duration(timeout, "--timeout") or 300.0,
        concurrency=_count("concurrency", flags.concurrency, "--concurrency", env, 8),
        offline=_switch("offline", flags.offline, env),
        stale_if_error=parse_duration(stale, "--stale-if-error") if stale else None,
        json=flags.json,
        quiet=flags.quiet,
        verbose=flags.verbose,
        debug=flags.debug,
        tty=flags.tty,
        color=flags.color if flags.color is not None else choose("color", None, env) is None,
        umask=umask,
        proxy_vars=_proxy(env),
        credentials=_credentials(flags, env),
        docker_configs=_docker_configs(env),
        registry_auth_file=pure(env["REGISTRY_AUTH_FILE"]) if env.get("REGISTRY_AUTH_FILE") else None,
        ssl_cert_file=env.get("SSL_CERT_FILE") or None,
        ssl_cert_dir=env.get("SSL_CERT_DIR") or None,
        insecure_registries=_insecure_hosts(flags, env),
        delegate_vendir=pure(delegate) if delegate else None,
        home=pure(env["HOME"]) if env.get("HOME") else None,
        registry_config=_path("registry_config", flags.registry_config, env),
        policy=_path("policy", flags.policy, env),
        trusted_root=_path("trusted_root", flags.trusted_root, env),
        registry_concurrency=_count(
            "registry_concurrency",
            flags.registry_concurrency,
            "--registry-concurrency",
            env,
            DEFAULT_REGISTRY_CONCURRENCY,
        ),
    )


_SERVER_SWITCH = ("on", "off", "auto")
DEFAULT_SERVER_WORKERS = 8
DEFAULT_SERVER_MAX_CALLS = 1000


def _server_switch(env: Mapping[str, str]) -> str:
    """`OCIVENDIR_SERVER` (the client acts on it before Settings exist; a bad value is reported here)."""
    value = env.get("OCIVENDIR_SERVER") or "auto"
    if value not in _SERVER_SWITCH:
        raise UsageError(f"invalid value '{value}' for OCIVENDIR_SERVER: use on, off or auto")
    return value


def load_server_settings(environ: Mapping[str, str] | None = None) -> tuple[float, int]:
    """The resident server's idle timeout and its bound on concurrent workers.

    `OCIVENDIR_SERVER_IDLE` (a DURATION, default 10m, 0: never) and `OCIVENDIR_SERVER_WORKERS` (default 8).
    """
    env = os.environ if environ is None else environ
    idle = parse_duration(env.get("OCIVENDIR_SERVER_IDLE") or "10m", "OCIVENDIR_SERVER_IDLE")
    workers = env.get("OCIVENDIR_SERVER_WORKERS") or str(DEFAULT_SERVER_WORKERS)
    if not workers.isdigit() or not 1 <= int(workers) <= 64:  # noqa: PLR2004 - a sane bound
        raise UsageError(
            f"invalid value '{workers}' for OCIVENDIR_SERVER_WORKERS: expected a whole number from 1 to 64"
        )
    return idle, int(workers)


def load_server_log(environ: Mapping[str, str] | None = None) -> str | None:
    """`OCIVENDIR_SERVER_LOG`: the file the server appends its log to (an absolute path), or None (no log)."""
    env = os.environ if environ is None else environ
    path = env.get("OCIVENDIR_SERVER_LOG") or None
    if path is not None and not os.path.isabs(path):
        raise UsageError(f"invalid value '{path}' for OCIVENDIR_SERVER_LOG: expected an absolute path")
    return path


def load_server_max_calls(environ: Mapping[str, str] | None = None) -> int:
    """`OCIVENDIR_SERVER_MAX_CALLS`: how many calls a worker serves before it is retired (default 1000; 1: one each)."""
    env = os.environ if environ is None else environ
    calls = env.get("OCIVENDIR_SERVER_MAX_CALLS") or str(DEFAULT_SERVER_MAX_CALLS)
    if not calls.isdigit() or int(calls) < 1:
        raise UsageError(f"invalid value '{calls}' for OCIVENDIR_SERVER_MAX_CALLS: expected a whole number from 1")
    return int(calls)
