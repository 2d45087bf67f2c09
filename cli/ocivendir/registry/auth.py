"""Owns: credentials from docker config files and docker credential helpers (a subprocess per lookup)."""

from __future__ import annotations

import os
from dataclasses import dataclass, replace

from ocivendir import diag, jsondoc
from ocivendir.errors import ConfigError, UnsupportedMediaType, os_reason
from ocivendir.gobase64 import go_base64
from ocivendir.gofold import go_fold
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
_SHOWN = 2000  # characters of a failing helper's output shown in the error
DOCKER_HUB_KEY = "https://index.docker.io/v1/"  # go-containerregistry's DefaultAuthKey: what Docker Hub is asked as
_DOCKER_HUB_HOSTS = frozenset({"index.docker.io", "registry-1.docker.io"})


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
        except OSError as exc:  # Go's words, in lower case (the path is named already)
            raise ConfigError(f"Reading docker config '{path}': {(exc.strerror or str(exc)).lower()}") from None
        try:
            doc = jsondoc.loads(raw, object_pairs_hook=gokeys.with_repeats) if raw.strip() else {}
        except ValueError as exc:
            raise ConfigError(f"Parsing docker config '{path}': {exc}") from None
        doc = doc if isinstance(doc, dict) else {}
        _check_as_go_reads(doc, path)
        return cls(path, doc)

    def lookup(self, registry: str, repository: str = "") -> Credential | None:
        """What go-containerregistry's default keychain takes from this file for `registry` and its `repository`.

        docker/cli's GetAuthConfig for `registry/repository` first, then for `registry` (Docker Hub's is
        `https://index.docker.io/v1/`); the first that gives anything is the answer.
        """
        host_key = DOCKER_HUB_KEY if registry in _DOCKER_HUB_HOSTS else registry
        keys = (f"{registry}/{repository}", host_key) if repository else (host_key,)
        for key in keys:
            found = self._auth_config(key)
            if found is not None:
                return found
        return None

    def _auth_config(self, key: str) -> Credential | None:
        """docker/cli's GetAuthConfig: the `credHelpers` entry of exactly this key, else `credsStore`, else `auths`.

        A helper's answer replaces the file's user and password, even when it has none (docker/cli's native store).
        """
        helpers = self.doc.get("credHelpers") or {}
        if isinstance(helpers, dict) and key in helpers:
            helper = str(helpers[key])  # an empty one means the file itself, even beside a credsStore
            named = f"credHelpers[{key!r}]"
        else:
            helper, named = str(self.doc.get("credsStore") or ""), "credsStore"
        if helper:
            return _from_helper(helper, key, f"{named} in {self.path}")
        entry = self._file_entry(key)
        return _from_auth_entry(entry, self.path) if entry is not None else None

    def _file_entry(self, key: str) -> dict[str, Any] | None:
        """docker/cli's file store: the `auths` entry of exactly this key, else one whose address names its host.

        An address names a host when, less an `http://` or `https://` and anything from the first `/` on, it is the
        key (`https://host/v1/` and `host/anything` name `host`). Go picks any of several such entries; the first
        in the file is taken here.
        """
        auths = self.doc.get("auths") or {}
        if not isinstance(auths, dict):
            return None
        entry = auths.get(key)
        if entry is None:
            entry = next((found for address, found in auths.items() if _hostname(address) == key), None)
        return entry if isinstance(entry, dict) else None


def _hostname(address: str) -> str:
    """docker/cli's ConvertToHostname: less an `http://` or `https://`, up to the first `/`."""
    if address.startswith(("http://", "https://")):
        address = address.partition("://")[2]
    return address.partition("/")[0]


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
    """An `auths` entry as go-containerregistry uses it, every field kept.

    Basic takes the user and password; a Bearer challenge the registry token, else the identity token (a refresh
    token), else the user and password.
    """
    username, password = str(entry.get("username", "")), str(entry.get("password", ""))
    if entry.get("auth"):
        username, password = _decode_auth(entry["auth"], f"Parsing docker config '{path}':")
    found = Credential(username=username, password=password, identity_token=str(entry.get("identitytoken") or ""),
                       registry_token=str(entry.get("registrytoken") or ""))  # fmt: skip
    return None if found == ANONYMOUS else found


