"""Owns: `pull`.

Fetch an image or bundle (with nested bundles under -r), verify and extract it into a stage, settle images.yml by
the relocation verdict, and swap the stage in place of the output directory.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from ocivendir.cache.unwritable import best_effort
from ocivendir.engine.content import Content
from ocivendir.engine.image import FetchedImage, extract_layers, fetch_image, layer_stream
from ocivendir.engine.relocate import Decision, decide
from ocivendir.errors import ImagesLockError, IndexNotSupported, IsABundle, NotABundle, RegistryError, UsageError
from ocivendir.fs.extract import TreePolicy
from ocivendir.fs.locks import target_lock
from ocivendir.fs.paths import absolute, pure, split
from ocivendir.fs.swap import STAGE, new_sibling, remove_tree
from ocivendir.fs.swapping import recover, swap_set
from ocivendir.fs.tarread import TarReader
from ocivendir.oci.imageslock import MAX_IMAGES_LOCK_BYTES, ImagesLock, parse_bundle_lock, parse_image_locations
from ocivendir.oci.lockmemo import images_lock, rewritten
from ocivendir.oci.reference import Digest, Reference, Repository, parse_reference
from ocivendir.oci.relocation import locations_ref
from ocivendir.results import ImageStatus, LogEvent, PullResult, RelocationOutcome

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Literal

    from ocivendir.fs.extract import DirectoryRule

__all__ = ["BundlePuller", "PullOptions", "PullTally", "fetch_top", "pull", "read_images_lock", "settle_bundle"]

RELOCATED_MESSAGE = (
    "The bundle repo ({repo}) is hosting every image specified in the bundle's Images Lock file (.imgpkg/images.yml)"
)
NOT_RELOCATED_MESSAGE = "One or more images not found in bundle repo; skipping lock file update"
MAX_HINTS = 4 << 20  # bytes of the locations layer, and of its image-locations.yml: real ones hold a few KiB


@dataclass(frozen=True, kw_only=True)
class PullOptions:
    """What to pull and where (imgpkg's flags, already validated for combinations)."""

    reference: str | None
    lock_file: str | os.PathLike[str] | None
    mode: Literal["bundle", "image"]
    output: str | os.PathLike[str]
    recursive: bool = False
    image_is_bundle_check: bool = True
    umask: int = 0o022
    relocation_recheck: float = 3600.0
    directories: DirectoryRule = "parents"  # sync's imgpkgBundle contents use vendir's rule ("entries")


@dataclass
class PullTally:
    """What a bundle pull produced, for the result."""

    layers: int = 0
    skipped: int = 0
    nested: list[str] = field(default_factory=list)
    relocation: RelocationOutcome | None = None


def _reference(options: PullOptions) -> Reference:
    if options.lock_file is not None:
        try:
            with open(options.lock_file, "rb") as handle:
                raw = handle.read()
        except OSError as exc:
            raise UsageError(f"Reading bundle lock '{options.lock_file}': {exc.strerror}") from None
        try:
            return parse_bundle_lock(raw).image
        except ImagesLockError as exc:  # the user's own file: a usage error, not something fetched
            raise UsageError(f"Reading bundle lock '{options.lock_file}': {exc.message}") from None
    if options.reference is None:  # pragma: no cover - the command checks this first
        raise UsageError("Expected either image or bundle reference")
    return parse_reference(options.reference)


def _policy(content: Content, options: PullOptions) -> TreePolicy:
    return TreePolicy(umask=options.umask, directories=options.directories, limits=content.extract_limits)


def _check_kind(image: FetchedImage, options: PullOptions) -> None:
    if options.mode == "bundle" and not image.config.is_bundle:
        raise NotABundle("Expected bundle image but found plain image", hint="Did you use -i instead of -b?")
    if options.mode == "image" and image.config.is_bundle and options.image_is_bundle_check:
        raise IsABundle("Expected bundle flag when pulling a bundle", hint="Use -b instead of -i for bundles")


def read_images_lock(root: str | os.PathLike[str]) -> tuple[ImagesLock, str]:
    """Parse `<root>/.imgpkg/images.yml` strictly, with imgpkg's message when it is missing."""
    path = os.path.join(pure(root), ".imgpkg", "images.yml")
    try:
        with open(path, "rb", buffering=0) as raw:  # unbuffered: no terminal check nor buffer around a small file
            if os.fstat(raw.fileno()).st_size > MAX_IMAGES_LOCK_BYTES:  # the stage's own file: its size stays
                raise ImagesLockError(f"Reading path {path}: the file is larger than the {MAX_IMAGES_LOCK_BYTES} "
                                      "bytes an images lock may be")  # fmt: skip
            return images_lock(raw.readall()), path
    except FileNotFoundError:
        raise ImagesLockError(f"Reading path {path}: open {path}: no such file or directory") from None


def settle_bundle(content: Content, image: FetchedImage, root: str, *, recheck: float) -> tuple[ImagesLock, Decision]:
    """Validate a staged bundle's images.yml and rewrite it (keeping its mode) when the bundle is relocated."""
    lock, path = read_images_lock(root)
    decision = decide(content, image.repo, image.digest, lock, recheck_seconds=recheck)
    if decision.relocated:
        with open(path, "r+b") as handle:  # in place, like imgpkg's WriteFile: the extracted mode stays
            handle.write(rewritten(lock, image.repo))
            handle.truncate()
    return lock, decision


def _outcome(image: FetchedImage, decision: Decision) -> RelocationOutcome:
    return RelocationOutcome(
        bundle_repo=str(image.repo),
        relocated=decision.relocated,
        method=decision.method,
        rewritten=decision.relocated,
        from_cache=decision.from_cache,
        missing=decision.images_with(ImageStatus.MISSING),
        denied=decision.images_with(ImageStatus.DENIED),
    )


def _locations_image(content: Content, repo: Repository, digest: Digest, known: Digest | None) -> FetchedImage:
    """The locations image: by its recorded digest (from the cache), else by its tag, recording the digest it has."""
    if known is not None:
        return fetch_image(content, repo.at(known))
    located = fetch_image(content, locations_ref(repo, digest))
    if content.index is not None and content.index.verdict(str(repo.at(digest))) is not None:
        index, key = content.index, str(repo.at(digest))
        best_effort(lambda: index.put_locations(key, located.digest), f"the locations of {key}")
    return located


def _bundle_hints(content: Content, repo: Repository, digest: Digest, known: Digest | None) -> dict[Digest, bool]:
    """IsBundle hints from the locations image, if it exists and follows imgpkg's rules; else none."""
    try:
        located = _locations_image(content, repo, digest, known)
    except Exception:  # noqa: BLE001 - any failure means no hints; nested bundles are then probed
        return {}
    content.record(located.repo, located.digest, located.raw, located.manifest, "locations")
    if len(located.manifest.layers) != 1 or located.manifest.layers[0].size > MAX_HINTS:
        return {}  # hints save requests; a layer too large to be real ones is neither downloaded nor read
    hints: dict[Digest, bool] = {}
    try:
        import io  # noqa: PLC0415

        content.ensure_blobs(located.repo, located.manifest.layers)
        layer = located.manifest.layers[0]
        data = content.store.read_verified(layer.digest, layer.size, "locations image")
        archive = TarReader(layer_stream(io.BytesIO(data), layer.media_type, "locations image"))
        for member in archive:
            if split(member.name)[1] == "image-locations.yml" and member.isreg() and member.size <= MAX_HINTS:
                for entry in parse_image_locations(b"".join(iter(archive.read, b""))):
                    ref = parse_reference(entry.image)
                    if ref.digest is not None:
                        hints[ref.digest] = entry.is_bundle
                break
    except Exception:  # noqa: BLE001, S110 - any failure means no hints; nested bundles are then probed
        pass
    return hints


class BundlePuller:
    """One pull: the root and, under -r, every nested bundle flattened under the root's `.imgpkg/bundles/`."""

    def __init__(self, content: Content, options: PullOptions) -> None:
        """A puller for one root bundle; `seen` holds the digests already pulled (duplicates are pulled once)."""
        self.content = content
        self.options = options
        self.seen: set[Digest] = set()

    def bundle(self, image: FetchedImage, dest: str, pulled: PullTally, depth: int, root: str) -> None:
        """Extract a bundle into `dest`, settle its images.yml against its own repository, then its nested ones."""
        stats = extract_layers(self.content, image, dest, policy=_policy(self.content, self.options), indent=depth * 2)
        pulled.layers += len(image.manifest.layers)
        pulled.skipped += stats.skipped
        lock, decision = settle_bundle(self.content, image, dest, recheck=self.options.relocation_recheck)
        if depth == 0:
            pulled.relocation = _outcome(image, decision)
        if self.options.recursive:
            self.nested(image, lock, decision, pulled, depth, root)
        self.content.record(image.repo, image.digest, image.raw, image.manifest, "bundle")

    def nested(
        self, image: FetchedImage, lock: ImagesLock, decision: Decision, pulled: PullTally, depth: int, root: str
    ) -> None:
        """Pull the bundles a lock names (found by locations hints or IsBundle probes) under the root's bundles/."""
        hints = {}
        if decision.method == "locations":
            hints = _bundle_hints(self.content, image.repo, image.digest, decision.locations)
        found = []
        for entry in lock.images:
            digest = entry.reference.digest
            if digest is None or hints.get(digest) is False:
                continue
            primary = image.repo.at(digest) if decision.relocated else entry.reference
            try:
                candidate = fetch_image(self.content, primary)
            except IndexNotSupported:
                continue  # imgpkg's IsBundle: an index is not a bundle, and no error
            if candidate.config.is_bundle:
                found.append(candidate)
        if found and depth == 0:
            self.content.events(LogEvent(message="Nested bundles"))
        for child in found:
            if child.digest in self.seen:
                self.content.events(LogEvent(message="Skipped, already downloaded", indent=(depth + 1) * 2))
                continue
            self.seen.add(child.digest)
            self.content.events(LogEvent(message=f"Pulling nested bundle '{child.ref}'", indent=(depth + 1) * 2))
            dest = os.path.join(root, ".imgpkg", "bundles", child.digest.tag_form)
            os.makedirs(dest, 0o777 & ~self.options.umask, exist_ok=True)
            pulled.nested.append(child.ref)
            self.bundle(child, dest, pulled, depth + 1, root)


def _relocation_lines(content: Content, outcome: RelocationOutcome) -> None:
    content.events(LogEvent(message=""))
    content.events(LogEvent(message="Locating image lock file images..."))
    if outcome.relocated:
        content.events(LogEvent(message=RELOCATED_MESSAGE.format(repo=outcome.bundle_repo)))
        return
    content.events(LogEvent(message=NOT_RELOCATED_MESSAGE))
    for image in outcome.missing:
        content.events(LogEvent(message=f"missing: {image}", indent=2))
    for image in outcome.denied:
        content.events(LogEvent(message=f"denied: {image}", indent=2))


def fetch_top(content: Content, ref: Reference) -> FetchedImage:
    """The reference asked for, fetched; a registry failure here is marked as the top fetch's (imgpkg frames it)."""
    try:
        return fetch_image(content, ref)
    except RegistryError as exc:
        exc.top_fetch = True
        raise


def _fill(content: Content, options: PullOptions, stage: str) -> tuple[FetchedImage, PullTally]:
    ref = _reference(options)
    image = fetch_top(content, ref)
    _check_kind(image, options)
    pulled = PullTally()
    as_bundle = options.mode == "bundle"
    noun = "bundle" if as_bundle else "image"
    content.events(LogEvent(message=f"Pulling {noun} '{image.ref}'"))
    if as_bundle:
        puller = BundlePuller(content, options)
        puller.seen.add(image.digest)
        puller.bundle(image, stage, pulled, 0, stage)
        if pulled.relocation is not None:
            _relocation_lines(content, pulled.relocation)
    else:
        stats = extract_layers(content, image, stage, policy=_policy(content, options))
        pulled.layers, pulled.skipped = len(image.manifest.layers), stats.skipped
        content.record(image.repo, image.digest, image.raw, image.manifest, image.kind)
    return image, pulled


def pull(options: PullOptions, content: Content, lock_dir: str) -> PullResult:
    """Pull into a stage and swap it in; on any failure the previous output directory is left as it was."""
    target = absolute(options.output)
    os.makedirs(os.path.dirname(target), exist_ok=True)
    with target_lock(lock_dir, target):
        recover(target, keep=content.store.root)
        stage = new_sibling(target, STAGE)
        os.mkdir(stage, 0o700)  # nobody else may write in it while it is filled (a umask of 0 would let anyone)
        try:
            image, pulled = _fill(content, options, stage)
            os.chmod(stage, 0o777 & ~options.umask)  # imgpkg's mode for the output directory, once it is complete
        except BaseException:
            remove_tree(stage)
            raise
        swap_set([(stage, target)])  # one target: one atomic step, the stage removed if it fails, the old tree after
    return PullResult(
        ref=image.ref,
        digest=str(image.digest),
        kind=image.kind,
        output=str(target),
        layers=pulled.layers,
        bytes_fetched=content.counters.bytes_fetched,
        cache_hits=content.counters.hits,
        skipped_entries=pulled.skipped,
        relocation=pulled.relocation,
        nested=tuple(pulled.nested),
        requests=content.requests,
        warnings=tuple(content.warnings),
    )
