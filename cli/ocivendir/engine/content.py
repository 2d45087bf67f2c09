"""Owns: getting verified content — from the cache when it is there, from the registry (once) when it is not.

A cache may be shared, and a registry may lie: a manifest it serves can name digests of someone else's private
blobs. So the cache serves a digest for a repository only when that repository itself once served those bytes and
they verified (a possession record, `cache/index.py`); otherwise the bytes are fetched from that repository and
verified like any download (then deduplicated on disk). Credential grants (`engine/access.py`) sit on top: a part
each view of the content uses for its caller. With `--policy` the run gives the content a `SignatureGate` (this
module's protocol, `engine/signatures.py` its implementation), which asks for signatures through the content.
The registry client is created lazily through a factory, so a warm cached run never imports the network stack.
"""

from __future__ import annotations

import hashlib
from contextlib import AbstractContextManager, ExitStack, nullcontext
from dataclasses import dataclass, field
from threading import Lock

from ocivendir import diag
from ocivendir.cache.grants import ANONYMOUS_PRINCIPAL
from ocivendir.cache.index import BlobRow, CacheIndex
from ocivendir.cache.store import BlobStore
from ocivendir.cache.unwritable import best_effort
from ocivendir.engine.access import Grants
from ocivendir.errors import CacheUnwritable, DigestMismatch, RegistryError, Transient, UnsupportedMediaType
from ocivendir.fs.limits import ExtractLimits
from ocivendir.fs.locks import LockBusy, file_lock
from ocivendir.oci import parsed
from ocivendir.oci.manifest import (
    MAX_CONFIG_BYTES,
    Descriptor,
    ImageConfig,
    Index,
    Manifest,
    sha256_digest,
)
from ocivendir.oci.reference import Digest, Reference, Repository
from ocivendir.registry.credentials import CredentialRules
from ocivendir.results import ImageStatus, ProgressEvent, RequestStats, WarningEvent

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Mapping, Sequence
    from typing import Protocol

    from ocivendir.registry.client import RegistryClient
    from ocivendir.results import EventSink, ImageStatusValue

    class Subject(Protocol):
        """What a signature gate judges: an image by repository and digest (`engine/image.FetchedImage`)."""

        @property
        def repo(self) -> Repository:
            """The repository the image was read from."""

        @property
        def digest(self) -> Digest:
            """The image's manifest digest."""

        @property
        def ref(self) -> str:
            """Fully qualified `registry/repo@sha256:<hex>`."""

    class Refusal(Protocol):
        """A signature policy that did not pass, for a report."""

        def describe(self, ref: str) -> str:
            """The failure, naming the image `ref`, the policy and the reasons."""

    class SignatureGate(Protocol):
        """`--policy`: may an image be used? Decided through the content it is given (`engine/signatures.py`)."""

        def check(self, content: Content, image: Subject) -> None:
            """Raise SignatureError unless the image's enforced policies pass (warn for the others that fail)."""

        def verdict(self, content: Content, image: Subject) -> tuple[str, Sequence[Refusal]]:
            """The image's verdict (verified, unmatched, warned, failed), with the policies that did not pass."""

        def passed_before(self, index: CacheIndex | None, ref: str) -> bool:
            """Whether the image `ref` passed these policies before, as remembered in `index` (nothing is fetched)."""


__all__ = ["TAG_NEEDS_REGISTRY", "ClientSpec", "Content", "FetchCounters", "Offline"]

_log = diag.logger("ocivendir.content")
# tags are outside the air-gapped promise (`cache import` seeds digests): an unanswered tag says so
TAG_NEEDS_REGISTRY = (
    "a tag is resolved at its registry on every run, so it needs that registry; only a digest reference "
    "(repo@sha256:…) is served from the cache without one"
)


def _add(a: RequestStats, b: RequestStats) -> RequestStats:
    def merged(x: Mapping[str, int], y: Mapping[str, int]) -> dict[str, int]:
        return {k: x.get(k, 0) + y.get(k, 0) for k in sorted(set(x) | set(y))}

    return RequestStats(
        total=a.total + b.total,
        auth=a.auth + b.auth,
        connect_errors=a.connect_errors + b.connect_errors,
        by_method=merged(a.by_method, b.by_method),
        by_status=merged(a.by_status, b.by_status),
        bytes_received=a.bytes_received + b.bytes_received,
        by_endpoint=merged(a.by_endpoint, b.by_endpoint),
        served_by={**a.served_by, **b.served_by},
    )


class Offline(Transient):
    """The run may not open connections (`--offline`)."""

    code = "offline"