_NOT_FOUND = "credentials not found in native keychain"  # the one answer docker-credential-helpers reads as "none"
_DOT = "cannot run executable found relative to current directory"  # Go's exec.ErrDot


def _helper_program(name: str) -> str | None:
    """The helper's absolute path as Go's exec.LookPath finds it, None when absent; ConfigError where Go refuses.

    Go takes the first PATH entry that holds it (as `shutil.which` does), and refuses one found through a relative
    entry ("", "." or "bin"), which names a file in the current directory: a checkout would otherwise choose the
    program that is run. A name with a slash (a `credsStore` of "../x") is refused too (Go would run it relative to the
    current directory).
    """
    import shutil  # noqa: PLC0415 - only for a credential helper (off the warm path)

    program = f"docker-credential-{name}"
    if "/" in program:
        raise ConfigError(f"Running credential helper {program}: a helper's name may not contain '/'")
    found = shutil.which(program)
    if found is not None and not os.path.isabs(found):
        raise ConfigError(f'Running credential helper {program}: exec: "{program}": {_DOT}')
    return found


def _from_helper(helper: str, server: str, named: str) -> Credential | None:
    """docker-credential-helpers' `get` for `server`, as docker/cli's native store asks it; None: it has none.

    The helper's stderr is the caller's, as docker/cli leaves it; its stdout is the answer. Only the exact answer
    `credentials not found in native keychain` means none; any other failure is an error naming its output.
    `named`: where the helper is configured, for the --debug line when it is not installed.
    """
    program = _helper_program(helper)
    if program is None:  # imgpkg fails here; the registry may not need the credential (a 401's hint names the case)
        _log.debug("docker-credential-%s (%s) is not on PATH: going on without its credential", helper, named)
        return None
    import subprocess  # noqa: PLC0415 - only when a helper is configured: a tag's HEAD does not pay ~20 ms for it

    name = f"docker-credential-{helper}"
    try:
        done = subprocess.run(  # an absolute path found as Go finds it; a fixed argument
            [program, "get"], input=server, stdout=subprocess.PIPE, text=True, timeout=_HELPER_TIMEOUT, check=False
        )
    except subprocess.TimeoutExpired:
        raise ConfigError(f"Running credential helper {name}: no answer within {_HELPER_TIMEOUT} s") from None
    except OSError as exc:
        raise ConfigError(f"Running credential helper {name}: {os_reason(exc)}") from None
    if done.returncode != 0:
        out = done.stdout.strip()
        if out == _NOT_FOUND:
            return None
        raise ConfigError(
            f"Credential helper {name} failed for {server}: error getting credentials - err: exit status "
            f"{done.returncode}, out: `{out[:_SHOWN]}`"
        )
    try:  # as docker-credential-helpers decodes it: the first JSON value, its keys in any case (Go's encoding/json)
        answer = jsondoc.first_value(done.stdout)
    except ValueError:
        answer = None
    if not isinstance(answer, dict):  # an answer that is not an object was an AttributeError before
        raise ConfigError(f"Credential helper {name} gave invalid JSON for {server}")
    fields = {go_fold(key): value for key, value in answer.items()}
    username, secret = str(fields.get("username") or ""), str(fields.get("secret") or "")
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
    4. the docker config files (`$REGISTRY_AUTH_FILE` where the docker config file is absent); 5. anonymous.
    """

    rules: CredentialRules
    config_files: tuple[str | os.PathLike[str], ...]
    plan: MirrorPlan | None = None
    auth_file: str | None = None  # $REGISTRY_AUTH_FILE: in place of the docker config where that file is absent

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
        for position, path in enumerate(self.config_files):
            config = DockerConfig.load(path)
            if config is None and position == 0 and self.auth_file:  # go-containerregistry's either/or
                config = DockerConfig.load(self.auth_file)
            credential = config.lookup(registry, repository) if config else None
            if credential is not None:
                return credential
        return ANONYMOUS
