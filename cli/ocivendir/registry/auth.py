"""Owns: credentials from docker config files and docker credential helpers (a subprocess per lookup)."""

from __future__ import annotations

import os
from dataclasses import dataclass, replace

from ocivendir import diag, jsondoc
from ocivendir.errors import ConfigError, UnsupportedMediaType, os_reason
from ocivendir.gobase64 import go_base64
from ocivendir.oci import gokeys
from ocivendir.oci.configtypes import check_go_types
from ocivendir.registry.credentials import ANONYMOUS, Credential, CredentialRules

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from ocivendir.oci.configtypes import Type
    from ocivendir.registry.mirrors import MirrorPlan

__all__ = ["DockerConfig", "Keyring"]

_log = diag.logger("ocivendir.auth")
_HELPER_TIMEOUT = 30
_DOCKER_HUB_KEYS = ("https://index.docker.io/v1/", "index.docker.io", "docker.io", "registry-1.docker.io")


@dataclass(frozen=True)
class DockerConfig:
    """One docker-style config file (`config.json` or containers' `auth.json`)."""

    path: str
    doc: dict[str, Any]

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> DockerConfig | None:
        """Read a config file; an absent file gives None, a malformed one a ConfigError naming it."""
        path = os.fspath(path)
        try:
            with open(path, encoding="utf-8") as handle:
                raw = handle.read()
        except (FileNotFoundError, NotADirectoryError):
            return None
        except OSError as exc:
            raise ConfigError(f"Reading docker config '{path}': {exc.strerror}") from None
        try:
            doc = jsondoc.loads(raw, object_pairs_hook=gokeys.with_repeats) if raw.strip() else {}
        except ValueError as exc:
            raise ConfigError(f"Parsing docker config '{path}': {exc}") from None
        doc = doc if isinstance(doc, dict) else {}
        _check_as_go_reads(doc, path)
        return cls(path, doc)

    def _keys_for(self, registry: str) -> tuple[str, ...]:
        if registry in {"index.docker.io", "registry-1.docker.io"}:
            return _DOCKER_HUB_KEYS
        return (registry, f"https://{registry}", f"http://{registry}", f"https://{registry}/v2/")

    def lookup(self, registry: str) -> Credential | None:
        """The credential this file gives `registry`, through credHelpers, auths or credsStore."""
        helpers = self.doc.get("credHelpers") or {}
        for key in self._keys_for(registry):
            if isinstance(helpers, dict) and key in helpers:
                return _from_helper(str(helpers[key]), registry)
        auths = self.doc.get("auths") or {}
        for key in self._keys_for(registry):
            entry = auths.get(key) if isinstance(auths, dict) else None
            if isinstance(entry, dict):
                found = _from_auth_entry(entry, self.path)
                if found is not None:
                    return found
        store = self.doc.get("credsStore")
        if store:
            return _from_helper(str(store), registry)
        return None


# docker/cli's ConfigFile and AuthConfig, as imgpkg 0.43.1 vendors them: each field's JSON name and Go type (a value
# of another JSON type fails the load); the names are also what Go matches ignoring case (`oci/gokeys.py`)
_AUTH_FIELDS = ("username", "password", "auth", "email", "serveraddress", "identitytoken", "registrytoken")
_CONFIG_STRINGS = (
    "psFormat", "imagesFormat", "networksFormat", "pluginsFormat", "volumesFormat", "statsFormat", "detachKeys",
    "credsStore", "serviceInspectFormat", "servicesFormat", "tasksFormat", "secretFormat", "configFormat",
    "nodesFormat", "experimental", "currentContext",
)  # fmt: skip
_PROXY_FIELDS = ("httpProxy", "httpsProxy", "noProxy", "ftpProxy", "allProxy")
_CONFIG_TYPES: dict[str, Type] = {
    **dict.fromkeys(_CONFIG_STRINGS, "string"),
    **dict.fromkeys(("HttpHeaders", "credHelpers", "aliases"), ("map", "string")),
    **dict.fromkeys(("pruneFilters", "cliPluginsExtraDirs"), ("list", "string")),
    "proxies": ("map", dict.fromkeys(_PROXY_FIELDS, "string")),
    "plugins": ("map", ("map", "string")),
    "auths": ("map", dict.fromkeys(_AUTH_FIELDS, "string")),
}
_CONFIG_FILE: gokeys.Shape = dict.fromkeys(_CONFIG_TYPES)
_AUTH_CONFIG: gokeys.Shape = dict.fromkeys(_AUTH_FIELDS)


def _check_as_go_reads(doc: dict[str, Any], path: str) -> None:
    """Refuse a config docker/cli would read otherwise, as imgpkg and vendir load it (every `auth` decoded at once).

    A key Go matches to a field without being its name (`Auths`, `AUTHS`) or a field given twice is refused
    (`oci/gokeys.py`): Go merges `auths` met twice and takes `Auths` for `auths`. Every entry's `auth` must be what
    docker/cli's decodeAuth takes, whichever registry is asked for: one it refuses fails the whole file there.
    """
    where = f"Parsing docker config '{path}':"
    try:
        gokeys.check(doc, _CONFIG_FILE, where)
        check_go_types(doc, _CONFIG_TYPES, where.removesuffix(":"))
        auths = doc.get("auths")
        for address, entry in auths.items() if isinstance(auths, dict) else ():
            gokeys.check(entry, _AUTH_CONFIG, f"{where} auths[{address!r}]")
            if isinstance(entry, dict) and entry.get("auth"):
                _decode_auth(entry["auth"], f"{where} auths[{address!r}]")
    except UnsupportedMediaType as exc:
        raise ConfigError(exc.message) from None


