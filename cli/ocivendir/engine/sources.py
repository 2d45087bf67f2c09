"""Owns: the sources a vendir content can have.

How each one fills a staged content directory and what it puts in the lock. Dispatch is by mapping from the source
type; there is no chain of ifs over types.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass

from ocivendir.engine.content import ClientSpec, Content
from ocivendir.engine.image import extract_layers, fetch_image
from ocivendir.engine.pull import BundlePuller, PullOptions, PullTally
from ocivendir.errors import ConfigError, IndexNotSupported, NotABundle, SyncError, os_reason
from ocivendir.fs.extract import TreePolicy
from ocivendir.fs.paths import pure, scoped_path, split
from ocivendir.oci.reference import parse_reference, vendir_tag, without_credentials
from ocivendir.registry.credentials import CredentialRules, secret_rules
from ocivendir.results import LogEvent
from ocivendir.vendir.config import Content as ContentConfig
from ocivendir.vendir.config import InputStream
from ocivendir.vendir.lockfile import LockContent

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

__all__ = ["SOURCES", "FetchContext", "client_spec", "describe", "select_reference", "source_for"]


@dataclass(frozen=True, kw_only=True)
class FetchContext:
    """What a source needs to fill one content directory."""

    content: Content
    stream: InputStream
    cwd: str
    umask: int
    relocation_recheck: float
    directory_path: str
    existing: str  # the on-disk `<dir>/<content>` (manual copies it)
    preresolved_tag: str | None = None


if TYPE_CHECKING:
    Source = Callable[[ContentConfig, FetchContext, str], dict[str, Any]]


def _credentials(stream: InputStream, spec: dict[str, Any]) -> CredentialRules | None:
    ref = spec.get("secretRef") or {}
    if not ref.get("name"):
        return None
    secret = stream.secret(str(ref["name"]))
    return secret_rules(secret.name, secret.type, secret.data)


def client_spec(stream: InputStream, spec: dict[str, Any], url: str) -> ClientSpec:
    """One content's client: its secretRef's credentials, dangerousSkipTLSVerify, responseHeaderTimeout."""
    skip: frozenset[str] = frozenset()
    if spec.get("dangerousSkipTLSVerify") and url:
        skip = frozenset({parse_reference(url).repository.registry})
    timeout = float(spec["responseHeaderTimeout"]) if spec.get("responseHeaderTimeout") else None
    return ClientSpec(credentials=_credentials(stream, spec), skip_verify=skip, read_timeout=timeout)


def _oci_view(ctx: FetchContext, spec: dict[str, Any], url: str) -> Content:
    return ctx.content.view(client_spec(ctx.stream, spec, url))


def select_reference(view: Content, url: str, spec: dict[str, Any]) -> str:
    """The reference to pull: the url, or `url:<tag>` chosen by tagSelection (one tag listing)."""
    return _selected(view, url, spec)


def _selected(view: Content, url: str, spec: dict[str, Any]) -> str:
    selection = spec.get("tagSelection")
    if not selection:
        return url
    semver = selection.get("semver")
    if semver is None:
        raise ConfigError("Determining tag selection: Unsupported version selection type (currently supported: semver)")
    repository = parse_reference(url).repository
    tags = view.client().list_tags(repository)
    prereleases = semver.get("prereleases")
    identifiers = None if prereleases is None else list(prereleases.get("identifiers") or [])
    from ocivendir.vendir.semver import select_tag  # noqa: PLC0415 - only for tagSelection

    return f"{url}:{select_tag(tags, str(semver.get('constraints') or ''), identifiers)}"


def _tag(ctx: FetchContext, pulled_url: str) -> dict[str, Any]:
    tag = ctx.preresolved_tag if ctx.preresolved_tag is not None else vendir_tag(pulled_url)
    return {"tag": tag} if tag else {}


def _target(config: ContentConfig, ctx: FetchContext, key: str, empty: str) -> tuple[Content, str]:
    """The content's client view and the reference to pull (after tagSelection), or vendir's empty-field error.

    An empty or missing `url`/`image` (`image: {}`) is found from the config alone: a ConfigError (exit 2), with
    vendir's words.
    """
    url = str(config.source.get(key) or "")
    if not url:
        raise ConfigError(empty)
    view = _oci_view(ctx, config.source, url)
    return view, _selected(view, url, config.source)


def fetch_image_source(config: ContentConfig, ctx: FetchContext, dest: str) -> dict[str, Any]:
    """`image`: one image manifest, every layer applied (a bundle is taken as a plain image)."""
    view, pulled = _target(config, ctx, "url", "Expected non-empty URL")
    image = fetch_image(view, parse_reference(pulled))
    extract_layers(
        view, image, dest, policy=TreePolicy(umask=ctx.umask, directories="entries", limits=view.extract_limits)
    )
    view.record(image.repo, image.digest, image.raw, image.manifest, image.kind)
    return {"url": image.ref, **_tag(ctx, pulled)}


def fetch_bundle_source(config: ContentConfig, ctx: FetchContext, dest: str) -> dict[str, Any]:
    """`imgpkgBundle`: a bundle pulled as `imgpkg pull -b` does, relocation and nested bundles included."""
    view, pulled = _target(config, ctx, "image", "Expected non-empty image")
    try:
        image = fetch_image(view, parse_reference(pulled), index_message="The provided image is not a bundle")
    except IndexNotSupported as exc:
        raise NotABundle(exc.message) from None
    if not image.config.is_bundle:
        raise NotABundle("The provided image is not a bundle")
    options = PullOptions(reference=pulled, lock_file=None, mode="bundle", output=dest,
                          recursive=bool(config.source.get("recursive")), umask=ctx.umask,
                          relocation_recheck=ctx.relocation_recheck, directories="entries")  # fmt: skip
    puller = BundlePuller(view, options)
    puller.seen.add(image.digest)
    puller.bundle(image, dest, PullTally(), 0, dest)
    return {"image": image.ref, **_tag(ctx, pulled)}


def _write_file(root: str, relative: str, data: bytes) -> None:
    try:
        target = scoped_path(root, relative)
    except ValueError:
        raise ConfigError(f"Invalid path: {relative}") from None
    os.makedirs(split(target)[0], 0o700, exist_ok=True)
    fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "wb") as handle:
        handle.write(data)
    os.chmod(target, 0o600)


def fetch_inline_source(config: ContentConfig, ctx: FetchContext, dest: str) -> dict[str, Any]:
    """`inline`: files from the config, secrets and config maps (0600 files, 0700 parents)."""
    for relative, text in (config.source.get("paths") or {}).items():
        _write_file(dest, relative, text.encode())
    for entry in config.source.get("pathsFrom") or []:
        secret_ref, map_ref = entry.get("secretRef"), entry.get("configMapRef")
        if secret_ref:
            data = ctx.stream.secret(str(secret_ref.get("name", ""))).data
            base = str(secret_ref.get("directoryPath") or "")
        elif map_ref:
            data = ctx.stream.config_map(str(map_ref.get("name", ""))).data
            base = str(map_ref.get("directoryPath") or "")
        else:
            raise ConfigError("Expected either secretRef or configMapRef as a source")
        for key, value in data.items():
            _write_file(dest, os.path.join(base, key) if base else key, value.encode())
    return {}


def _copy_tree(source: str, dest: str, *, link: bool) -> None:
    import shutil  # noqa: PLC0415 - only for local directory sources (shutil loads bz2, lzma, fnmatch)

    def copy(src: str, dst: str) -> None:
        if link:
            try:
                os.link(src, dst)
            except OSError:
                shutil.copy2(src, dst)
            else:
                return
        shutil.copy2(src, dst)

    shutil.copytree(source, dest, symlinks=True, copy_function=copy, dirs_exist_ok=True)


def fetch_directory_source(config: ContentConfig, ctx: FetchContext, dest: str) -> dict[str, Any]:
    """`directory`: a local directory (relative to the cwd) copied in."""
    source = pure(os.path.join(ctx.cwd, str(config.source.get("path") or "")))
    try:
        _copy_tree(source, dest, link=False)
    except OSError as exc:
        raise SyncError(
            f"Copying another directory contents into directory '{config.path}': {os_reason(exc)}"
        ) from None
    return {}


def fetch_manual_source(config: ContentConfig, ctx: FetchContext, dest: str) -> dict[str, Any]:
    """`manual`: the existing content is copied (hardlinks where possible), never moved, so a failure loses nothing."""
    try:
        if not os.path.isdir(ctx.existing):
            raise FileNotFoundError(2, "no such file or directory", str(ctx.existing))
        _copy_tree(ctx.existing, dest, link=True)
    except OSError as exc:
        where = f"{ctx.directory_path}/{config.path}"
        raise SyncError(f"Moving directory '{where}' to staging dir: {os_reason(exc)}") from None
    return {}


SOURCES: dict[str, Source] = {
    "image": fetch_image_source,
    "imgpkgBundle": fetch_bundle_source,
    "inline": fetch_inline_source,
    "directory": fetch_directory_source,
    "manual": fetch_manual_source,
}
FRAME_TYPES = {"image": "image", "imgpkgBundle": "imgpkgBundle", "inline": "inline", "directory": "directory",
               "manual": "manual", "git": "git", "hg": "hg", "http": "HTTP", "githubRelease": "github release",
               "helmChart": "helm chart"}  # fmt: skip


def source_for(source_type: str) -> Source | None:
    """The native source for a type, or None (delegated or unsupported)."""
    return SOURCES.get(source_type)


def describe(config: ContentConfig) -> str:
    """The human description vendir prints: `(image from <url>)`, `(inline)`, and so on."""
    spec = config.source
    if config.source_type in {"image", "imgpkgBundle"}:
        url = without_credentials(str(spec.get("url") or spec.get("image") or ""))
        if spec.get("tagSelection"):
            url += ":tag=" + json.dumps(spec["tagSelection"], separators=(",", ":"), ensure_ascii=False)
        return f"({config.source_type} from {url})"
    return f"({config.source_type})"


def log_fetch(content: Content, directory: str, config: ContentConfig) -> None:
    """The `Fetching: …` line."""
    content.events(LogEvent(message=f"Fetching: {directory} + {config.path} {describe(config)}"))


def lock_entry(config: ContentConfig, data: dict[str, Any], digest: str) -> LockContent:
    """The lock entry for a fetched content."""
    return LockContent(path=config.path, source_type=config.source_type, data=data, config_digest=digest)
