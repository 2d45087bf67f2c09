"""Owns: the endpoint plan registries.yaml gives each repository (the file is read by `registry/registriesyaml.py`).

Pure, and free of PyYAML, so a tag's HEAD does not load a YAML parser. `plan.endpoints(repository)` lists where to
ask, in order: the registry's mirror endpoints (`mirrors["<registry>"]`, else `mirrors["*"]`), with the mirror's
`rewrite` rules applied to the repository path, then the registry itself (its default endpoint, never rewritten), as
k3s/containerd do. Each endpoint carries the `configs` entry of its host (else `configs["*"]`): credentials, TLS
files, and ocivendir's `concurrency` cap.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from ocivendir.oci.reference import DEFAULT_REGISTRY, Repository
from ocivendir.record import field, record
from ocivendir.registry.credentials import Credential

TYPE_CHECKING = False
if TYPE_CHECKING:
    import re

__all__ = ["WILDCARD", "Endpoint", "HostConfig", "Mirror", "MirrorPlan", "TLSFiles", "normal_host"]

WILDCARD = "*"
_DOCKER_HUB = frozenset({"docker.io", "index.docker.io", "registry-1.docker.io"})
_PATTERNS: list[re.Pattern[str]] = []  # a repository name, a Go template group: compiled at the first rewrite


def _patterns() -> list[re.Pattern[str]]:
    """`[repository name, template group]`; `re` loads only for a plan with rewrites (a tag's HEAD needs none)."""
    if not _PATTERNS:
        import re  # noqa: PLC0415

        _PATTERNS.append(re.compile(r"[a-z0-9]+(?:[._-]+[a-z0-9]+)*(?:/[a-z0-9]+(?:[._-]+[a-z0-9]+)*)*"))
        _PATTERNS.append(re.compile(r"\$(\$|\{([A-Za-z0-9_]+)\}|([A-Za-z0-9_]+))"))
    return _PATTERNS


@record
class TLSFiles:
    """A host's `tls` entry: CA added to the system set, client certificate and key, or no verification at all."""

    ca_file: str = ""
    cert_file: str = ""
    key_file: str = ""
    insecure_skip_verify: bool = False


@record
class HostConfig:
    """A `configs` entry: credentials (never printed), TLS, and the cap on concurrent requests to the host."""

    auth: Credential | None = field(default=None, repr=False)
    tls: TLSFiles | None = None
    concurrency: int | None = None


@record
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


@record
class Mirror:
    """A registry's mirror endpoints (scheme, host, API root) and its path rewrite rules, in file order."""

    urls: tuple[tuple[str | None, str, str], ...]  # (scheme, host, root)
    rewrites: tuple[tuple[re.Pattern[str], str], ...] = ()


@record
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
        path = _rewrite(mirror.rewrites, repo.path)
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


def _go_template(template: str) -> Callable[[re.Match[str]], str]:
    """Go's regexp.Expand: `$1`, `${1}`, `$name`, `${name}`, `$$`; an unknown group is empty."""

    def expand(match: re.Match[str]) -> str:
        def one(ref: re.Match[str]) -> str:
            if ref.group(1) == "$":
                return "$"
            name = ref.group(2) or ref.group(3)
            try:
                value = match.group(int(name) if name.isdigit() else name)
            except IndexError:  # no such group: Go expands it to nothing
                return ""
            return value or ""

        return _patterns()[1].sub(one, template)

    return expand


def _rewrite(rewrites: tuple[tuple[re.Pattern[str], str], ...], path: str) -> str:
    """The first rule (in file order) that changes the path and gives a valid repository name wins."""
    for pattern, template in rewrites:
        changed = pattern.sub(_go_template(template), path)
        if changed != path and _patterns()[0].fullmatch(changed):
            return changed
    return path
