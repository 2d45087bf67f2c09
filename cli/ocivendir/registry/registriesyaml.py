"""Owns: reading registries.yaml (the k3s/RKE2 containerd format) into a `MirrorPlan` (`registry/mirrors.py`).

Pure: text in, a plan out. Unknown keys are warnings naming the file and line; anything that cannot be used is a
ConfigError naming both. The only registry module that loads PyYAML, and only when such a file exists.
"""

from __future__ import annotations

import base64
import binascii
from urllib.parse import urlsplit

import yaml

from ocivendir.errors import ConfigError
from ocivendir.oci.reference import is_loopback
from ocivendir.registry.credentials import Credential
from ocivendir.registry.mirrors import HostConfig, Mirror, MirrorPlan, TLSFiles, normal_host

TYPE_CHECKING = False
if TYPE_CHECKING:
    from ocivendir.registry.rewrite import Rewrite

__all__ = ["parse_registries"]

_DEFAULT_ROOTS = frozenset({"", "/", "/v2", "/v2/"})
_BOOLS = {"true": True, "yes": True, "on": True, "y": True, "false": False, "no": False, "off": False, "n": False}


class _Reader:
    """Walks the YAML node tree, keeping the file name for messages and collecting warnings."""

    def __init__(self, source: str) -> None:
        self.source = source
        self.keys: dict[int, yaml.Node] = {}
        self._warnings: list[tuple[int, str]] = []

    @property
    def warnings(self) -> list[str]:
        """Unknown keys, in file order."""
        return [message for _, message in sorted(self._warnings)]

    def where(self, node: yaml.Node) -> str:
        return f"{self.source}:{node.start_mark.line + 1}"

    def fail(self, node: yaml.Node, message: str) -> ConfigError:
        return ConfigError(f"{self.where(node)}: {message}")

    def mapping(self, node: yaml.Node, what: str) -> list[tuple[str, yaml.Node]]:
        if isinstance(node, yaml.ScalarNode) and node.tag == "tag:yaml.org,2002:null":
            return []
        if not isinstance(node, yaml.MappingNode):
            raise self.fail(node, f"{what} must be a mapping")
        pairs = []
        seen: set[str] = set()
        for key, value in node.value:
            name = self.scalar(key, f"a key of {what}")
            if name in seen:
                raise self.fail(key, f"duplicate key '{name}' in {what}")
            seen.add(name)
            self.keys[id(value)] = key
            pairs.append((name, value))
        return pairs

    def scalar(self, node: yaml.Node, what: str) -> str:
        if not isinstance(node, yaml.ScalarNode):
            raise self.fail(node, f"{what} must be a string")
        return "" if node.tag == "tag:yaml.org,2002:null" else str(node.value)

    def boolean(self, node: yaml.Node, what: str) -> bool:
        text = self.scalar(node, what)
        if text.lower() not in _BOOLS:
            raise self.fail(node, f"{what} must be true or false, not '{text}'")
        return _BOOLS[text.lower()]

    def fields(self, node: yaml.Node, what: str, known: frozenset[str]) -> dict[str, yaml.Node]:
        found = {}
        for name, value in self.mapping(node, what):
            if name in known:
                found[name] = value
            else:
                key = self.keys.get(id(value), node)
                message = f"{self.where(key)}: unknown key '{name}' in {what} ignored"
                self._warnings.append((key.start_mark.line, message))
        return found


def _endpoint_url(reader: _Reader, node: yaml.Node, registry: str) -> tuple[str | None, str, str]:
    text = reader.scalar(node, f"an endpoint of mirror '{registry}'").strip()
    parts = urlsplit(text if "://" in text else f"//{text}")
    if parts.scheme not in {"", "http", "https"} or not parts.netloc or parts.query or parts.fragment:
        raise reader.fail(
            node, f"invalid endpoint '{text}' for mirror '{registry}': expected [http[s]://]host[:port][/path]"
        )
    scheme: str | None = parts.scheme or None
    if scheme is None and is_loopback(parts.hostname or "") and parts.port not in {None, 443}:
        scheme = "http"  # containerd's rule: localhost on another port than 443 speaks plain HTTP
    root = "/v2" if parts.path in _DEFAULT_ROOTS else parts.path.rstrip("/")
    return scheme, parts.netloc, root


def _same_url(a: tuple[str | None, str, str], b: tuple[str | None, str, str]) -> bool:
    """Duplicates as k3s sees them: no scheme is https."""
    return (a[0] or "https", a[1].lower(), a[2]) == (b[0] or "https", b[1].lower(), b[2])


def _rewrites(reader: _Reader, node: yaml.Node, registry: str) -> tuple[Rewrite, ...]:
    from ocivendir.registry.rewrite import compile_rewrite  # noqa: PLC0415 - RE2 loads only for a file with rewrites

    rules = []
    for pattern, target in reader.mapping(node, f"rewrite of mirror '{registry}'"):
        try:
            rule = compile_rewrite(pattern, reader.scalar(target, f"rewrite '{pattern}'"))
        except ValueError as exc:  # Go's regexp (RE2) refuses it, as containerd would
            raise reader.fail(node, f"invalid rewrite pattern '{pattern}' for mirror '{registry}': {exc}") from None
        rules.append(rule)
    return tuple(rules)


