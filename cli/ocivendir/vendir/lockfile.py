"""Owns: vendir's LockConfig.

The model, its byte-exact YAML (through goyaml), reading with vendir's messages, and the merge used by `-d`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ocivendir.errors import ConfigError, SyncError
from ocivendir.goyaml import emit
from ocivendir.goyaml.load import DecodeError, load_documents
from ocivendir.goyaml.load import field as get
from ocivendir.vendir.config import API_VERSION

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

__all__ = ["LockConfig", "LockContent", "LockDirectory", "parse_lock"]


@dataclass(frozen=True, kw_only=True)
class LockContent:
    """One content's lock entry: its path, its source type and that source's lock data (kept verbatim)."""

    path: str
    source_type: str
    data: dict[str, Any] = field(default_factory=dict)
    config_digest: str = ""

    def to_go(self) -> dict[str, Any]:
        """The marshal of the Go struct."""
        doc: dict[str, Any] = {"path": self.path, self.source_type: self.data}
        if self.config_digest:
            doc["configDigest"] = self.config_digest
        return doc


@dataclass(frozen=True, kw_only=True)
class LockDirectory:
    """One directory's lock entries."""

    path: str
    contents: tuple[LockContent, ...]


@dataclass(frozen=True, kw_only=True)
class LockConfig:
    """The lock file."""

    directories: tuple[LockDirectory, ...] = ()

    def dump(self) -> bytes:
        """The exact bytes vendir writes (and prints on stdout), read back first: other data read is a SyncError."""
        doc = {
            "apiVersion": API_VERSION,
            "kind": "LockConfig",
            "directories": [
                {"path": d.path, "contents": [c.to_go() for c in d.contents] or None} for d in self.directories
            ]
            or None,
        }
        try:
            return emit.dump_checked(doc)
        except emit.EmitError as exc:
            raise SyncError(f"Writing lock config: {exc}") from None

    def find(self, directory: str, content: str) -> LockContent:
        """The entry for `(dir.path, content.path)`, with vendir's `--locked` messages."""
        for d in self.directories:
            if d.path == directory:
                for c in d.contents:
                    if c.path == content:
                        return c
                msg = (
                    f"Expected to find contents '{content}' within directory '{directory}' in lock config, but did not"
                )
                raise ConfigError(msg)
        raise ConfigError(f"Expected to find directory '{directory}' within lock config, but did not")

    def entry(self, directory: str, content: str) -> LockContent | None:
        """The entry if present."""
        try:
            return self.find(directory, content)
        except ConfigError:
            return None

    def merged_into(self, base: LockConfig) -> LockConfig:
        """This lock's entries merged into an existing lock (`-d`)."""
        return base.merged(self)

    def merged(self, other: LockConfig) -> LockConfig:
        """Vendir's LockConfig.Merge: replace same dir/content entries, else append to the directory, else add it."""
        directories = [LockDirectory(path=d.path, contents=d.contents) for d in self.directories]
        for new_dir in other.directories:
            position = next((n for n, d in enumerate(directories) if d.path == new_dir.path), None)
            if position is None:
                directories.append(new_dir)
                continue
            contents = list(directories[position].contents)
            for new in new_dir.contents:
                spot = next((n for n, c in enumerate(contents) if c.path == new.path), None)
                if spot is None:
                    contents.append(new)
                else:
                    contents[spot] = new
            directories[position] = LockDirectory(path=new_dir.path, contents=tuple(contents))
        return LockConfig(directories=tuple(directories))


_SOURCES = ("git", "hg", "http", "image", "imgpkgBundle", "githubRelease", "helmChart", "manual", "directory", "inline")


def _content(raw: dict[str, Any]) -> LockContent:
    source_type = next((s for s in _SOURCES if get(raw, s) is not None), "")
    data = get(raw, source_type) if source_type else {}
    return LockContent(
        path=str(get(raw, "path") or ""),
        source_type=source_type,
        data=data if isinstance(data, dict) else {},
        config_digest=str(get(raw, "configDigest") or ""),
    )


def parse_lock(text: str | bytes, where: str) -> LockConfig:
    """Read a lock file; errors carry vendir's messages (`Unmarshaling lock config: …`, `Validating lock config: …`)."""
    try:
        documents = list(load_documents(text))
    except DecodeError as exc:
        raise ConfigError(f"Unmarshaling lock config: {exc}") from None
    doc = documents[0] if documents and isinstance(documents[0], dict) else {}
    if get(doc, "apiVersion") != API_VERSION:
        raise ConfigError(f"Validating lock config: Validating apiVersion: Unknown version (known: {API_VERSION})")
    if get(doc, "kind") != "LockConfig":
        raise ConfigError("Validating lock config: Validating kind: Unknown kind (known: LockConfig)")
    directories = []
    for raw_dir in get(doc, "directories") or []:
        if not isinstance(raw_dir, dict):
            raise ConfigError(f"Unmarshaling lock config '{where}': invalid directory entry")
        contents = tuple(_content(c) for c in get(raw_dir, "contents") or [] if isinstance(c, dict))
        directories.append(LockDirectory(path=str(get(raw_dir, "path") or ""), contents=contents))
    return LockConfig(directories=tuple(directories))
