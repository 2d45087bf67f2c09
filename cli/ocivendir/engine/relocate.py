"""Owns: deciding whether a bundle is relocated, with recorded verdicts.

Trusted when positive, trusted for the recheck period when negative, re-checked with HEADs only (the locations tag,
then the recorded missing image first). A negative verdict dated in the future (recorded while the clock ran ahead)
is due at once: its age says nothing.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ocivendir.cache.index import Verdict
from ocivendir.cache.unwritable import best_effort
from ocivendir.engine.content import Content
from ocivendir.errors import RelocationUndetermined
from ocivendir.oci.imageslock import ImagesLock
from ocivendir.oci.reference import Digest, Repository
from ocivendir.oci.relocation import Probe, RelocationVerdict, evaluate, locations_ref, plan
from ocivendir.results import ImageStatus

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable

    from ocivendir.oci.relocation import RelocationVerdictValue
    from ocivendir.results import ImageStatusValue

__all__ = ["Decision", "check", "decide", "record_verdict"]


@dataclass(frozen=True, kw_only=True)
class Decision:
    """A verdict and how it was reached."""

    relocated: bool
    method: str
    from_cache: bool
    statuses: dict[Digest, ImageStatusValue] = field(default_factory=dict)
    probes: tuple[Probe, ...] = ()
    locations: Digest | None = None  # the locations image's digest, when recorded with the verdict

    def images_with(self, status: ImageStatusValue) -> tuple[str, ...]:
        """The images (as written in the lock) that have a status."""
        return tuple(p.image for p in self.probes if self.statuses.get(p.digest) is status)


def _probe_all(content: Content, probes: Iterable[Probe]) -> dict[Digest, ImageStatusValue]:
    todo = list(probes)
    if content.concurrency == 1 or len(todo) <= 1:
        return {p.digest: content.probe(p.candidate.repository, p.digest) for p in todo}
    from ocivendir.parallel import map_parallel  # noqa: PLC0415 - only when fetching in parallel

    answers = map_parallel(lambda p: content.probe(p.candidate.repository, p.digest), todo, content.concurrency)
    return {p.digest: status for p, status in zip(todo, answers, strict=True)}


def _probe_until_miss(content: Content, probes: tuple[Probe, ...]) -> dict[Digest, ImageStatusValue]:
    """Pull's probing: stop at the first definitive miss; stop early when the registry answers nothing at all."""
    statuses: dict[Digest, ImageStatusValue] = {}
    if not probes:
        return statuses
    first = probes[0]
    statuses[first.digest] = content.probe(first.candidate.repository, first.digest)
    if statuses[first.digest] is not ImageStatus.PRESENT:
        return statuses
    statuses.update(_probe_all(content, probes[1:]))
    return statuses


def check(
    content: Content,
    bundle_repo: Repository,
    digest: Digest,
    lock: ImagesLock,
    *,
    full: bool,
    use_locations: bool,
    first: Iterable[str] = (),
) -> tuple[RelocationVerdictValue, str, dict[Digest, ImageStatusValue], tuple[Probe, ...]]:
    """Ask the registry: the locations tag first (unless told not to), then per-image HEAD probes."""
    probes = plan(lock, bundle_repo, first)
    if not probes:
        return RelocationVerdict.RELOCATED, "empty", {}, probes
    if use_locations:
        found = content.probe_tag(locations_ref(bundle_repo, digest))
        if found is ImageStatus.PRESENT:
            return RelocationVerdict.RELOCATED, "locations", {}, probes
    statuses = _probe_all(content, probes) if full else _probe_until_miss(content, probes)
    return evaluate(statuses), "probes", statuses, probes


def record_verdict(
    content: Content,
    key: str,
    verdict: RelocationVerdictValue,
    method: str,
    statuses: dict[Digest, ImageStatusValue],
    probes: tuple[Probe, ...],
) -> None:
    """Record a reached verdict for `registry/repo@digest`, with the images that were missing or denied."""
    if content.index is None or verdict is RelocationVerdict.UNDETERMINED:
        return
    absent = {ImageStatus.MISSING, ImageStatus.DENIED}
    missing = [str(p.candidate) for p in probes if statuses.get(p.digest) in absent]
    relocated = verdict is RelocationVerdict.RELOCATED
    index = content.index
    best_effort(lambda: index.put_verdict(key, relocated=relocated, method=method, missing=missing), f"verdict {key}")


def _recorded(previous: Verdict) -> Decision:
    return Decision(
        relocated=previous.relocated, method=previous.method, from_cache=True, locations=previous.locations_digest
    )


def decide(
    content: Content, bundle_repo: Repository, digest: Digest, lock: ImagesLock, *, recheck_seconds: float
) -> Decision:
    """Pull's verdict: recorded when still trusted, else checked (and recorded).

    A check that cannot complete falls back to the last verdict with a warning, or fails when there is none.
    """
    key = str(bundle_repo.at(digest))
    index = content.index
    previous = index.verdict(key) if index is not None else None
    if previous is not None and (
        previous.relocated or (index is not None and 0.0 <= index.now - previous.checked_at < recheck_seconds)
    ):
        return _recorded(previous)
    verdict, method, statuses, probes = check(
        content, bundle_repo, digest, lock, full=False, use_locations=True, first=previous.missing if previous else ()
    )
    if verdict is RelocationVerdict.UNDETERMINED:
        failing = [p.image for p in probes if statuses.get(p.digest) is ImageStatus.ERROR]
        if previous is None:
            raise RelocationUndetermined(
                f"Cannot determine whether bundle '{key}' is relocated: checking {', '.join(failing)} failed",
                hint="the registry could not answer; try again when it is reachable",
            )
        content.warn(f"could not re-check relocation of '{key}'; using the verdict recorded earlier")
        return _recorded(previous)
    decision = Decision(
        relocated=verdict is RelocationVerdict.RELOCATED,
        method=method,
        from_cache=False,
        statuses=statuses,
        probes=probes,
    )
    record_verdict(content, key, verdict, method, statuses, probes)
    denied = decision.images_with(ImageStatus.DENIED)
    if denied:
        content.warn(f"access denied to {', '.join(denied)} in {bundle_repo}; treated as not relocated")
    return decision
