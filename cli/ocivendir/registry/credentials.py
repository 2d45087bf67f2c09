"""Owns: the credential model and its pure rules — IMGPKG_* variable sets, vendir secrets, Kubernetes host matching.

Lookup order (kapp-controller spec §4.4): hostname credentials (a content's secret and the IMGPKG_REGISTRY_* sets,
most specific match first); keychains (accepted, none native); secret-wide and IMGPKG_USERNAME/PASSWORD/TOKEN/ANON
(the environment wins on the same key); the docker config (registry/auth.py); anonymous.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace

from ocivendir import jsondoc
from ocivendir.errors import ConfigError
from ocivendir.gobase64 import go_base64
from ocivendir.gofold import go_fold
from ocivendir.oci.gokeys import with_repeats

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping

__all__ = [
    "KEYCHAINS",
    "Credential",
    "CredentialRules",
    "HostCredential",
    "host_match_score",
    "rules_from_env",
    "secret_rules",
]

KEYCHAINS = ("aks", "ecr", "gke", "github")
_HOST_FIELDS = {
    "HOSTNAME": "hostname",
    "USERNAME": "username",
    "PASSWORD": "password",
    "IDENTITY_TOKEN": "identity_token",
    "REGISTRY_TOKEN": "registry_token",
}
_ENV_HOST = re.compile(f"IMGPKG_REGISTRY_({'|'.join(_HOST_FIELDS)})(_.*)?")  # `_` alone: a set of its own, as imgpkg


@dataclass(frozen=True, kw_only=True)
class Credential:
    """What to authenticate with; all empty means anonymous. Never printed: repr hides the secrets."""

    username: str = field(default="", repr=False)
    password: str = field(default="", repr=False)
    identity_token: str = field(default="", repr=False)
    registry_token: str = field(default="", repr=False)


ANONYMOUS = Credential()


@dataclass(frozen=True, kw_only=True)
class HostCredential:
    """A credential for the registries a hostname pattern matches."""

    hostname: str
    credential: Credential


def _split_pattern(text: str) -> tuple[str, str, str]:
    """(host, port, path) of a credential hostname or repository string, scheme and /v1/ or /v2/ ignored."""
    from urllib.parse import urlsplit  # noqa: PLC0415 - only when hostname credentials exist (as fnmatch)

    if "://" not in text:
        text = "https://" + text
    try:  # Go's url.Parse, then net.SplitHostPort: user info dropped, an IPv6 literal out of its brackets
        parts = urlsplit(text)
        host, number = (parts.hostname or ""), parts.port
    except ValueError as exc:  # an unclosed or invalid bracketed host, a port that is no number
        raise ConfigError(f'Parsing registry hostname: parse "{text}": {exc} (e.g. gcr.io, index.docker.io)') from None
    port = "" if number is None else str(number)
    path = parts.path
    for prefix in ("/v1/", "/v2/"):
        if path.startswith(prefix):
            path = "/" + path[len(prefix) :]
    return host, port, path.rstrip("/")


def host_match_score(pattern: str, repository: str) -> tuple[int, int, int] | None:
    """Kubernetes URLsMatchStr: None if `pattern` does not cover `repository`, else a specificity (higher wins)."""
    import fnmatch  # noqa: PLC0415 - only when hostname credentials exist

    p_host, p_port, p_path = _split_pattern(pattern)
    r_host, r_port, r_path = _split_pattern(repository)
    p_parts, r_parts = p_host.split("."), r_host.split(".")
    if len(p_parts) != len(r_parts) or p_port != r_port:
        return None
    if not all(fnmatch.fnmatchcase(r, p) for p, r in zip(p_parts, r_parts, strict=True)):
        return None
    if not r_path.startswith(p_path):  # a plain prefix, as URLsMatchStr compares (`team` covers `teamx/app` too)
        return None
    literal_parts = sum(1 for p in p_parts if "*" not in p)
    return (literal_parts, len(p_path), len(p_host))


@dataclass(frozen=True, kw_only=True)
class CredentialRules:
    """The credential sources that come from a content's secret and the process environment."""

    hosts: tuple[HostCredential, ...] = ()
    default: Credential | None = None
    keychains: tuple[str, ...] = ()
    variables: tuple[tuple[str, str], ...] = field(default=(), repr=False)  # the IMGPKG_* variables read
    flagged: bool = False  # `default` comes from --registry-* flags, which beat every variable

    def lookup(self, repository: str) -> Credential | None:
        """The credential for `host[:port]/path`, or None to fall through to the docker config."""
        best: tuple[tuple[int, int, int], int] | None = None
        for position, entry in enumerate(self.hosts):
            score = host_match_score(entry.hostname, repository)
            if score is not None and (best is None or score > best[0]):
                best = (score, position)
        if best is not None:
            return self.hosts[best[1]].credential
        return self.default

    def merged_with(self, other: CredentialRules) -> CredentialRules:
        """A secret's rules (self) with the process environment's (other), as vendir merges them.

        vendir hands imgpkg the secret as IMGPKG_* variables followed by the process environment, so a variable of the
        environment replaces the secret's of the same name, field by field and set by set (`_0` is the secret's
        first hostname); then the credentials are read from the result. --registry-* flags beat both.
        """
        merged = rules_from_env({**dict(self.variables), **dict(other.variables)})
        return replace(merged, default=other.default, flagged=True) if other.flagged else merged


