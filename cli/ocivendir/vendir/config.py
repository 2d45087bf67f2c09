"""Owns: the vendir input stream and Config model.

Document dispatch, lenient Go-style decoding, validation with vendir's messages, secrets and config maps, and
configDigest.
"""

from __future__ import annotations

import hashlib
import posixpath
import stat
from dataclasses import dataclass, field, replace

from ocivendir import VENDIR_COMPAT_VERSION
from ocivendir.errors import ConfigError
from ocivendir.gofold import go_fold
from ocivendir.goyaml import emit
from ocivendir.goyaml.load import (
    DecodeError,
    SeparatorError,
    go_bool,
    go_bytes,
    go_file_mode,
    go_int,
    go_string_field,
    load_documents,
)
from ocivendir.goyaml.load import field as get

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence
    from typing import Any

__all__ = [
    "API_VERSION",
    "NATIVE_TYPES",
    "SOURCE_TYPES",
    "Config",
    "ConfigMap",
    "Content",
    "Directory",
    "InputStream",
    "Secret",
    "config_digest",
    "parse_stream",
    "validate",
]

API_VERSION = "vendir.k14s.io/v1alpha1"
# vendir's order for "multiple found" messages
SOURCE_TYPES = ("git", "hg", "http", "image", "githubRelease", "helmChart", "manual", "directory", "inline",
                "imgpkgBundle")  # fmt: skip
NATIVE_TYPES = ("image", "imgpkgBundle", "inline", "directory", "manual")
_DISALLOWED = frozenset({"/", ".", "..", ""})
_SELECTION = {"semver": {"constraints": str, "prereleases": {"identifiers": [str]}}}
_SECRET_REF = {"name": str}
_OCI_COMMON = {"tagSelection": _SELECTION, "secretRef": _SECRET_REF, "dangerousSkipTLSVerify": bool,
               "responseHeaderTimeout": int}  # fmt: skip
_SCHEMAS: dict[str, Any] = {
    "image": {"url": str, **_OCI_COMMON},
    "imgpkgBundle": {"image": str, "recursive": bool, **_OCI_COMMON},
    "inline": {"paths": {str: str}, "pathsFrom": [{"secretRef": {"name": str, "directoryPath": str},
                                                   "configMapRef": {"name": str, "directoryPath": str}}]},
    "directory": {"path": str},
    "manual": {},
}  # fmt: skip
_CONTENT_FIELDS: dict[str, Any] = {
    "path": str, "lazy": bool, "includePaths": [str], "excludePaths": [str], "ignorePaths": [str],
    "legalPaths": [str], "newRootPath": str, "permissions": "fs.FileMode",
}  # fmt: skip
_SETUID, _SETGID, _STICKY = 1 << 23, 1 << 22, 1 << 20  # Go's fs.ModeSetuid, ModeSetgid, ModeSticky


def unix_mode(file_mode: int) -> int:
    """The mode os.Chmod gives a file for an fs.FileMode: its permission bits, and Go's own setuid, setgid and sticky.

    Go's flags are high bits (`8389101` is setuid and 0755); the Unix bits written as a number (`0o4755`) are no flag
    of Go's, and os.Chmod drops them, as vendir does.
    """
    mode = file_mode & 0o777
    for flag, bit in ((_SETUID, stat.S_ISUID), (_SETGID, stat.S_ISGID), (_STICKY, stat.S_ISVTX)):
        if file_mode & flag:
            mode |= bit
    return mode


@dataclass(frozen=True, kw_only=True)
class Secret:
    """A v1 Secret from the stream: name, type and base64-decoded data."""

    name: str
    type: str
    data: dict[str, str]


@dataclass(frozen=True, kw_only=True)
class ConfigMap:
    """A v1 ConfigMap from the stream."""

    name: str
    data: dict[str, str]


