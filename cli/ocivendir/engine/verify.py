"""Owns: `verify-relocation` — an audit that always asks the registry whether bundles are fully relocated.

Bundle content comes from the cache as for `pull`; the locations image decides unless `--each-image` (or its
absence) asks for every image to be probed, never stopping early. Verdicts reached are recorded for `pull` and `sync`.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from ocivendir.engine.content import ClientSpec, Content
from ocivendir.engine.image import FetchedImage, extract_layers, fetch_image
from ocivendir.engine.pull import read_images_lock
from ocivendir.engine.relocate import check, record_verdict
from ocivendir.engine.sources import client_spec, select_reference
from ocivendir.errors import NotABundle, OcivendirError
from ocivendir.fs.extract import TreePolicy
from ocivendir.fs.swap import remove_tree
from ocivendir.oci.imageslock import ImagesLock
from ocivendir.oci.reference import Digest, Reference, parse_reference
from ocivendir.oci.relocation import RelocationVerdict
from ocivendir.reports import BundleReport, ImageReport, VerifyRelocationResult
from ocivendir.results import ImageStatus, LogEvent
from ocivendir.vendir.config import InputStream

__all__ = ["VerifyOptions", "bundles_of", "exit_code", "verify_relocation"]


@dataclass(frozen=True, kw_only=True)
class VerifyOptions:
    """Which bundles to audit and how."""

    references: tuple[Reference, ...]
    specs: tuple[ClientSpec, ...] = ()
    recursive: bool = False
    each_image: bool = False
    umask: int = 0o022


def _lock_of(content: Content, image: FetchedImage, options: VerifyOptions) -> ImagesLock:
    scratch = os.path.join(content.store.tmp, f"verify-{os.urandom(6).hex()}")
    os.makedirs(scratch)
    try:
        extract_layers(content, image, scratch, policy=TreePolicy(umask=options.umask, limits=content.extract_limits),
                       signed=False)  # fmt: skip
        lock, _ = read_images_lock(scratch)
    finally:
        remove_tree(scratch)
    content.record(image.repo, image.digest, image.raw, image.manifest, "bundle")
    return lock


def _report(content: Content, ref: Reference, options: VerifyOptions, seen: set[Digest]) -> BundleReport:
    try:
        image = fetch_image(content, ref)
        if not image.config.is_bundle:
            raise NotABundle("Expected bundle image but found plain image", hint="Did you use -i instead of -b?")
        lock = _lock_of(content, image, options)
    except OcivendirError as exc:
        return BundleReport(ref=str(ref), digest="", repository=str(ref.repository), method="none",
                            verdict=RelocationVerdict.UNDETERMINED, images=(), error=str(exc))  # fmt: skip
    content.events(LogEvent(message=f"Checking bundle '{image.ref}'"))
    verdict, method, statuses, probes = check(
        content, image.repo, image.digest, lock, full=True, use_locations=not options.each_image
    )
    record_verdict(content, image.ref, verdict, method, statuses, probes)
    images = tuple(
        ImageReport(image=p.image, digest=str(p.digest), status=statuses.get(p.digest, ImageStatus.UNCHECKED))
        for p in probes
    )
    signature = _signature(content, image)
    denied = [r.image for r in images if r.status is ImageStatus.DENIED]
    if denied:
        content.warn(f"access denied to {', '.join(denied)} in {image.repo}")
    nested: tuple[BundleReport, ...] = ()
    if options.recursive:
        nested = _nested(content, image, lock, verdict is RelocationVerdict.RELOCATED, options, seen)
    return BundleReport(ref=image.ref, digest=str(image.digest), repository=str(image.repo), method=method,
                        verdict=verdict, images=images, nested=nested, signature=signature)  # fmt: skip


def _signature(content: Content, image: FetchedImage) -> str | None:
    """With `--policy`: the bundle's signature verdict (verified, unmatched, warned, failed); each failure warned."""
    if content.signatures is None:
        return None
    verdict, failed = content.signatures.verdict(content, image)
    for outcome in failed:
        content.warn(outcome.describe(image.ref))
    return verdict


def _nested(content: Content, image: FetchedImage, lock: ImagesLock, relocated: bool, options: VerifyOptions,
            seen: set[Digest]) -> tuple[BundleReport, ...]:  # fmt: skip
    reports = []
    for entry in lock.images:
        digest = entry.reference.digest
        if digest is None or digest in seen:
            continue
        primary = image.repo.at(digest) if relocated else entry.reference
        try:
            candidate = fetch_image(content, primary)
        except OcivendirError:
            continue  # the image itself was already reported by its probe
        if candidate.config.is_bundle:
            seen.add(digest)
            reports.append(_report(content, primary, options, seen))
    return tuple(reports)


def verify_relocation(options: VerifyOptions, content: Content) -> VerifyRelocationResult:
    """Audit every bundle; never answers from recorded verdicts."""
    seen: set[Digest] = set()
    specs = options.specs or (ClientSpec(),) * len(options.references)
    bundles = tuple(
        _report(content.view(spec), ref, options, seen) for ref, spec in zip(options.references, specs, strict=True)
    )
    return VerifyRelocationResult(bundles=bundles, requests=content.requests, warnings=tuple(content.warnings))


def bundles_of(stream: InputStream, content: Content) -> tuple[tuple[Reference, ...], tuple[ClientSpec, ...]]:
    """Every imgpkgBundle of a vendir.yml, with tags and tagSelection resolved as `sync` does (its secretRef)."""
    references: list[Reference] = []
    specs: list[ClientSpec] = []
    for directory in stream.config.directories:
        for config in directory.contents:
            if config.source_type != "imgpkgBundle":
                continue
            url = str(config.source.get("image") or "")
            spec = client_spec(stream, config.source, url)
            selected = select_reference(content.view(spec), url, config.source)
            references.append(parse_reference(selected))
            specs.append(spec)
    return tuple(references), tuple(specs)


def _all(reports: tuple[BundleReport, ...]) -> list[BundleReport]:
    flat: list[BundleReport] = []
    for report in reports:
        flat.append(report)
        flat.extend(_all(report.nested))
    return flat


def exit_code(result: VerifyRelocationResult) -> int:
    """1 if a verdict could not be reached or a signature policy refuses a bundle, 3 if a bundle is not relocated."""
    verdicts = {r.verdict for r in _all(result.bundles)}
    if RelocationVerdict.UNDETERMINED in verdicts or any(r.signature == "failed" for r in _all(result.bundles)):
        return 1
    if RelocationVerdict.NOT_RELOCATED in verdicts:
        return 3
    return 0