@dataclass
class FetchCounters:
    """What a run took from the cache and from the network."""

    hits: int = 0
    fetched: int = 0
    bytes_fetched: int = 0
    stored_new: bool = False
    lock: Lock = field(default_factory=Lock)

    def hit(self) -> None:
        """Count a blob served from the cache."""
        with self.lock:
            self.hits += 1

    def fetch(self, size: int) -> None:
        """Count a blob fetched from a registry."""
        with self.lock:
            self.fetched += 1
            self.bytes_fetched += size
            self.stored_new = True


@dataclass(frozen=True, kw_only=True)
class ClientSpec:
    """What distinguishes one content's registry client from another's: its credentials and transport options."""

    credentials: CredentialRules | None = None
    skip_verify: frozenset[str] = frozenset()
    read_timeout: float | None = None


class Content:
    """Blobs and manifests by digest: the store first, then the registry, every byte verified on both paths."""

    def __init__(
        self,
        *,
        store: BlobStore,
        index: CacheIndex | None,
        client_factory: Callable[[ClientSpec, CacheIndex | None], RegistryClient],
        concurrency: int,
        events: EventSink,
        offline: bool = False,
        stale_if_error: float | None = None,
        extract_limits: ExtractLimits | None = None,
        principal: Callable[[ClientSpec, Repository], str] | None = None,
    ) -> None:
        """Wire a store (the cache or a throwaway one), its index (None without a cache) and a client factory."""
        self.store = store
        self.index = index
        self._client_factory = client_factory
        self._clients: dict[ClientSpec, RegistryClient] = {}
        self._spec = ClientSpec()
        self._client_lock = Lock()
        self.concurrency = concurrency
        self.events = events
        self.offline = offline
        self.stale_if_error = stale_if_error
        self.extract_limits = extract_limits or ExtractLimits()
        self.principal = principal
        self._principals: dict[tuple[ClientSpec, Repository], str] = {}
        self.grants = Grants(index, self.principal_for if principal is not None else None)
        self.counters = FetchCounters()
        self.warnings: list[str] = []
        self._held = ExitStack()
        self._held_refs: set[str] = set()
        self.signatures: SignatureGate | None = None  # `--policy`: checked before anything is extracted

    # --- lifecycle ------------------------------------------------------------------------------------------

    def client(self) -> RegistryClient:
        """The registry client for this view's credentials, created on first use."""
        if self.offline:
            raise Offline("the network is off (--offline) and the content is not in the cache")
        with self._client_lock:
            if self._spec not in self._clients:
                client = self._client_factory(self._spec, self.index)
                client.on_warning(self.warn)
                self._clients[self._spec] = client
            return self._clients[self._spec]

    def principal_for(self, repo: Repository) -> str:
        """Who this view's caller is to `repo`'s registry: `anonymous` or its credential's keyed fingerprint."""
        if self.principal is None:
            return ANONYMOUS_PRINCIPAL
        key = (self._spec, repo)
        if key not in self._principals:
            self._principals[key] = self.principal(self._spec, repo)
        return self._principals[key]

    def view(self, spec: ClientSpec) -> Content:
        """The same store, index, counters and warnings, with a client for other credentials (one content's)."""
        other = object.__new__(Content)
        other.__dict__.update(self.__dict__)  # a shallow copy, as copy.copy makes it (without importing copy)
        other._spec = spec
        other.grants = Grants(self.index, other.principal_for if self.principal is not None else None)
        return other

    @property
    def requests(self) -> RequestStats:
        """Requests sent so far by every client of the run (none if no client was needed)."""
        total = RequestStats()
        for client in list(self._clients.values()):
            total = _add(total, client.stats)
        return total

    def close(self) -> None:
        """Release held locks and close the clients and the index."""
        self._held.close()
        for client in self._clients.values():
            client.close()
        if self.index is not None:
            self.index.close()

    def warn(self, message: str) -> None:
        """Record and emit a warning."""
        self.warnings.append(message)
        self.events(WarningEvent(message=message))

    @property
    def held_refs(self) -> frozenset[str]:
        """The refs this run uses (prune leaves them alone)."""
        return frozenset(self._held_refs)

    def hold(self, ref: str) -> None:
        """Hold a shared entry lock on a ref until the run ends, so prune leaves it alone."""
        if self.index is None:
            return
        with self._client_lock:  # shared by every view; contents are fetched from several threads
            if ref in self._held_refs:
                return
            lock = self.store.lock_path(f"entry-{hashlib.sha256(ref.encode()).hexdigest()}")
            try:
                self._held.enter_context(file_lock(lock, shared=True, timeout=30))
                self._held_refs.add(ref)
            except LockBusy:
                pass

    # --- resolution and manifests ---------------------------------------------------------------------------

    def resolve(self, ref: Reference) -> Digest:
        """A digest reference is its own answer; a tag costs one HEAD."""
        if ref.digest is not None:
            return ref.digest
        try:
            resolved = self.client().resolve(ref)
        except Transient as exc:
            exc.hint = f"{exc.hint} {TAG_NEEDS_REGISTRY}" if exc.hint else TAG_NEEDS_REGISTRY
            return self._stale_answer(ref, exc)
        with self._batch():  # what the answer proved, in one transaction
            self.grants.record(ref.repository, resolved.digest,  # the tag's HEAD just proved access
                               anonymous=self.client().anonymous_so_far(ref.repository.registry))  # fmt: skip
            if resolved.raw is not None:
                self.store.admit_bytes(resolved.digest, resolved.raw)  # the repository served them: verified, possessed
                self._possess(ref.repository, (resolved.digest,))
            if (index := self.index) is not None:
                best_effort(lambda: index.put_tag(str(ref), resolved.digest), f"the answer for {ref}")
        return resolved.digest

    def _batch(self) -> AbstractContextManager[None]:
        """The index's batch of writes (one transaction), or nothing without an index."""
        return self.index.batch() if self.index is not None else nullcontext()

    def _stale_answer(self, ref: Reference, exc: Transient) -> Digest:
        """--stale-if-error: a tag's last recorded answer, if young enough, when the registry cannot answer.

        An answer dated in the future (recorded while the clock ran ahead) has no age to trust: it is not served.
        """
        recorded = self.index.tag(str(ref)) if self.index is not None else None
        if self.stale_if_error is None or recorded is None or self.index is None:
            raise exc
        digest, resolved_at = recorded
        age = self.index.now - resolved_at
        if not 0.0 <= age <= self.stale_if_error or not self._granted(ref.repository, digest):
            raise exc  # a caller not known to read it learns neither the digest nor that there is one
        self.warn(f"could not resolve '{ref}' ({exc.message}); using its answer from {age:.0f}s ago: {digest}")
        return digest

    def manifest_bytes(self, repo: Repository, digest: Digest) -> bytes:
        """A manifest's verified bytes from the cache when this caller may have them there, else fetched from `repo`.

        A caller not known to read the manifest in `repo` (`engine/access.py`) is served exactly as if it were not
        cached: it fetches it with its own credentials, and a refusal is the registry's own error (or, with
        `--offline`, the uncached content's), so it never learns that someone else's private digest is cached.
        """
        if self.store.has(digest) and self._granted(repo, digest):
            try:
                data = self.store.read_verified(digest, None, f"Reading manifest '{repo}@{digest}'")
            except DigestMismatch as exc:
                self._drop_corrupt(digest, str(exc))
            else:
                self.counters.hit()
                return data

        def fetch() -> bytes:
            client = self.client()
            raw = client.get_manifest(repo.at(digest))[0]
            if sha256_digest(raw) == digest:  # admit_fetched refuses anything else
                with self._batch():  # under the digest's lock: a process waiting on it reuses these
                    self._possess(repo, (digest,))
                    self.grants.record(repo, digest, anonymous=client.anonymous_so_far(repo.registry))
            return raw

        raw, fetched = self.store.admit_fetched(digest, fetch, lambda: self._granted(repo, digest))
        if fetched:
            self.counters.fetch(len(raw))
        else:
            self.counters.hit()
        return raw

    # --- possession -----------------------------------------------------------------------------------------

    def holds(self, repo: Repository, digest: Digest) -> bool:
        """True if `repo` once served `digest`'s bytes and they verified (always, with a cache private to the run)."""
        return self.index is None or bool(self.index.held(str(repo), (digest,)))

    def _granted(self, repo: Repository, digest: Digest) -> bool:
        """True if this caller may be served `digest` from the cache with no request: `repo` holds it, and grants."""
        return self.holds(repo, digest) and self.grants.granted(repo, digest)

    def cached(self, repo: Repository, blob: Descriptor) -> bool:
        """True if a blob may be served to `repo` from the store: present, and possessed by `repo`."""
        return self.store.has(blob.digest, blob.size) and self.holds(repo, blob.digest)

    def _possess(self, repo: Repository, digests: Iterable[Digest]) -> None:
        if self.index is not None:
            self.index.possess(str(repo), digests)

    def manifest(self, repo: Repository, digest: Digest) -> tuple[bytes, Manifest | Index]:
        """A manifest's bytes and parsed form."""
        raw = self.manifest_bytes(repo, digest)
        try:
            return raw, parsed.manifest(raw)
        except UnsupportedMediaType as exc:  # what the registry served, named: it verified, it is theirs
            raise UnsupportedMediaType(f"Reading manifest '{repo.at(digest)}': {exc.message}", hint=exc.hint) from None
        except RegistryError as exc:  # a malformed digest in it
            raise RegistryError(f"Reading manifest '{repo.at(digest)}': {exc.message}", hint=exc.hint) from None

    def config(self, repo: Repository, manifest: Manifest) -> ImageConfig:
        """An image's config (labels); one that says it is larger than MAX_CONFIG_BYTES is refused unread."""
        what = f"Reading config of '{repo}'"
        if manifest.config.size > MAX_CONFIG_BYTES:
            raise RegistryError(f"{what}: the config is {manifest.config.size} bytes, more than the {MAX_CONFIG_BYTES} "
                                "an image config may be")  # fmt: skip
        for attempt in range(2):
            self.ensure_blobs(repo, (manifest.config,))
            try:
                return parsed.config(self.store.read_verified(manifest.config.digest, manifest.config.size, what))
            except DigestMismatch as exc:
                if attempt:
                    raise
                # read_verified deleted the damaged file: forget it and fetch it again in this run
                self.warn(f"{exc}; fetching it again")
                if self.index is not None:
                    self.index.forget_blob(manifest.config.digest)
        raise AssertionError("unreachable")  # pragma: no cover

    # --- blobs ----------------------------------------------------------------------------------------------

    def _drop_corrupt(self, digest: Digest, message: str) -> None:
        _log.warning("%s; dropping it", message)
        self.store.delete(digest)
        if self.index is not None:
            self.index.forget_blob(digest)

    def ensure_blobs(self, repo: Repository, blobs: Iterable[Descriptor]) -> None:
        """Make every blob present and verified, fetching the missing ones up to `concurrency` at a time."""
        blobs = list(blobs)
        held = self.index.held(str(repo), (b.digest for b in blobs)) if self.index is not None else None
        missing = []
        for blob in blobs:
            if (held is None or blob.digest in held) and self.store.has(blob.digest, blob.size):
                self.counters.hit()
            else:
                missing.append(blob)
        if not missing:
            return
        client = self.client()
        if len(missing) == 1 or self.concurrency == 1:
            for blob in missing:
                self._fetch(client, repo, blob)
            return
        from ocivendir.parallel import map_parallel  # noqa: PLC0415 - only when fetching in parallel

        map_parallel(lambda blob: self._fetch(client, repo, blob), missing, self.concurrency)

    def fetch_blob(self, repo: Repository, blob: Descriptor, on_chunk: Callable[[int, bytes], None]) -> bool:
        """Fetch one blob into the store, showing each chunk to `on_chunk`.

        False if it was already there (or another process fetched it while this one waited for the digest's lock).
        """
        return self._fetch(self.client(), repo, blob, on_chunk)

    def _fetch(
        self,
        client: RegistryClient,
        repo: Repository,
        blob: Descriptor,
        on_chunk: Callable[[int, bytes], None] | None = None,
    ) -> bool:
        label = f"{blob.digest.hex[:12]}"

        def progress(done: int) -> None:
            self.events(ProgressEvent(key=str(blob.digest), label=label, done=done, total=blob.size))

        def fill(tmp: str) -> None:
            client.fetch_blob_to(repo, blob.digest, blob.size, tmp, progress, on_chunk)  # verified, or it raises
            self._possess(repo, (blob.digest,))

        if self.store.admit(blob.digest, blob.size, fill, lambda: self.holds(repo, blob.digest), resumable=True):
            self.counters.fetch(blob.size)
            return True
        self.counters.hit()
        return False

    # --- bookkeeping ----------------------------------------------------------------------------------------

    def record(self, repo: Repository, digest: Digest, raw: bytes, manifest: Manifest, kind: str) -> None:
        """Record a fully present ref in the index (and index.json when it is new)."""
        if self.index is None:
            return
        ref = str(repo.at(digest))
        self.hold(ref)
        known = self.index.ref(ref)
        recorded = known is not None and (known.manifest_digest, known.kind) == (digest, kind)
        if recorded and known is not None and self.index.touched_recently(known):
            return  # recorded, and its last use is fresh: a warm run writes nothing to the index
        rows = [BlobRow(digest=b.digest, size=b.size, media_type=b.media_type) for b in manifest.blobs]
        top = BlobRow(digest=digest, size=len(raw), media_type=manifest.media_type)
        try:
            self.index.record_ref(ref, top, kind, rows)
        except CacheUnwritable as exc:
            if not recorded:
                raise
            _log.debug("not recording the last use of %s: %s", ref, exc)  # a read-only or full cache still serves
            return
        if known is None:
            self.store.write_index_json(self.index.layout_entries)

    def probe_tag(self, ref: Reference) -> ImageStatusValue:
        """Presence of a tag (the locations image), one HEAD; `error` when the network is off."""
        try:
            return self.client().presence(ref)
        except Offline:
            return ImageStatus.ERROR

    def probe(self, repo: Repository, digest: Digest) -> ImageStatusValue:
        """Presence of a manifest digest in a repository (one HEAD)."""
        try:
            return self.client().exists(repo, digest)
        except Offline:
            return ImageStatus.ERROR