@dataclass(frozen=True, kw_only=True)
class Content:
    """One DirectoryContents: common fields, the source type, and the source as decoded (known fields only)."""

    path: str
    source_type: str
    source: dict[str, Any]
    lazy: bool = False
    include_paths: tuple[str, ...] = ()
    exclude_paths: tuple[str, ...] = ()
    ignore_paths: tuple[str, ...] = ()
    legal_paths: tuple[str, ...] | None = None
    new_root_path: str = ""
    permissions: int | None = None

    def to_go(self) -> dict[str, Any]:
        """The sigs.k8s.io/yaml marshal of the Go struct: set fields only (omitempty)."""
        doc: dict[str, Any] = {"path": self.path, self.source_type: self.source}
        optional = {
            "lazy": self.lazy or None,
            "includePaths": list(self.include_paths) or None,
            "excludePaths": list(self.exclude_paths) or None,
            "ignorePaths": list(self.ignore_paths) or None,
            "legalPaths": None if self.legal_paths is None else list(self.legal_paths),
            "newRootPath": self.new_root_path or None,
            "permissions": self.permissions,
        }
        doc.update({k: v for k, v in optional.items() if v is not None})
        return doc


@dataclass(frozen=True, kw_only=True)
class Directory:
    """One Directory of the Config."""

    path: str
    contents: tuple[Content, ...]
    permissions: int | None = None

    def to_go(self) -> dict[str, Any]:
        """The marshal of the Go struct."""
        doc: dict[str, Any] = {"path": self.path, "contents": [c.to_go() for c in self.contents] or None}
        if self.permissions is not None:
            doc["permissions"] = self.permissions
        return doc


@dataclass(frozen=True, kw_only=True)
class Config:
    """The Config document."""

    minimum_required_version: str = ""
    directories: tuple[Directory, ...] = ()

    def to_go(self) -> dict[str, Any]:
        """The marshal of the whole Config, as vendir prints it in its `Config with …` blocks."""
        return {
            "apiVersion": API_VERSION,
            "kind": "Config",
            "minimumRequiredVersion": self.minimum_required_version,
            "directories": [d.to_go() for d in self.directories] or None,
        }


@dataclass(frozen=True, kw_only=True)
class InputStream:
    """Everything `-f` gave: the one Config, the Secrets and the ConfigMaps."""

    config: Config
    secrets: tuple[Secret, ...] = ()
    config_maps: tuple[ConfigMap, ...] = field(default_factory=tuple)

    def secret(self, name: str) -> Secret:
        """The Secret of that name, with vendir's errors."""
        found = [s for s in self.secrets if s.name == name]
        if not found:
            raise ConfigError(f"Expected to find one secret '{name}', but found none")
        return found[0]

    def config_map(self, name: str) -> ConfigMap:
        """The ConfigMap of that name, with vendir's errors."""
        found = [c for c in self.config_maps if c.name == name]
        if not found:
            raise ConfigError(f"Expected to find one config map '{name}', but found none")
        if len(found) > 1:
            raise ConfigError(f"Expected to find one config map '{name}', but found multiple")
        return found[0]


def _decode(schema: Any, value: Any, path: str) -> Any:  # noqa: ANN401, C901, PLR0911, PLR0912 - one branch per Go kind
    """Decode a value against a schema: str/bool/int leaves, dict structs, [x] lists, {str: str} maps."""
    if schema is str:
        return go_string_field(value, path)
    if schema is bool:
        return go_bool(value, path)
    if schema is int:
        return go_int(value, path)
    if schema == "fs.FileMode":
        return go_file_mode(value, path)
    if isinstance(schema, list):
        if value is None:
            return None
        if not isinstance(value, list):
            raise DecodeError(f"error unmarshaling JSON: while decoding JSON: json: cannot unmarshal into {path}")
        return [_decode(schema[0], item, f"{path}.{n}") for n, item in enumerate(value)]
    if isinstance(schema, dict) and set(schema) == {str}:
        if value is None:
            return None
        if not isinstance(value, dict):
            raise DecodeError(f"error unmarshaling JSON: while decoding JSON: json: cannot unmarshal into {path}")
        return {str(k): go_string_field(v, f"{path}.{k}") for k, v in value.items()}
    if value is None:
        return None
    if not isinstance(value, dict):
        raise DecodeError(f"error unmarshaling JSON: while decoding JSON: json: cannot unmarshal into {path}")
    decoded = {}
    for name, sub in schema.items():
        item = _decode(sub, get(value, name), f"{path}.{name}")
        is_map = isinstance(sub, dict) and set(sub) == {str}
        if not _omitted(item) and not (is_map and not item):
            decoded[name] = item
    return decoded


def _omitted(item: object) -> bool:
    """Go's omitempty: nil, "", false, 0 and empty lists go; an empty struct pointer (`{}`) stays."""
    return item is None or item == "" or item is False or item == [] or (isinstance(item, int) and item == 0)