def env_host_name(name: str) -> tuple[str, str]:
    """(field, suffix) of an `IMGPKG_REGISTRY_<FIELD>[_<suffix>]` name, ("", "") for another name."""
    match = _ENV_HOST.fullmatch(name)
    return (match[1], match[2] or "") if match else ("", "")


def _env_host_sets(env: Mapping[str, str]) -> tuple[HostCredential, ...]:
    sets: dict[str, dict[str, str]] = {}
    for name, value in env.items():
        if not name.startswith("IMGPKG_REGISTRY_") or name == "IMGPKG_REGISTRY_AZURE_CR_CONFIG":
            continue
        kind, suffix = env_host_name(name)
        if not kind:
            raise ConfigError(f"Unknown env variable '{name}'")
        sets.setdefault(suffix, {})[_HOST_FIELDS[kind]] = value
    hosts = []
    for suffix in sorted(sets):
        values = sets[suffix]
        hostname = values.pop("hostname", "")
        if not hostname:
            continue
        hosts.append(HostCredential(hostname=hostname, credential=Credential(**values)))
    return tuple(hosts)


def rules_from_env(env: Mapping[str, str]) -> CredentialRules:
    """IMGPKG_REGISTRY_* sets, IMGPKG_USERNAME/PASSWORD/TOKEN/ANON and IMGPKG_ACTIVE_KEYCHAINS."""
    keychains = tuple(k.strip() for k in env.get("IMGPKG_ACTIVE_KEYCHAINS", "").split(",") if k.strip())
    for name in keychains:
        if name not in KEYCHAINS:
            known = ", ".join(KEYCHAINS)
            raise ConfigError(f"Unable to load keychain for {name}, available keychains [{known}]")
    default = every_registry(env.get("IMGPKG_USERNAME", ""), env.get("IMGPKG_PASSWORD", ""),
                             env.get("IMGPKG_TOKEN", ""), anon=env.get("IMGPKG_ANON") == "true")  # fmt: skip
    variables = tuple(sorted((name, value) for name, value in env.items() if name.startswith("IMGPKG_")))
    return CredentialRules(hosts=_env_host_sets(env), default=default, keychains=keychains, variables=variables)


def every_registry(username: str, password: str, token: str, *, anon: bool) -> Credential | None:
    """The credential for every registry as imgpkg's CustomRegistryKeychain picks it; None: ask the docker config.

    A username wins, with its password (a token beside it is not used); else a token; else `anon` is anonymous. A
    password alone is no credential: the docker config is asked, as imgpkg asks its default keychain.
    """
    if username:
        return Credential(username=username, password=password)
    if token:
        return Credential(registry_token=token)
    return ANONYMOUS if anon else None


_SECRET_HOST_VARIABLES = {"hostname": "HOSTNAME", "username": "USERNAME", "password": "PASSWORD",
                          "identity-token": "IDENTITY_TOKEN", "token": "REGISTRY_TOKEN"}  # fmt: skip
