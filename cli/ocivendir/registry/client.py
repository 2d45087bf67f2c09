"""Owns: the distribution protocol — manifests, blobs, tags, referrers and presence probes, verified.

Sent through `registry/sender.py` (authentication, retries under the run's deadline, errors named). Manifests are
verified against the digest asked for (or the registry's header) and bounded; blobs stream into the cache with resume
(`registry/download.py`) and are verified over every byte (design §4.1). Every operation names the origin repository
and is walked over its endpoints by `registry/endpoints.py` (registries.yaml mirrors, then the origin); whatever a
mirror sends is verified against the digest asked for exactly as the origin's is.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable
from dataclasses import dataclass

from ocivendir import diag, jsondoc
from ocivendir.errors import (
    Denied,
    DigestMismatch,
    RateLimited,
    RegistryError,
    Transient,
    Unauthorized,
    UnsupportedMediaType,
)
from ocivendir.oci import gokeys
from ocivendir.oci.manifest import ACCEPT_MANIFESTS, served_digest, sha256_digest
from ocivendir.oci.reference import Digest, Reference, Repository
from ocivendir.registry.download import BlobFile, range_start
from ocivendir.registry.mirrors import Endpoint
from ocivendir.registry.sender import Refused, Sender, shown
from ocivendir.registry.transport import BodyBroken, ClientOptions, iter_body
from ocivendir.results import ImageStatus

TYPE_CHECKING = False
if TYPE_CHECKING:
    from ocivendir.registry.transport import Response
    from ocivendir.results import ImageStatusValue

__all__ = ["ClientOptions", "RegistryClient", "Resolved"]

MAX_MANIFEST_BYTES = 4 * 1024 * 1024
# A tag list is bounded where no real repository goes (pages are asked for 1,000 tags; a registry that pages by 100
# still lists a million tags in 10,000 pages): past a bound, the answer is a hostile or broken registry's, not a list.
MAX_TAG_PAGES = 10_000
MAX_TAGS = 1_000_000
MAX_TAG_LIST_BYTES = 64 << 20  # all pages together; one page is at most the 32 MiB any body read at once may be
_CHUNK = 512 << 10  # a blob body is handed on (hashing, the cache file, the tee) in pieces this large
_HEAD_REFUSED = frozenset({405, 501})
_log = diag.logger("ocivendir.registry")

ProgressCallback = Callable[[int], None]
ChunkCallback = Callable[[int, bytes], None]


@dataclass(frozen=True, kw_only=True)
class Resolved:
    """A reference resolved to a manifest digest; `raw` holds the bytes when a GET was needed anyway."""

    digest: Digest
    media_type: str
    size: int
    raw: bytes | None = None


class RegistryClient(Sender):
    """One run's connection to registries: the distribution protocol's operations, verified, on its sender."""

    def resolve(self, ref: Reference) -> Resolved:
        """Resolve a reference to its manifest digest with one HEAD (a GET only if HEAD is refused or lacks one)."""
        what = f"Resolving '{ref}'"
        return self._walker.walk(ref.repository, str(ref), lambda endpoint: self._resolve_at(endpoint, ref, what))

    def _resolve_at(self, endpoint: Endpoint, ref: Reference, what: str) -> Resolved:
        """One HEAD; a GET when HEAD is refused, lacks a digest, or fails without a body.

        The GET then fails with the registry's own words: MANIFEST_UNKNOWN, NAME_UNKNOWN, its text on refused
        credentials.
        """
        path = endpoint.api_path(f"manifests/{ref.identifier}")
        fetch = f"Fetching manifest '{ref}'"
        try:
            response = self._send("HEAD", endpoint, path, {"Accept": ACCEPT_MANIFESTS}, stream=False, what=what)
        except Refused:  # credentials were sent and refused: the GET says why (a HEAD has no body)
            return self._resolved_by_get(endpoint, ref, fetch)
        if response.status_code not in _HEAD_REFUSED and not _client_error(response.status_code):
            self._raise_for(response, what)
            digest_header = response.headers.get("Docker-Content-Digest")
            if digest_header:
                digest = served_digest(digest_header, f"{what}: Docker-Content-Digest")
                if ref.digest is not None and digest != ref.digest:
                    raise DigestMismatch(f"{what}: registry reports {digest}")
                size = _declared_size(response, endpoint, what)
                return Resolved(digest=digest, media_type=_content_type(response), size=size)
        response.close()
        return self._resolved_by_get(endpoint, ref, fetch)

    def _resolved_by_get(self, endpoint: Endpoint, ref: Reference, what: str) -> Resolved:
        raw, media_type, digest = self._manifest_at(endpoint, ref, what)
        return Resolved(digest=digest, media_type=media_type, size=len(raw), raw=raw)

    def get_manifest(self, ref: Reference) -> tuple[bytes, str, Digest]:
        """Fetch a manifest's raw bytes, verified against the digest asked for (or the registry's header)."""
        what = f"Fetching manifest '{ref}'"
        return self._walker.walk(ref.repository, str(ref), lambda endpoint: self._manifest_at(endpoint, ref, what))

    def _manifest_at(self, endpoint: Endpoint, ref: Reference, what: str) -> tuple[bytes, str, Digest]:
        path = endpoint.api_path(f"manifests/{ref.identifier}")
        response = self._send("GET", endpoint, path, {"Accept": ACCEPT_MANIFESTS}, stream=True, what=what)
        self._raise_for(response, what)
        raw = self._document(response, what)
        actual = sha256_digest(raw)
        expected = ref.digest
        if expected is None and response.headers.get("Docker-Content-Digest"):
            expected = served_digest(response.headers["Docker-Content-Digest"], f"{what}: Docker-Content-Digest")
        if expected is not None and actual != expected:
            raise DigestMismatch(f"{what}: expected digest {expected}, got {actual}")
        return raw, _content_type(response), actual

    def fetch_blob_to(
        self,
        repo: Repository,
        digest: Digest,
        size: int,
        target: str | os.PathLike[str],
        progress: ProgressCallback | None = None,
        on_chunk: ChunkCallback | None = None,
    ) -> None:
        """Stream a blob into `target`, verifying size and sha256, resuming from the bytes `target` already holds.

        Bytes an earlier attempt left in `target` are hashed again and the rest asked for with an HTTP Range
        (`registry/download.py`); a broken-off download keeps what it received there for the next attempt, in this
        run or the next. Only a mismatch empties `target`: the digest is checked over every byte at the end.
        `on_chunk(offset, chunk)` sees every chunk, kept ones first (offset 0 again means the download started
        over); the bytes it saw are verified only when this call returns.
        """
        what = f"Fetching blob '{repo}@{digest}'"
        with BlobFile(os.fspath(target), digest, size, on_chunk, progress) as blob:
            self._walker.walk(repo, f"{repo}@{digest}", lambda endpoint: self._blob_at(endpoint, blob, what))

    def _blob_at(self, endpoint: Endpoint, blob: BlobFile, what: str) -> None:
        """Attempts at one endpoint: a broken-off one resumes; only attempts that received nothing count.

        A mismatch after resuming from kept bytes drops them and fetches once more from byte zero: kept bytes may
        be anything (a killed run's, or planted); a mismatch of a download from byte zero is the registry's.
        """
        policy = self._options.retry
        failures, started_over = 0, False
        while True:
            kept = blob.prepare()
            try:
                self._fetch_blob_once(endpoint, blob, kept, what)
            except _ShortRead as exc:
                failures = failures + 1 if blob.written <= kept else 0
                if failures >= policy.attempts:
                    raise Transient(f"{what}: {exc}") from None
                self._sleep(policy.delay(max(failures - 1, 0), None, what), what)
            except _StartOver as exc:
                _log.debug("%s: %s; fetching it from the start", what, exc)
                blob.restart()
            except DigestMismatch:
                blob.restart()
                if not kept or started_over:
                    raise
                _log.debug("%s: the %d bytes kept from an earlier attempt did not match; fetching it again", what, kept)
                started_over = True
            else:
                return

    def _fetch_blob_once(self, endpoint: Endpoint, blob: BlobFile, kept: int, what: str) -> None:
        if kept and kept == blob.size:  # all there (a run killed before it published the blob): no request
            blob.verify(what)
            return
        path = endpoint.api_path(f"blobs/{blob.digest}")
        response = self._send("GET", endpoint, path, {"Range": f"bytes={kept}-"} if kept else {}, stream=True,
                              what=what)  # fmt: skip
        if kept and response.status_code == 416:  # noqa: PLR2004 - Range Not Satisfiable
            response.close()
            raise _StartOver(f"the registry refused the range from byte {kept} (416)")
        self._raise_for(response, what)
        if kept:
            self._continue_at(response, blob, kept)
        with contextlib.closing(response):
            try:
                for chunk in iter_body(response, _CHUNK):
                    self._stats.received(len(chunk))
                    blob.append(chunk)
                    if blob.written > blob.size:
                        break
            except BodyBroken as exc:
                raise _ShortRead(f"connection dropped after {blob.written} of {blob.size} bytes: {exc}") from None
        if blob.written < blob.size and not blob.matches:
            raise _ShortRead(f"connection closed after {blob.written} of {blob.size} bytes")
        blob.verify(what)

    @staticmethod
    def _continue_at(response: Response, blob: BlobFile, kept: int) -> None:
        """A ranged request's answer: a 206 from the kept size continues; a 200 (Range ignored) starts over."""
        if response.status_code != 206:  # noqa: PLR2004
            _log.debug("the registry ignored the range (status %d): taking the whole blob", response.status_code)
            blob.restart()
            return
        start = range_start(response.headers.get("Content-Range", ""), blob.size)
        if start != kept:
            response.close()
            raise _StartOver(f"the registry answered the range from byte {kept} with Content-Range "
                             f"{shown(response.headers.get('Content-Range', ''))!r}")  # fmt: skip

    def exists(self, repo: Repository, digest: Digest) -> ImageStatusValue:
        """Is this manifest digest in this repository?"""
        return self.presence(repo.at(digest))

    def presence(self, ref: Reference) -> ImageStatusValue:
        """Is this digest or tag in its repository? One HEAD per endpoint asked (a GET only if HEAD is refused).

        A mirror's `present` is taken; anything else from a mirror asks the next endpoint. At the origin, 401/403
        after authenticating is `denied`, 404 `missing`, anything left after the retries `error`.
        """
        what = f"Checking '{ref}'"
        try:
            return self._walker.walk(
                ref.repository, None, lambda e: self._presence_at(e, ref, what), lambda s: s is ImageStatus.PRESENT
            )
        except (Unauthorized, Denied):
            return ImageStatus.DENIED
        except (Transient, RateLimited, RegistryError):
            return ImageStatus.ERROR

    def _presence_at(self, endpoint: Endpoint, ref: Reference, what: str) -> ImageStatusValue:
        """One probe; a mirror's 5xx is not retried: the origin, asked next, answers for sure.

        Distribution's proxy answers 500, not 404, for a manifest its upstream lacks: retrying it cost every missing
        image 5 probes at the mirror (and 5 upstream GETs) and seconds of backoff before the origin's 404.
        """
        path = endpoint.api_path(f"manifests/{ref.identifier}")
        headers = {"Accept": ACCEPT_MANIFESTS}
        retry_5xx = not endpoint.mirror
        response = self._send("HEAD", endpoint, path, headers, stream=False, what=what, retry_5xx=retry_5xx)
        if response.status_code in _HEAD_REFUSED:
            response = self._send("GET", endpoint, path, headers, stream=True, what=what, retry_5xx=retry_5xx)
            response.close()
        return _presence(response.status_code)

    def referrers(self, repo: Repository, digest: Digest) -> bytes | None:
        """The OCI 1.1 referrers API's image index for `repo@digest`; None when the registry has no such API (404)."""
        what = f"Listing referrers of '{repo.at(digest)}'"
        return self._walker.walk(repo, None, lambda endpoint: self._referrers_at(endpoint, digest, what))

    def _referrers_at(self, endpoint: Endpoint, digest: Digest, what: str) -> bytes | None:
        path = endpoint.api_path(f"referrers/{digest}")
        accept = {"Accept": "application/vnd.oci.image.index.v1+json"}
        response = self._send("GET", endpoint, path, accept, stream=True, what=what)
        if response.status_code == 404:  # noqa: PLR2004 - no referrers API: the caller reads the tag schema instead
            response.close()
            return None
        self._raise_for(response, what)
        return self._document(response, what)

    def _document(self, response: Response, what: str) -> bytes:
        """A manifest-sized body, read whole within MAX_MANIFEST_BYTES and counted; the response is closed."""
        with contextlib.closing(response):
            try:
                raw = _read_capped(response, MAX_MANIFEST_BYTES, what)
            except Transient:
                self._deadline.remaining(what)  # a body cut off by the run's deadline says so
                raise
        self._stats.received(len(raw))
        return raw

    def list_tags(self, repo: Repository) -> list[str]:
        """Every tag of a repository, following `Link` pagination."""
        what = f"Listing tags of '{repo}'"
        return self._walker.walk(repo, f"{repo}:tags", lambda endpoint: self._tags_at(endpoint, what))

    def _tags_at(self, endpoint: Endpoint, what: str) -> list[str]:
        """Every page `Link` leads to, within `MAX_TAG_PAGES` pages, `MAX_TAGS` tags and `MAX_TAG_LIST_BYTES`."""
        tags: list[str] = []
        path: str | None = endpoint.api_path("tags/list?n=1000")
        pages: set[str] = set()
        received = 0
        while path:
            if path in pages:  # a registry whose Link leads in a circle would be walked until the deadline
                raise RegistryError(f"{what}: the registry's tag pagination goes back to a page it gave ({path})")
            if len(pages) >= MAX_TAG_PAGES:
                raise _tags_unbounded(what, endpoint, f"more than {MAX_TAG_PAGES} pages")
            pages.add(path)
            response = self._send("GET", endpoint, path, {"Accept": "application/json"}, stream=False, what=what)
            self._raise_for(response, what)
            received += len(response.content)
            self._stats.received(len(response.content))
            if received > MAX_TAG_LIST_BYTES:
                raise _tags_unbounded(what, endpoint, f"more than {MAX_TAG_LIST_BYTES >> 20} MiB")
            tags.extend(_tag_page(response, what))
            if len(tags) > MAX_TAGS:
                raise _tags_unbounded(what, endpoint, f"more than {MAX_TAGS} tags")
            path = _next_link(response, what)
        return tags


class _ShortRead(Exception):
    """The connection ended before the blob's size."""


class _StartOver(Exception):
    """The registry's answer to a Range cannot continue the kept bytes: drop them and ask without a Range."""


def _presence(status: int) -> ImageStatusValue:
    if 200 <= status < 300:  # noqa: PLR2004
        return ImageStatus.PRESENT
    if status == 404:  # noqa: PLR2004
        return ImageStatus.MISSING
    if status in {401, 403}:
        return ImageStatus.DENIED
    return ImageStatus.ERROR


def _client_error(status: int) -> bool:
    return 400 <= status < 500 and status != 429  # noqa: PLR2004


def _declared_size(response: Response, endpoint: Endpoint, what: str) -> int:
    """A HEAD answer's `Content-Length` (0 when absent): ASCII digits, at most 18 of them, else a `RegistryError`."""
    value = response.headers.get("Content-Length", "").strip()
    if value.isascii() and value.isdigit() and len(value) <= 18:  # noqa: PLR2004 - past 10^18 bytes
        return int(value)
    if not value:
        return 0
    raise RegistryError(f"{what}: {endpoint.name} sent an invalid Content-Length {shown(value)!r}")


def _content_type(response: Response) -> str:
    return response.headers.get("Content-Type", "").split(";", 1)[0].strip()


def _read_capped(response: Response, limit: int, what: str) -> bytes:
    chunks: list[bytes] = []
    total = 0
    try:
        for chunk in iter_body(response, _CHUNK):
            total += len(chunk)
            if total > limit:
                raise RegistryError(f"{what}: manifest larger than {limit} bytes")
            chunks.append(chunk)
    except BodyBroken as exc:
        raise Transient(f"{what}: connection dropped: {exc}") from None
    return b"".join(chunks)


def _tags_unbounded(what: str, endpoint: Endpoint, past: str) -> RegistryError:
    return RegistryError(
        f"{what}: {endpoint.name} sent a tag list of {past}, past what any registry sends; not read further",
        hint="a hostile or broken registry; pin a tag or a digest instead of tagSelection",
    )


def _tag_page(response: Response, what: str) -> list[str]:
    """The tags of one page: `{"tags": [names…]}` (null or absent: none); any other answer is a RegistryError.

    Read as its keys would be by Go (`oci/gokeys.py`): a `Tags` beside `tags`, which vendir would take, is refused.
    """
    try:
        body = jsondoc.go_loads(response.content, object_pairs_hook=gokeys.with_repeats)
    except ValueError:
        raise RegistryError(f"{what}: invalid JSON in the answer") from None
    try:
        gokeys.check(body, gokeys.TAG_LIST, f"{what}: the tag list")
    except UnsupportedMediaType as exc:
        raise RegistryError(exc.message) from None
    listed = (body.get("tags") or []) if isinstance(body, dict) else None
    if not isinstance(listed, list) or not all(isinstance(tag, str) for tag in listed):
        raise RegistryError(f"{what}: the answer is not a tag list")
    return listed


def _next_link(response: Response, what: str) -> str | None:
    """The path (and query) of the next page a `Link` header names; a URL that cannot be read is a RegistryError."""
    link = response.links.get("next", {}).get("url")
    if not link:
        return None
    from urllib.parse import quote, urljoin, urlsplit  # noqa: PLC0415 - only for a tag list's next page

    try:
        parts = urlsplit(urljoin(response.url, link))
    except ValueError:  # an unclosed IPv6 bracket
        raise RegistryError(f"{what}: the next page's Link is not a URL: {shown(link)!r}") from None
    target = parts.path + (f"?{parts.query}" if parts.query else "")
    return quote(target.encode("latin-1"), safe="!#$%&'()*+,/:;=?@[]~")  # the header's own bytes, escaped