def _mirror(reader: _Reader, node: yaml.Node, registry: str) -> Mirror:
    fields = reader.fields(node, f"mirror '{registry}'", frozenset({"endpoint", "rewrite"}))
    urls: list[tuple[str | None, str, str]] = []
    if "endpoint" in fields:
        listed = fields["endpoint"]
        if not isinstance(listed, yaml.SequenceNode):
            raise reader.fail(listed, f"endpoint of mirror '{registry}' must be a list")
        for item in listed.value:
            url = _endpoint_url(reader, item, registry)
            if not any(_same_url(url, known) for known in urls):
                urls.append(url)
    rewrites = _rewrites(reader, fields["rewrite"], registry) if "rewrite" in fields else ()
    return Mirror(urls=tuple(urls), rewrites=rewrites)


def _auth(reader: _Reader, node: yaml.Node, host: str) -> Credential:
    what = f"auth of '{host}'"
    fields = reader.fields(node, what, frozenset({"username", "password", "auth", "identitytoken"}))
    values = {name: reader.scalar(value, f"{what}: {name}") for name, value in fields.items()}
    username, password = values.get("username", ""), values.get("password", "")
    if values.get("auth"):
        try:
            decoded = base64.b64decode(values["auth"], validate=True).decode()
        except (binascii.Error, UnicodeDecodeError):
            raise reader.fail(fields["auth"], f"{what}: 'auth' is not base64 of username:password") from None
        username, sep, password = decoded.partition(":")
        if not sep:
            raise reader.fail(fields["auth"], f"{what}: 'auth' is not base64 of username:password")
    return Credential(username=username, password=password, identity_token=values.get("identitytoken", ""))


def _tls(reader: _Reader, node: yaml.Node, host: str) -> TLSFiles:
    what = f"tls of '{host}'"
    known = frozenset({"ca_file", "cert_file", "key_file", "insecure_skip_verify"})
    fields = reader.fields(node, what, known)
    files = {name: reader.scalar(fields[name], f"{what}: {name}") for name in ("ca_file", "cert_file", "key_file")
             if name in fields}  # fmt: skip
    if bool(files.get("cert_file")) != bool(files.get("key_file")):
        raise reader.fail(node, f"{what}: cert_file and key_file must be given together")
    skip = "insecure_skip_verify" in fields and reader.boolean(
        fields["insecure_skip_verify"], f"{what}: insecure_skip_verify"
    )
    return TLSFiles(insecure_skip_verify=skip, **files)


def _config(reader: _Reader, node: yaml.Node, host: str) -> HostConfig:
    fields = reader.fields(node, f"config '{host}'", frozenset({"auth", "tls", "concurrency"}))
    concurrency = None
    if "concurrency" in fields:
        text = reader.scalar(fields["concurrency"], f"concurrency of '{host}'")
        if not text.isdigit() or not 1 <= int(text) <= 64:  # noqa: PLR2004 - the bound of --concurrency
            raise reader.fail(fields["concurrency"], f"concurrency of '{host}' must be a whole number from 1 to 64")
        concurrency = int(text)
    return HostConfig(
        auth=_auth(reader, fields["auth"], host) if "auth" in fields else None,
        tls=_tls(reader, fields["tls"], host) if "tls" in fields else None,
        concurrency=concurrency,
    )


def _document(text: str, source: str) -> yaml.Node | None:
    try:
        return yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = f":{mark.line + 1}" if mark is not None else ""
        raise ConfigError(f"{source}{line}: invalid YAML: {exc.problem or exc.context}") from None
    except yaml.YAMLError as exc:
        raise ConfigError(f"{source}: invalid YAML: {exc}") from None
    except RecursionError:  # PyYAML's composer recurses once per nesting level
        raise ConfigError(f"{source}: invalid YAML: nested too deeply") from None


def parse_registries(text: str, source: str) -> tuple[MirrorPlan, list[str]]:
    """Parse registries.yaml; returns the plan and warnings (unknown keys), or raises ConfigError with file:line."""
    reader = _Reader(source)
    root = _document(text, source)
    if root is None:
        return MirrorPlan(source=source), []
    top = reader.fields(root, "registries.yaml", frozenset({"mirrors", "configs"}))
    mirrors = {
        normal_host(name): _mirror(reader, node, name)
        for name, node in (reader.mapping(top["mirrors"], "mirrors") if "mirrors" in top else [])
    }
    configs = {
        normal_host(name): _config(reader, node, name)
        for name, node in (reader.mapping(top["configs"], "configs") if "configs" in top else [])
    }
    return MirrorPlan(mirrors=mirrors, configs=configs, source=source), reader.warnings
