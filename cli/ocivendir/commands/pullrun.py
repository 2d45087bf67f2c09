"""Owns: one `pull` run from its parsed flags — imgpkg's checks, the `-o` guard, one engine call and its rendering.

Shared by the click command (`commands/pull.py`) and the click-free fast path (`commands/pullargs.py`), so a warm
`ocivendir pull -b REF@sha256:… -o DIR` (and imgpkg mode's `imgpkg pull`) never imports click.
"""

from __future__ import annotations

import os
from contextlib import contextmanager
from dataclasses import dataclass

from ocivendir.errors import RegistryError, UsageError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

    from ocivendir.commands.runtime import Run
    from ocivendir.settings import Settings

__all__ = ["PullFlags", "run_pull"]

DISALLOWED = "Disallowed output directory (trying to avoid accidental deletion)"


@dataclass(frozen=True, kw_only=True)
class PullFlags:
    """`pull`'s own flags, as given (click's parameter names and defaults)."""

    bundle: str | None = None
    image: str | None = None
    lock: str | None = None
    output: str | None = None
    recursive: bool = False
    image_is_bundle_check: bool = True


def _check(flags: PullFlags) -> None:
    bundle, image, lock, output = flags.bundle, flags.image, flags.lock, flags.output
    if not output:
        raise UsageError('required flag(s) "output" not set')
    if output in {"/", ".", ".."}:
        raise UsageError(DISALLOWED)
    given = [x for x in (bundle, image, lock) if x]
    if len(given) > 1:
        raise UsageError("Expected only one of image, bundle, or lock")
    if not given:
        raise UsageError("Expected either image or bundle reference")
    if flags.recursive and image:
        raise UsageError("Cannot use --recursive (-r) flag when pulling a bundle")
    if not flags.image_is_bundle_check and (bundle or lock):
        raise UsageError("Cannot set --image-is-bundle-check while using -b flag")


def _output_target(output: str, settings: Settings) -> str:
    """Where `-o` really is, once it spares the working directory, HOME and the cache (checked after resolution)."""
    from ocivendir.fs.paths import Guard, UnsafePath, replace_target  # noqa: PLC0415

    guards = [Guard.of(os.getcwd(), "the working directory")]
    if settings.home is not None:
        guards.append(Guard.of(settings.home, "the home directory"))
    if settings.cache_dir is not None:
        guards.append(Guard.of(settings.cache_dir, "the cache", inside=True))
    try:
        return replace_target(output, guards, directory_only=True)
    except UnsafePath as exc:
        raise UsageError(f"{DISALLOWED}: '{output}' {exc}") from None


@contextmanager
def _imgpkg_frames(active: bool) -> Iterator[None]:
    """In imgpkg mode, a failure fetching the reference itself reads as imgpkg's `Fetching image: <ggcr's text>`."""
    try:
        yield
    except RegistryError as exc:
        if not (active and exc.top_fetch and exc.transport):
            raise
        framed = exc.reworded(f"Fetching image: {exc.transport}")
        framed.transport, framed.top_fetch = None, False  # framed once: an enclosing frame leaves it as it is
        raise framed from exc


def _fetch_first(run: Run, reference: str) -> None:
    """In imgpkg mode: imgpkg fetches the image before it looks at -o, so its registry failure is the one reported."""
    from ocivendir.commands.runtime import open_content  # noqa: PLC0415
    from ocivendir.engine.pull import fetch_top  # noqa: PLC0415
    from ocivendir.oci.reference import parse_reference  # noqa: PLC0415

    with open_content(run, target=None) as (content, _lock_dir):
        fetch_top(content, parse_reference(reference))


def run_pull(flags: PullFlags, start: Callable[[], Run]) -> None:
    """Pull as imgpkg does; `start` makes the Run once the flags have passed imgpkg's checks."""
    from ocivendir.commands.runtime import open_content  # noqa: PLC0415
    from ocivendir.engine.pull import PullOptions  # noqa: PLC0415
    from ocivendir.engine.pull import pull as engine_pull  # noqa: PLC0415
    from ocivendir.oci.reference import parse_reference  # noqa: PLC0415

    _check(flags)
    reference = flags.bundle or flags.image
    if reference:
        parse_reference(reference)  # a bad reference fails before anything is created
    run = start()
    assert flags.output is not None  # noqa: S101 - checked by _check
    imgpkg = run.output.mode.prog == "imgpkg"
    try:
        target = _output_target(flags.output, run.settings)
    except UsageError:
        if imgpkg and reference:
            with _imgpkg_frames(active=True):
                _fetch_first(run, reference)
        raise
    options = PullOptions(
        reference=reference,
        lock_file=flags.lock or None,
        mode="image" if flags.image else "bundle",
        output=target,
        recursive=flags.recursive,
        image_is_bundle_check=flags.image_is_bundle_check,
        umask=run.settings.umask,
        relocation_recheck=run.settings.relocation_recheck,
    )
    with _imgpkg_frames(active=imgpkg), open_content(run, target=target) as (content, lock_dir):
        result = engine_pull(options, content, lock_dir)
    run.output.line("")
    run.output.line("Succeeded")
    run.output.envelope("pull", "ok", result)
