"""Owns: the image reference grammar, Docker Hub normalisation, canonical names and the Digest value type.

Parsing follows go-containerregistry's `pkg/name` in its weak (default) mode, which imgpkg and vendir use: the
first path component is a registry only if it contains `.` or `:`, `docker.io` becomes `index.docker.io`, a Docker
Hub repository without `/` gets `library/`, and a `repo:tag@digest` reference keeps only the digest.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from ocivendir.errors import BadReference

__all__ = [
    "DEFAULT_REGISTRY",
    "Digest",
    "Reference",
    "Repository",
    "is_loopback",
    "is_plain_http_host",
    "parse_digest",
    "parse_reference",
    "vendir_tag",
    "without_credentials",
]

DEFAULT_REGISTRY = "index.docker.io"
_DOCKER_HUB_ALIASES = frozenset({"docker.io", DEFAULT_REGISTRY})
# character sets of the grammar, checked with str.strip (no regular expression to compile on every run)
_DIGITS = "0123456789"
_LOWER_HEX = _DIGITS + "abcdef"
_LOWER_ALNUM = _DIGITS + "abcdefghijklmnopqrstuvwxyz"
_ALNUM = _LOWER_ALNUM + "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
_REPO_CHARS = _LOWER_ALNUM + "_./-"
_TAG_CHARS = _ALNUM + "_.-"
_MAX_TAG, _MAX_LABEL, _MAX_PORT_DIGITS, _MAX_PORT = 128, 63, 5, 65535
_RFC1918 = ("10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16")


@dataclass(frozen=True, order=True)
class Digest:
    """A sha256 content digest, `sha256:` + 64 lowercase hex."""

    hex: str

    def __str__(self) -> str:
        """The `sha256:<hex>` form."""
        return f"sha256:{self.hex}"

    @property
    def tag_form(self) -> str:
        """The `sha256-<hex>` form imgpkg uses in tags and nested bundle directories."""
        return f"sha256-{self.hex}"


@lru_cache(maxsize=256)  # a pure function of the text; its answer is frozen (errors are not kept)
def parse_digest(text: str) -> Digest:
    """Parse `sha256:<64 lowercase hex>`; anything else raises BadReference."""
    algorithm, sep, hex_part = text.partition(":")
    if not sep:
        raise BadReference(f"invalid digest '{text}': expected sha256:<64 hex>")
    if algorithm != "sha256":
        raise BadReference(f"unsupported digest algorithm: {text}")
    if len(hex_part) != 64 or hex_part.strip(_LOWER_HEX):  # noqa: PLR2004 - sha256
        raise BadReference(f"invalid digest '{text}': expected 64 lowercase hex characters")
    return Digest(hex_part)


@dataclass(frozen=True, order=True)
class Repository:
    """A fully qualified repository: registry host[:port] and path."""

    registry: str
    path: str

    def __str__(self) -> str:
        """`<registry>/<path>`."""
        return f"{self.registry}/{self.path}"

    @property
    def api_host(self) -> str:
        """The host to talk to: Docker Hub's API lives at registry-1.docker.io."""
        return "registry-1.docker.io" if self.registry == DEFAULT_REGISTRY else self.registry

    def at(self, digest: Digest) -> Reference:
        """This repository's reference for a digest."""
        return Reference(repository=self, tag=None, digest=digest)

    def tagged(self, tag: str) -> Reference:
        """This repository's reference for a tag."""
        return Reference(repository=self, tag=tag, digest=None)


@dataclass(frozen=True)
class Reference:
    """A parsed reference: a repository plus a tag or a digest (a digest wins; the tag is then dropped)."""

    repository: Repository
    tag: str | None
    digest: Digest | None

    @property
    def identifier(self) -> str:
        """The manifest identifier sent to the registry: the digest, else the tag."""
        if self.digest is not None:
            return str(self.digest)
        return self.tag or "latest"

    def __str__(self) -> str:
        """The canonical form: `<registry>/<repo>@sha256:<hex>` or `<registry>/<repo>:<tag>`."""
        if self.digest is not None:
            return f"{self.repository}@{self.digest}"
        return f"{self.repository}:{self.tag or 'latest'}"

    def same_repository(self, other: Reference) -> bool:
        """True when both name the same registry host and repository path."""
        return self.repository == other.repository


def _split_registry(name: str) -> tuple[str, str]:
    head, sep, rest = name.partition("/")
    if sep and ("." in head or ":" in head):
        return head, rest
    return DEFAULT_REGISTRY, name


def _only(text: str, chars: str) -> bool:
    """`text` is not empty and made of `chars` only."""
    return bool(text) and not text.strip(chars)


def _is_label(label: str) -> bool:
    """A DNS label: 1-63 ASCII letters, digits and inner hyphens."""
    return len(label) <= _MAX_LABEL and _only(label, _ALNUM + "-") and label[0] != "-" and label[-1] != "-"


def _valid_host(registry: str) -> bool:
    """`[ipv6]` or dot-separated DNS labels, then an optional `:port` of 1-5 digits up to 65535."""
    if registry.startswith("["):
        inner, bracket, after = registry[1:].partition("]")
        if not bracket or not _only(inner, _DIGITS + "abcdefABCDEF:."):
            return False
        colon, port = after[:1], after[1:]
        if colon not in {"", ":"}:
            return False
    else:
        host, colon, port = registry.partition(":")
        if not all(_is_label(label) for label in host.split(".")):
            return False
    if not colon:
        return True
    return len(port) <= _MAX_PORT_DIGITS and _only(port, _DIGITS) and int(port) <= _MAX_PORT