def _source(value: dict[str, Any], path: str) -> tuple[list[str], dict[str, dict[str, Any]]]:
    found: list[str] = []
    sources: dict[str, dict[str, Any]] = {}
    for name in SOURCE_TYPES:
        raw = get(value, name)
        if raw is None and not any(go_fold(k) == name.lower() for k in value):
            continue
        found.append(name)
        if name in _SCHEMAS:
            sources[name] = _decode(_SCHEMAS[name], raw if raw is not None else {}, f"{path}.{name}") or {}
        else:
            sources[name] = raw if isinstance(raw, dict) else {}
    return found, sources


def _content(value: Any, path: str) -> tuple[Content, list[str]]:  # noqa: ANN401 - decoded YAML
    if not isinstance(value, dict):
        raise DecodeError(f"error unmarshaling JSON: while decoding JSON: json: cannot unmarshal into {path}")
    common = {name: _decode(kind, get(value, name), f"{path}.{name}") for name, kind in _CONTENT_FIELDS.items()}
    found, sources = _source(value, path)
    source_type = found[0] if found else ""
    legal = get(value, "legalPaths")
    content = Content(
        path=common["path"] or "",
        source_type=source_type,
        source=sources.get(source_type, {}),
        lazy=bool(common["lazy"]),
        include_paths=tuple(common["includePaths"] or ()),
        exclude_paths=tuple(common["excludePaths"] or ()),
        ignore_paths=tuple(common["ignorePaths"] or ()),
        legal_paths=None
        if legal is None and not any(go_fold(k) == "legalpaths" for k in value)
        else tuple(common["legalPaths"] or ()),
        new_root_path=common["newRootPath"] or "",
        permissions=common["permissions"],
    )
    return content, found


def _directory(value: Any, index: int) -> tuple[Directory, list[list[str]]]:  # noqa: ANN401 - decoded YAML
    path = f".directories.{index}"
    if not isinstance(value, dict):
        raise DecodeError(f"error unmarshaling JSON: while decoding JSON: json: cannot unmarshal into {path}")
    raw_contents = get(value, "contents") or []
    if not isinstance(raw_contents, list):
        raise DecodeError(f"error unmarshaling JSON: while decoding JSON: json: cannot unmarshal into {path}.contents")
    parsed = [_content(c, f"{path}.contents.{n}") for n, c in enumerate(raw_contents)]
    directory = Directory(
        path=go_string_field(get(value, "path"), f"{path}.path"),
        contents=tuple(c for c, _ in parsed),
        permissions=go_file_mode(get(value, "permissions"), f"{path}.permissions"),
    )
    return directory, [found for _, found in parsed]


def _check_version(minimum: str) -> None:
    if not minimum:
        return
    if minimum.startswith("v"):
        raise ConfigError("Validating minimum version: Must not have prefix 'v' (e.g. '0.8.0')")
    try:
        wanted = tuple(int(p) for p in minimum.split("+", 1)[0].split("-", 1)[0].split("."))
    except ValueError:
        raise ConfigError(f"Parsing minimum version constraint: Malformed constraint: >={minimum}") from None
    ours = tuple(int(p) for p in VENDIR_COMPAT_VERSION.split("."))
    if ours < wanted + (0,) * (3 - len(wanted)):
        raise ConfigError(
            f"vendir version '{VENDIR_COMPAT_VERSION}' does not meet the minimum required version '{minimum}'"
        )


def _overlap(paths: Sequence[str]) -> str | None:
    """Vendir's check, in its iteration order: B overlaps A when B + "/" starts with A + "/"."""
    for i, shorter in enumerate(paths):
        for j, longer in enumerate(paths):
            if i != j and (longer + "/").startswith(shorter + "/"):
                return f"Expected to not manage overlapping paths: '{longer}' and '{shorter}'"
    return None


