"""Owns: the endpoint plan registries.yaml gives each repository (the file is read by `registry/registriesyaml.py`).

Pure, and free of PyYAML, so a tag's HEAD does not load a YAML parser. `plan.endpoints(repository)` lists where to
ask, in order: the registry's mirror endpoints (`mirrors["<registry>"]`, else `mirrors["*"]`), with the mirror's
`rewrite` rules applied to the repository path, then the registry itself (its default endpoint, never rewritten), as
k3s/containerd do. Each endpoint carries the `configs` entry of its host (else `configs["*"]`): credentials, TLS
files, and ocivendir's `concurrency` cap.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from ocivendir.oci.reference import DEFAULT_REGISTRY, Repository
from ocivendir.registry.credentials import Credential

TYPE_CHECKING = False
if TYPE_CHECKING:
    from ocivendir.registry.rewrite import Rewrite

__all__ = ["WILDCARD", "Endpoint", "HostConfig", "Mirror", "MirrorPlan", "TLSFiles", "normal_host"]

WILDCARD = "*"
_DOCKER_HUB = frozenset({"docker.io", "index.docker.io", "registry-1.docker.io"})


@dataclass(frozen=True, kw_only=True)
class TLSFiles:
    """A host's `tls` entry: CA added to the system set, client certificate and key, or no verification at all."""

    ca_file: str = ""
    cert_file: str = ""
    key_file: str = ""
    insecure_skip_verify: bool = False


@dataclass(frozen=True, kw_only=True)
class HostConfig:
    """A `configs` entry: credentials (never printed), TLS, and the cap on concurrent requests to the host."""

    auth: Credential | None = field(default=None, repr=False)
    tls: TLSFiles | None = None
    concurrency: int | None = None


@dataclass(frozen=True, kw_only=True)
class Endpoint:
    """One place to ask for a repository: a mirror (rewritten path, its own config) or the origin registry."""

    registry: str
    host: str
    scheme: str | None
    root: str
    path: str
    mirror: bool
    config: HostConfig = field(default_factory=HostConfig)

    @property
    def name(self) -> str:
        """How reports name it: the origin by its registry name, a mirror by its URL."""
        if not self.mirror:
            return self.registry
        root = "" if self.root == "/v2" else self.root
        return f"{self.scheme or 'https'}://{self.host}{root}"

    def api_path(self, suffix: str) -> str:
        """The request path for `suffix` (`manifests/<ref>`, `blobs/<digest>`, `tags/list?n=…`)."""
        return f"{self.root}/{self.path}/{suffix}"


@dataclass(frozen=True, kw_only=True)
class Mirror:
    """A registry's mirror endpoints (scheme, host, API root) and its path rewrite rules, in file order."""

    urls: tuple[tuple[str | None, str, str], ...]  # (scheme, host, root)
    rewrites: tuple[Rewrite, ...] = ()  # registry/rewrite.py: Go's regexp (RE2) and ReplaceAllString


@dataclass(frozen=True, kw_only=True)
class MirrorPlan:
    """The parsed file: mirrors per registry and configs per host (`*` entries apply where no other does)."""

    mirrors: Mapping[str, Mirror] = field(default_factory=dict)
    configs: Mapping[str, HostConfig] = field(default_factory=dict)
    source: str = ""

    def config_for(self, host: str) -> HostConfig:
        """The `configs` entry of a host (Docker Hub's names are one), else the `*` entry, else none."""
        key = normal_host(host)
        return self.configs.get(key) or self.configs.get(WILDCARD) or HostConfig()

    def endpoints(self, repo: Repository) -> tuple[Endpoint, ...]:
        """Where to ask for `repo`, in order: its mirrors (rewritten), then its own registry."""
        origin = Endpoint(
            registry=repo.registry,
            host=repo.api_host, scheme=None, root="/v2", path=repo.path, mirror=False,
            config=self.config_for(repo.registry),
        )  # fmt: skip
        mirror = self.mirrors.get(normal_host(repo.registry)) or self.mirrors.get(WILDCARD)
        if mirror is None:
            return (origin,)
        path = repo.path
        if mirror.rewrites:
            from ocivendir.registry.rewrite import rewrite_path  # noqa: PLC0415 - RE2 loads only for rewrites

            path = rewrite_path(mirror.rewrites, repo.path)
        found = []
        for scheme, host, root in mirror.urls:
            if normal_host(host) == normal_host(repo.registry) and root == "/v2" and scheme in {None, "https"}:
                continue  # the default endpoint: always last, never rewritten (k3s)
            config = self.config_for(host)
            found.append(
                Endpoint(
                    registry=repo.registry, host=host, scheme=scheme, root=root, path=path, mirror=True, config=config
                )
            )
        return (*found, origin)

    @property
    def caps(self) -> dict[str, int]:
        """The concurrency caps set per host."""
        return {host: c.concurrency for host, c in self.configs.items() if c.concurrency is not None}


def normal_host(host: str) -> str:
    """A host as the plan keys it: lower case, Docker Hub's names as one."""
    lowered = host.lower()
    return DEFAULT_REGISTRY if lowered in _DOCKER_HUB else lowered
