"""Owns: turning flags into a run.

Settings, the Output, and the engine's Content (cache or throwaway store, the lazily built registry client) — and
tearing it down.
"""

from __future__ import annotations

import os
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, fields

from ocivendir import diag
from ocivendir.cache.index import CacheIndex
from ocivendir.cache.store import BlobStore
from ocivendir.cache.unwritable import low_on_space
from ocivendir.engine.content import ClientSpec, Content
from ocivendir.errors import CacheError, UsageError
from ocivendir.fs.limits import ExtractLimits
from ocivendir.fs.locks import file_lock
from ocivendir.fs.paths import pure, split
from ocivendir.fs.swap import BLOBS, new_sibling, remove_tree
from ocivendir.output import Output, OutputMode, stderr_is_tty
from ocivendir.registry.credentials import CredentialRules
from ocivendir.results import WarningEvent
from ocivendir.settings import Flags, Settings, load_registry_plan, load_settings, parse_duration, read_policy_source

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Iterator
    from typing import Any

    import click

    from ocivendir.cache.grants import Fingerprints
    from ocivendir.oci.reference import Repository
    from ocivendir.registry.auth import Keyring
    from ocivendir.registry.client import RegistryClient
    from ocivendir.registry.mirrors import MirrorPlan

__all__ = ["Run", "open_cache", "open_content", "prog_name", "settings_for", "settings_from"]

_log = diag.logger("ocivendir.runtime")
_FLAG_FIELDS = {f.name for f in fields(Flags)}


def prog_name(ctx: click.Context) -> str:
    """`vendir` in vendir mode, `imgpkg` in imgpkg mode, else `ocivendir`."""
    return str(ctx.find_root().meta.get("ocivendir.prog", "ocivendir"))


def settings_for(ctx: click.Context) -> tuple[Settings, dict[str, Any]]:
    """Settings from the global flags given anywhere, plus the raw values of the command's own flags."""
    from ocivendir.commands.options import flag_values  # noqa: PLC0415 - click only on the click path

    return settings_from(flag_values(ctx))


def settings_from(given: dict[str, Any]) -> tuple[Settings, dict[str, Any]]:
    """Settings from flag values named as click names them (the one point both parsers pass through)."""
    values = dict(given)
    if "json_output" in values:
        values["json"] = values.pop("json_output")
    known = {k: v for k, v in values.items() if k in _FLAG_FIELDS}
    return load_settings(Flags(**known)), values


@dataclass
class Run:
    """One command's settings and output."""

    settings: Settings
    output: Output
    flags: dict[str, Any]

    @classmethod
    def start(cls, ctx: click.Context, *, vendir_quiet: bool = False) -> Run:
        """A run from click's context: the flags given anywhere on the command line."""
        settings, flags = settings_for(ctx)
        return cls.begin(settings, flags, prog_name(ctx), vendir_quiet=vendir_quiet)

    @classmethod
    def from_flags(cls, given: dict[str, Any], prog: str, *, vendir_quiet: bool = False) -> Run:
        """A run from flag values parsed without click (vendir mode's fast path), named as click names them."""
        settings, flags = settings_from(given)
        return cls.begin(settings, flags, prog, vendir_quiet=vendir_quiet)

    @classmethod
    def begin(cls, settings: Settings, flags: dict[str, Any], prog: str, *, vendir_quiet: bool) -> Run:
        """Choose the renderer (stderr's TTY state alone picks it), set up logging."""
        stderr_tty = stderr_is_tty()
        lines = not (vendir_quiet and prog == "vendir" and not settings.tty)
        mode = OutputMode(
            prog=prog,
            json=settings.json,
            quiet=settings.quiet,
            color=settings.color,
            debug=settings.debug,
            progress_lines=lines,
            stderr_tty=stderr_tty,
        )
        diag.configure(debug=settings.debug, verbose=settings.verbose)
        for name in settings.credentials.keychains:
            _log.debug("keychain %s is accepted but not implemented natively; use a docker credential helper", name)
        return cls(settings=settings, output=Output(mode), flags=flags)