def validate(config: Config, found: Sequence[Sequence[Sequence[str]]]) -> None:  # noqa: C901 - vendir's order, rule by rule
    """Vendir's validation, in its order, on the raw paths; raises ConfigError `Validating config: …`."""
    try:
        _check_version(config.minimum_required_version)
    except ConfigError as exc:
        raise ConfigError(f"Validating config: {exc.message}") from None
    for i, directory in enumerate(config.directories):
        where = f"Validating config: Validating directory '{directory.path}' ({i})"
        if directory.path in _DISALLOWED:
            raise ConfigError(f"{where}: Expected path to not be one of '/', '.', '..', ''")
        if any(c.path == "." for c in directory.contents) and len(directory.contents) > 1:
            raise ConfigError(f"{where}: Expected only one directory contents if path is set to '.'")
        for j, content in enumerate(directory.contents):
            inner = f"{where}: Validating directory contents '{content.path}' ({j})"
            kinds = found[i][j] if found else [content.source_type]
            if not kinds:
                raise ConfigError(
                    f"{inner}: Expected directory contents type to be specified (one of git, manual, etc.)"
                )
            if len(kinds) > 1:
                listed = ", ".join(kinds)
                raise ConfigError(
                    f"{inner}: Expected exactly one directory contents type to be specified (multiple found: {listed})"
                )
            if content.path in _DISALLOWED - {"."}:
                raise ConfigError(f"{inner}: Expected path to not be one of '/', '.', '..', ''")
    problem = _overlap([d.path for d in config.directories])
    for directory in config.directories:
        # Go's filepath.Join cleans: `a/..` and `b` overlap as `v` and `v/b`
        problem = problem or _overlap([posixpath.normpath(posixpath.join(directory.path, c.path))
                                       for c in directory.contents])  # fmt: skip
    if problem:
        raise ConfigError(f"Validating config: {problem}")


def _clean(config: Config) -> Config:
    """filepath.Clean on directory and content paths, after validation."""
    return replace(
        config,
        directories=tuple(
            replace(d, path=posixpath.normpath(d.path),
                    contents=tuple(replace(c, path=posixpath.normpath(c.path)) for c in d.contents))
            for d in config.directories
        ),
    )  # fmt: skip


def parse_config_document(doc: dict[str, Any]) -> Config:
    """Decode and validate a Config document (errors are `Unmarshaling config: …`)."""
    raw_dirs = get(doc, "directories") or []
    if not isinstance(raw_dirs, list):
        raise DecodeError("error unmarshaling JSON: while decoding JSON: json: cannot unmarshal into .directories")
    parsed = [_directory(d, n) for n, d in enumerate(raw_dirs)]
    config = Config(
        minimum_required_version=go_string_field(get(doc, "minimumRequiredVersion"), ".minimumRequiredVersion"),
        directories=tuple(d for d, _ in parsed),
    )
    validate(config, [found for _, found in parsed])
    return _clean(config)


def _secret(doc: dict[str, Any]) -> Secret:
    """A v1 Secret: `data` values are base64 decoded strictly, as Go's encoding/json decodes a []byte field."""
    metadata = get(doc, "metadata") or {}
    name = go_string_field(get(metadata, "name"), ".metadata.name")
    data: dict[str, str] = {}
    for key, value in (get(doc, "data") or {}).items():
        decoded = go_bytes(value, f".data.{key}")
        try:
            data[str(key)] = decoded.decode()
        except UnicodeDecodeError:
            raise DecodeError(f"secret '{name}' key '{key}': the decoded value is not UTF-8 text") from None
    return Secret(name=name, type=go_string_field(get(doc, "type"), ".type"), data=data)


def _config_map(doc: dict[str, Any]) -> ConfigMap:
    metadata = get(doc, "metadata") or {}
    data = {str(k): go_string_field(v, f".data.{k}") for k, v in (get(doc, "data") or {}).items()}
    return ConfigMap(name=go_string_field(get(metadata, "name"), ".metadata.name"), data=data)


_UNMARSHALING = {
    "Secret": "Unmarshaling secret",
    "ConfigMap": "Unmarshaling config map",
    "Config": "Unmarshaling config",
}


_RESOURCE_FIELDS = frozenset({"apiversion", "kind"})  # vendir's `resource` struct: its string fields, folded


def _not_finite(value: object, *, into_string: bool = False) -> str | None:
    """json.Marshal's name for the first float it refuses in `value` (sorted keys, as it walks a map), or None.

    A float that goes into a string field was made a string before (`+Inf` and `NaN` are texts there).
    """
    if isinstance(value, float):
        if into_string or value - value == 0:
            return None
        return "NaN" if value != value else ("+Inf" if value > 0 else "-Inf")  # noqa: PLR0124 - NaN
    children = [value[key] for key in sorted(value)] if isinstance(value, dict) else value
    if isinstance(children, list):
        for child in children:
            if (found := _not_finite(child)) is not None:
                return found
    return None