def _decode_auth(text: object, where: str) -> tuple[str, str]:
    """docker/cli's decodeAuth: Go's standard base64 (`gobase64.py`), then `user:password`, a user named."""
    if not isinstance(text, str):  # Go: a string field given another kind fails the whole load
        raise ConfigError(f"{where} its auth field is not a string")
    try:
        raw = go_base64(text.encode())
    except ValueError as exc:  # the offset Go names
        raise ConfigError(f"{where} its auth field is not base64 (illegal base64 data at input byte "
                          f"{exc.args[0]})") from None  # fmt: skip
    try:
        decoded = raw.decode()
    except UnicodeDecodeError:  # Go keeps the bytes; a credential that is no text is refused here
        raise ConfigError(f"{where} its auth field decodes to bytes that are not UTF-8 text") from None
    username, colon, password = decoded.partition(":")
    if not colon or not username:
        raise ConfigError(f"{where} its auth field is no 'user:password' (Invalid auth configuration file)")
    return username, password.strip("\0")


def _from_auth_entry(entry: dict[str, Any], path: str) -> Credential | None:
    if entry.get("identitytoken"):
        return Credential(username=str(entry.get("username", "")), identity_token=str(entry["identitytoken"]))
    if entry.get("registrytoken"):
        return Credential(registry_token=str(entry["registrytoken"]))
    username, password = str(entry.get("username", "")), str(entry.get("password", ""))
    if entry.get("auth"):
        username, password = _decode_auth(entry["auth"], f"Parsing docker config '{path}':")
    if not username and not password:
        return None
    return Credential(username=username, password=password)


def _from_helper(helper: str, registry: str) -> Credential | None:
    import shutil  # noqa: PLC0415 - only for a credential helper (off the warm path)

    program = shutil.which(f"docker-credential-{helper}")
    if program is None:
        _log.debug("credential helper docker-credential-%s not found on PATH", helper)
        return None
    import subprocess  # noqa: PLC0415 - only when a helper is configured: a tag's HEAD does not pay ~20 ms for it

    server = "https://index.docker.io/v1/" if registry in {"index.docker.io", "registry-1.docker.io"} else registry
    try:
        done = subprocess.run(
            [program, "get"], input=server, capture_output=True, text=True, timeout=_HELPER_TIMEOUT, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        reason = os_reason(exc) if isinstance(exc, OSError) else str(exc)
        raise ConfigError(f"Running credential helper docker-credential-{helper}: {reason}") from None
    if done.returncode != 0:
        if "credentials not found" in done.stdout + done.stderr:
            return None
        raise ConfigError(
            f"Credential helper docker-credential-{helper} failed for {registry} (exit {done.returncode})"
        )
    try:
        answer = jsondoc.loads(done.stdout)
    except ValueError:
        answer = None
    if not isinstance(answer, dict):  # an answer that is not an object was an AttributeError before
        raise ConfigError(f"Credential helper docker-credential-{helper} gave invalid JSON for {registry}")
    username, secret = str(answer.get("Username", "")), str(answer.get("Secret", ""))
    if username == "<token>":
        return Credential(identity_token=secret)
    return Credential(username=username, password=secret)


@dataclass(frozen=True)
class Keyring:
    """The full lookup for one content, most specific first.

    1. hostname credentials: the content's Secret with a `hostname` (or a dockerconfigjson Secret) and the
       IMGPKG_REGISTRY_* sets, best match first;
    2. the host's registries.yaml `configs` auth (else the `*` entry's);
    3. credentials for every registry (a Secret without `hostname`, IMGPKG_USERNAME/PASSWORD/TOKEN/ANON, the
       --registry-* flags) — for the origin only: they are never sent to a mirror's host;
    4. the docker config files; 5. anonymous.
    """

    rules: CredentialRules
    config_files: tuple[str | os.PathLike[str], ...]
    plan: MirrorPlan | None = None

    def __call__(self, registry: str, repository: str, /, *, mirror: bool = False) -> Credential:
        """The credential to use for `registry` (host[:port]) and its repository path; `mirror` for a mirror host."""
        found = replace(self.rules, default=None).lookup(f"{registry}/{repository}")
        if found is not None:
            return found
        configured = self.plan.config_for(registry).auth if self.plan is not None else None
        if configured is not None:
            return configured
        if not mirror and self.rules.default is not None:
            return self.rules.default
        for path in self.config_files:
            config = DockerConfig.load(path)
            credential = config.lookup(registry) if config else None
            if credential is not None:
                return credential
        return ANONYMOUS