_SECRET_VARIABLES = {"username": "IMGPKG_USERNAME", "password": "IMGPKG_PASSWORD", "token": "IMGPKG_TOKEN"}


def _secret_variables(name: str, data: Mapping[str, str], index: int) -> dict[str, str]:
    """The IMGPKG_* variables vendir hands imgpkg for one (hostname) secret: its authEnv."""
    if "hostname" in data:
        allowed = _SECRET_HOST_VARIABLES
        names = {key: f"IMGPKG_REGISTRY_{field}_{index}" for key, field in allowed.items()}
    else:
        allowed, names = _SECRET_VARIABLES, dict(_SECRET_VARIABLES)
    for key in sorted(data):
        if key not in allowed:
            raise ConfigError(f"Unknown secret field '{key}' in secret '{name}'")
    return {names[key]: value for key, value in data.items()}


def _go_field(doc: object, name: str) -> object:
    """The value of the one key Go's encoding/json gives the untagged field `name` (any case); None when none does.

    vendir's secretDockerConfigJSON has no JSON tags: `Auths`, `auths` and `AUTHS` all set its field, and two of them
    would be merged by Go. Exactly one is read as Go reads it; more than one (or one key twice) is refused.
    """
    if not isinstance(doc, dict):
        return None
    keys = [key for key in doc if go_fold(key) == name.lower()]
    if len(keys) > 1 or set(keys) & getattr(doc, "repeated", frozenset()):
        raise ConfigError(f"Unmarshaling dockerconfigjson: the field '{name}' is given more than once "
                          f"({', '.join(repr(key) for key in keys)}), which Go would merge; refused")  # fmt: skip
    return doc[keys[0]] if keys else None


def _dockerconfig_secret(raw: str) -> dict[str, str]:
    if not raw.strip():  # no `.dockerconfigjson` at all: Go's json.Unmarshal of nothing
        raise ConfigError("Unmarshaling dockerconfigjson: unexpected end of JSON input")
    try:
        doc = jsondoc.loads(raw, object_pairs_hook=with_repeats)
    except ValueError as exc:
        raise ConfigError(f"Unmarshaling dockerconfigjson: {exc}") from None
    auths = _go_field(doc, "Auths")
    if not isinstance(auths, dict):
        auths = {}
    variables: dict[str, str] = {}
    for index, host in enumerate(sorted(auths)):  # one hostname secret each, in sorted order, as vendir makes them
        entry = auths[host] if isinstance(auths[host], dict) else {}
        username, password = str(_go_field(entry, "Username") or ""), str(_go_field(entry, "Password") or "")
        auth = _go_field(entry, "Auth")
        if not password and auth:
            username, password = _decode_auth(str(auth))
        variables |= _secret_variables("", {"hostname": host, "username": username, "password": password}, index)
    return variables


def _decode_auth(value: str) -> tuple[str, str]:
    """The `auth` field as vendir decodes it: Go's base64.StdEncoding (line breaks skipped, as `base64` wraps them)."""
    try:
        raw = go_base64(value.encode())
    except ValueError as exc:  # the offset Go names
        raise ConfigError(f"Decoding auth field: illegal base64 data at input byte {exc.args[0]}") from None
    try:
        decoded = raw.decode()
    except UnicodeDecodeError:  # Go keeps the bytes; a credential that is no text is refused here
        raise ConfigError("Decoding auth field: it decodes to bytes that are not UTF-8 text") from None
    username, sep, password = decoded.partition(":")
    if not sep:
        raise ConfigError("Expected auth field to have 'username:password' format, but did not")
    return username, password


def secret_rules(name: str, secret_type: str, data: Mapping[str, str]) -> CredentialRules:
    """The credentials a vendir secret (already base64-decoded) gives its content (kapp-controller spec §4.1-4.2).

    Read as vendir has imgpkg read them: the secret becomes IMGPKG_* variables (its authEnv), then credential rules.
    """
    if secret_type == "kubernetes.io/dockerconfigjson":  # noqa: S105 - a Secret type, not a password
        return rules_from_env(_dockerconfig_secret(data.get(".dockerconfigjson", "")))
    return rules_from_env(_secret_variables(name, data, 0))