def unsupported_value(doc: object) -> str | None:
    """Why vendir's first decode of a document, into its `resource` struct (apiVersion, kind), fails: or None.

    sigs.k8s.io/yaml turns the document into JSON before encoding/json decodes it. A number goes into JSON as a
    number, except where a string field takes it; and JSON has no infinity or NaN: a `.inf` or `.nan` anywhere else
    in the document is json.Marshal's error, whatever the document is (vendir: `Unmarshaling doc: …`).
    """
    found = None if isinstance(doc, dict) else _not_finite(doc)
    for key, value in sorted(doc.items()) if isinstance(doc, dict) else ():
        scalar_field = not isinstance(value, dict | list) and go_fold(key) in _RESOURCE_FIELDS
        if (found := _not_finite(value, into_string=scalar_field)) is not None:
            break
    return None if found is None else f"error converting YAML to JSON: json: unsupported value: {found}"


def _dispatch(doc: object, source: str, found: dict[str, list[Any]]) -> None:
    prefix = f"Parsing resource config '{source}'"
    if (unsupported := unsupported_value(doc)) is not None:
        raise ConfigError(f"{prefix}: Unmarshaling doc: {unsupported}")
    mapping = doc if isinstance(doc, dict) else {}
    api = go_string_field(get(mapping, "apiVersion"), "resource.apiVersion")  # vendir's `resource` struct
    kind = go_string_field(get(mapping, "kind"), "resource.kind")
    if (api, kind) not in {("v1", "Secret"), ("v1", "ConfigMap"), (API_VERSION, "Config")}:
        raise ConfigError(f"{prefix}: Unknown apiVersion '{api}' or kind '{kind}' for resource")
    what = _UNMARSHALING[kind]
    try:
        if (api, kind) == ("v1", "Secret"):
            found["secrets"].append(_secret(mapping))
        elif (api, kind) == ("v1", "ConfigMap"):
            found["config_maps"].append(_config_map(mapping))
        else:
            found["configs"].append(parse_config_document(mapping))
    except DecodeError as exc:  # a Config's is wrapped twice, by NewConfigFromBytes and its caller (spec §2.3)
        twice = f"{what}: {what}" if kind == "Config" else what
        raise ConfigError(f"{prefix}: {twice}: {exc}") from None
    except ConfigError as exc:
        if exc.message.startswith(prefix):
            raise
        raise ConfigError(f"{prefix}: {what}: {exc.message}") from None


def _dedupe_secrets(secrets: list[Secret]) -> tuple[Secret, ...]:
    unique: dict[str, Secret] = {}
    for secret in secrets:
        known = unique.get(secret.name)
        if known is not None and known != secret:
            raise ConfigError(f"Expected to find one secret '{secret.name}', but found multiple")
        unique[secret.name] = secret
    return tuple(unique.values())


def parse_stream(sources: Sequence[tuple[str, str | bytes]]) -> InputStream:
    """Parse `(name, text)` inputs in order (`-` for stdin) into the one Config plus Secrets and ConfigMaps."""
    found: dict[str, list[Any]] = {"configs": [], "secrets": [], "config_maps": []}
    for name, text in sources:
        try:
            for doc in load_documents(text):  # one at a time, as vendir: a document's error before a later one's
                _dispatch(doc, name, found)
        except SeparatorError as exc:  # the Kubernetes reader's own error: vendir names the file, not a resource
            raise ConfigError(f"Parsing config '{name}': {exc}") from None
        except DecodeError as exc:
            raise ConfigError(f"Parsing resource config '{name}': Unmarshaling doc: {exc}") from None
    if not found["configs"]:
        raise ConfigError("Expected to find at least one config, but found none")
    if len(found["configs"]) > 1:
        raise ConfigError("Expected to find exactly one config, but found multiple")
    return InputStream(
        config=found["configs"][0],
        secrets=_dedupe_secrets(found["secrets"]),
        config_maps=tuple(found["config_maps"]),
    )


def config_digest(content: Content) -> str:
    """Vendir's configDigest: sha256 of the marshalled content (set fields only, sorted)."""
    return hashlib.sha256(emit.dump(content.to_go())).hexdigest()