def _client_options(
    settings: Settings, flags: dict[str, Any], skip_verify: frozenset[str], read_timeout: float | None
) -> Any:  # noqa: ANN401 - ClientOptions, imported lazily
    from ocivendir.registry.client import ClientOptions  # noqa: PLC0415 - network stack only when needed
    from ocivendir.registry.retry import RetryPolicy  # noqa: PLC0415

    if read_timeout is None and flags.get("response_header_timeout"):
        read_timeout = parse_duration(str(flags["response_header_timeout"]), "--registry-response-header-timeout")
    attempts = int(flags.get("retry_count") or 5)
    if attempts < 1:
        raise UsageError("--registry-retry-count must be at least 1")
    verify = flags.get("verify_certs")
    return ClientOptions(
        insecure_all=bool(flags.get("insecure_all")),
        insecure_hosts=settings.insecure_registries,
        verify_certs=True if verify is None else bool(verify),
        skip_verify_hosts=skip_verify,
        ca_files=tuple(pure(p) for p in flags.get("ca_cert_paths") or ()),
        ssl_cert_file=settings.ssl_cert_file,
        ssl_cert_dir=settings.ssl_cert_dir,
        proxy=settings.proxy,
        read_timeout=read_timeout or 30.0,
        timeout_seconds=settings.timeout,
        retry=RetryPolicy(attempts=attempts),
        pool_size=max(settings.concurrency, 2),
        endpoint_concurrency=settings.registry_concurrency,
    )


def _rules(settings: Settings, extra: CredentialRules | None) -> CredentialRules:
    rules = settings.credentials
    return extra.merged_with(rules) if extra is not None else rules


def _private_lock_dir() -> str:
    import tempfile  # noqa: PLC0415 - only without a cache

    tempfile.tempdir = None  # this caller's TMPDIR: `tempfile` would keep the one an earlier call of the process found
    path = os.path.join(tempfile.gettempdir(), f"ocivendir-{os.getuid()}")
    try:
        os.mkdir(path, 0o700)
    except FileExistsError:
        if not os.path.isdir(path):
            raise
    return path


def open_cache(settings: Settings, *, required: bool = False) -> tuple[BlobStore, CacheIndex] | None:
    """The cache's store and index; None with --no-cache or when the default directory is unusable.

    With `required`, an unusable default directory is a CacheError, as a directory named by a flag or variable is.
    """
    if settings.cache_dir is None:
        return None
    store = BlobStore(settings.cache_dir)
    try:
        store.ensure_layout()
        index = CacheIndex(os.path.join(settings.cache_dir, "index.db"))
    except CacheError:
        if settings.cache_dir_explicit or required:
            raise
        _log.debug("default cache directory %s is not usable; running without a cache", settings.cache_dir)
        return None
    return store, index


def _keyring(settings: Settings, spec: ClientSpec, plan: MirrorPlan) -> Keyring:
    """The credential lookup of one content's client: its Secret's rules and the run's, then files and plan."""
    from ocivendir.registry.auth import Keyring  # noqa: PLC0415 - only when a registry or a grant needs it

    rules = _rules(settings, spec.credentials)
    return Keyring(rules, settings.docker_configs, plan, auth_file=settings.registry_auth_file)


def _plan_loader(run: Run) -> Callable[[], MirrorPlan]:
    """registries.yaml's plan, read on first need and once per run (its notes are warnings)."""
    loaded: list[MirrorPlan] = []

    def plan() -> MirrorPlan:
        if not loaded:
            found, notes = load_registry_plan(run.settings)
            loaded.append(found)
            for note in notes:
                run.output.event(WarningEvent(message=note))
        return loaded[0]

    return plan