def _check_registry(registry: str, original: str) -> str:
    """A host (no empty or over-long DNS label) and a port up to 65535: no URL built from it can fail to parse."""
    if not _valid_host(registry):
        raise BadReference(f"could not parse reference: {original}", hint=f"'{registry}' is not a valid registry host")
    return DEFAULT_REGISTRY if registry in _DOCKER_HUB_ALIASES else registry


def _check_repository(repo: str, original: str) -> None:
    if not 2 <= len(repo) <= 255 or not _only(repo, _REPO_CHARS):  # noqa: PLR2004 - ggcr's bounds
        raise BadReference(f"could not parse reference: {original}")
    if any(part in {"", ".", ".."} for part in repo.split("/")):  # the distribution grammar's path components
        raise BadReference(
            f"could not parse reference: {original}", hint="repository path components cannot be empty, '.' or '..'"
        )


@lru_cache(maxsize=256)  # a pure function of the text; its answer is frozen (errors are not kept)
def parse_reference(text: str) -> Reference:
    """Parse a reference the way go-containerregistry's weak validation does, or raise BadReference."""
    original = without_credentials(text)  # what messages show: never a password someone wrote into it
    if not text or text != text.strip() or "://" in text:
        raise BadReference(f"could not parse reference: {original}")
    digest: Digest | None = None
    if "@" in text:
        if original != text:
            raise BadReference(
                f"could not parse reference: {original}: a reference holds no credentials",
                hint="give them as --registry-username/--registry-password, IMGPKG_REGISTRY_* variables, a Secret "
                "or the docker config",
            )
        text, _, digest_text = text.partition("@")
        if "@" in digest_text:
            raise BadReference(f"could not parse reference: {original}")
        digest = parse_digest(digest_text)
    tag: str | None = None
    colon = text.rfind(":")
    if colon != -1 and "/" not in text[colon + 1 :]:
        text, tag = text[:colon], text[colon + 1 :]
        if len(tag) > _MAX_TAG or not _only(tag, _TAG_CHARS):
            raise BadReference(f"could not parse reference: {original}")
    registry, repo = _split_registry(text)
    registry = _check_registry(registry, original)
    _check_repository(repo, original)
    if registry == DEFAULT_REGISTRY and "/" not in repo:
        repo = f"library/{repo}"
    return Reference(repository=Repository(registry, repo), tag=None if digest else tag, digest=digest)


def without_credentials(text: str) -> str:
    """`text` with the user info of `user:password@host/repo` shown as `<credentials>` (a reference holds none)."""
    scheme, sep, after = text.rpartition("://")
    user, at, rest = after.partition("@")
    if at and "/" not in user and "/" in rest:  # an `@` before the first `/`: not a digest, which ends a reference
        return f"{scheme}{sep}<credentials>@{rest}"
    return text


def _digest_suffix(text: str) -> bool:
    """`[0-9a-z]+:[0-9a-z]+`, the digest part vendir's guessed reference allows."""
    algorithm, colon, hex_part = text.partition(":")
    return bool(colon) and _only(algorithm, _LOWER_ALNUM) and _only(hex_part, _LOWER_ALNUM)


@lru_cache(maxsize=256)  # a pure function of the text (a worker's App sends the same one every call)
def vendir_tag(url: str) -> str | None:
    """The tag vendir records in its lock for a reference as written (vendir-compat §6.3); never defaulted.

    vendir's pkg/vendir/fetch/image/guessed_ref.go matches `\\A(.+?)(:[0-9a-zA-Z_\\-\\.]+)?(@[0-9a-z]+:[0-9a-z]+)?\\Z`:
    the name is the shortest prefix after which only `:tag`, `@digest` or both remain.
    """
    if "\n" in url:  # `.` does not match a newline
        return None
    for start in range(1, len(url)):
        rest = url[start:]
        if rest.startswith("@") and _digest_suffix(rest[1:]):
            return None
        if rest.startswith(":"):
            tag, at, digest = rest[1:].partition("@")
            if _only(tag, _TAG_CHARS) and (not at or _digest_suffix(digest)):
                return tag
    return None


def _host_only(registry: str) -> str:
    if registry.startswith("["):
        return registry[1 : registry.index("]")]
    return registry.rsplit(":", 1)[0] if registry.count(":") == 1 else registry


def is_loopback(host: str) -> bool:
    """localhost, 127.0.0.0/8 or ::1 (brackets and case ignored): never proxied, and a mirror's default scheme."""
    host = host.strip("[]").lower()
    if host == "localhost":
        return True
    import ipaddress  # noqa: PLC0415 - only a connection needs it (ipaddress alone costs more than a warm sync's work)

    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _plain_ipv4(a: int, b: int, c: int, d: int) -> bool:
    """Loopback (127/8) or RFC 1918 (10/8, 172.16/12, 192.168/16), as `ipaddress` says for a valid address."""
    if max(a, b, c, d) > 255:  # noqa: PLR2004 - not an address: ipaddress refuses it
        return False
    return a in {10, 127} or (a == 172 and 16 <= b <= 31) or (a == 192 and b == 168)  # noqa: PLR2004


def is_plain_http_host(registry: str) -> bool:
    """True for the hosts go-containerregistry lets fall back to plain HTTP: loopback, localhost, *.local, RFC 1918."""
    host = _host_only(registry).lower()
    if host == "localhost" or host.endswith((".localhost", ".local")):
        return True
    octets = host.split(".")
    if len(octets) == 4 and all(o.isascii() and o.isdigit() and o == str(int(o)) for o in octets):  # noqa: PLR2004
        return _plain_ipv4(*(int(o) for o in octets))
    import ipaddress  # noqa: PLC0415 - only for IPv6 (or an odd form): a dotted IPv4 address is read above

    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return False
    return address.is_loopback or any(address in ipaddress.ip_network(network) for network in _RFC1918)