def _client_factory(
    run: Run, plan: Callable[[], MirrorPlan]
) -> Callable[[ClientSpec, CacheIndex | None], RegistryClient]:
    """Builds a registry client per credential set, importing the network stack (and reading registries.yaml) then."""
    settings = run.settings

    def factory(spec: ClientSpec, index: CacheIndex | None) -> RegistryClient:
        from ocivendir.registry.client import RegistryClient  # noqa: PLC0415 - the warm path never gets here

        options = _client_options(settings, run.flags, spec.skip_verify, spec.read_timeout)
        return RegistryClient(options, _keyring(settings, spec, plan()), index, plan())

    return factory


def _principal(run: Run, store: BlobStore, plan: Callable[[], MirrorPlan]) -> Callable[[ClientSpec, Repository], str]:
    """Who the caller is to a registry, for a shared cache's access grants: its credential's keyed fingerprint.

    The credential is the one its client sends the origin (registries.yaml's `configs` auth included), with the
    client certificate registries.yaml gives the origin: a registry that admits by certificate never challenges.
    Only the credential lookup runs (no network stack). Nothing is loaded until a manifest is not known to be
    readable anonymously.
    """
    made: list[Fingerprints] = []

    def principal(spec: ClientSpec, repo: Repository) -> str:
        from ocivendir.cache.grants import Fingerprints  # noqa: PLC0415 - only when a caller must be identified

        if not made:
            made.append(Fingerprints(os.path.join(store.root, "grants.key")))
        credential = _keyring(run.settings, spec, plan())(repo.registry, repo.path)
        tls = plan().config_for(repo.registry).tls
        return made[0].principal(repo.registry, credential, certificate=tls.cert_file if tls is not None else "")

    return principal


def _throwaway_store(target: str | None) -> BlobStore:
    """Without a cache: blobs go to a sibling of the target (or a private temp dir), removed when the run ends."""
    if target is not None:
        os.makedirs(split(target)[0], exist_ok=True)
        root = new_sibling(target, BLOBS)
    else:
        root = new_sibling(os.path.join(_private_lock_dir(), "run"), BLOBS)
    store = BlobStore(root)
    store.ensure_layout()
    return store


@contextmanager
def open_content(run: Run, *, target: str | None) -> Iterator[tuple[Content, str]]:
    """The engine's Content and the directory for target locks; cleaned up (client, index, temp store) at exit."""
    settings = run.settings
    source = read_policy_source(settings)  # a policy that cannot be read fails before anything is opened
    opened = open_cache(settings)
    with ExitStack() as stack:
        if opened is not None:
            store, index = opened
            stack.enter_context(file_lock(store.lock_path("root"), shared=True))
            # a cache that cannot be written (read-only, full, out of inodes) still serves: targets are locked elsewhere
            usable = os.access(store.locks, os.W_OK) and not low_on_space(store.locks)
            lock_dir = store.locks if usable else _private_lock_dir()
        else:
            store, index, lock_dir = _throwaway_store(target), None, _private_lock_dir()
            stack.callback(remove_tree, store.root)
        plan = _plan_loader(run)
        content = Content(store=store, index=index, client_factory=_client_factory(run, plan),
                          concurrency=settings.concurrency, events=run.output.event, offline=settings.offline,
                          stale_if_error=settings.stale_if_error,
                          extract_limits=ExtractLimits(max_bytes=settings.max_extract_size),
                          principal=_principal(run, store, plan) if index is not None else None)  # fmt: skip
        if source is not None:
            from ocivendir.engine.signatures import SignatureGate  # noqa: PLC0415 - only with --policy

            content.signatures = SignatureGate(source, settings.trusted_root)
            content.signatures.validate(index)  # a policy that does not parse fails before any request
        try:
            yield content, lock_dir
            if index is not None and content.counters.stored_new:
                from ocivendir.cache.prune import prune_to_budget  # noqa: PLC0415 - only after new content

                prune_to_budget(store, index, settings.cache_max_size, content.held_refs)
        finally:
            content.close()
            run.output.finish_progress()
