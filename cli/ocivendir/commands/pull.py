"""Owns: the `pull` command — imgpkg's flags and checks, then one engine call and its rendering."""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import TYPE_CHECKING

import click

from ocivendir.commands.options import global_options, registry_options
from ocivendir.errors import RegistryError, UsageError

if TYPE_CHECKING:
    from collections.abc import Iterator

    from ocivendir.commands.runtime import Run
    from ocivendir.settings import Settings

__all__ = ["pull"]

DISALLOWED = "Disallowed output directory (trying to avoid accidental deletion)"


def _check(bundle: str | None, image: str | None, lock: str | None, output: str | None, recursive: bool,
           bundle_check: bool) -> None:  # fmt: skip
    if not output:
        raise UsageError('required flag(s) "output" not set')
    if output in {"/", ".", ".."}:
        raise UsageError(DISALLOWED)
    given = [x for x in (bundle, image, lock) if x]
    if len(given) > 1:
        raise UsageError("Expected only one of image, bundle, or lock")
    if not given:
        raise UsageError("Expected either image or bundle reference")
    if recursive and image:
        raise UsageError("Cannot use --recursive (-r) flag when pulling a bundle")
    if not bundle_check and (bundle or lock):
        raise UsageError("Cannot set --image-is-bundle-check while using -b flag")


def _output_target(output: str, settings: Settings) -> Path:
    """Where `-o` really is, once it spares the working directory, HOME and the cache (checked after resolution)."""
    from ocivendir.fs.paths import Guard, UnsafePath, replace_target  # noqa: PLC0415

    guards = [Guard.of(Path.cwd(), "the working directory")]
    if settings.home is not None:
        guards.append(Guard.of(settings.home, "the home directory"))
    if settings.cache_dir is not None:
        guards.append(Guard.of(settings.cache_dir, "the cache", inside=True))
    try:
        return replace_target(output, guards, directory_only=True)
    except UnsafePath as exc:
        raise UsageError(f"{DISALLOWED}: '{output}' {exc}") from None


@contextlib.contextmanager
def _imgpkg_frames(active: bool) -> Iterator[None]:
    """In imgpkg mode, a failure fetching the reference itself reads as imgpkg's `Fetching image: <ggcr's text>`."""
    try:
        yield
    except RegistryError as exc:
        if not (active and exc.top_fetch and exc.transport):
            raise
        raise type(exc)(f"Fetching image: {exc.transport}") from exc


def _fetch_first(run: Run, reference: str) -> None:
    """In imgpkg mode: imgpkg fetches the image before it looks at -o, so its registry failure is the one reported."""
    from ocivendir.commands.runtime import open_content  # noqa: PLC0415
    from ocivendir.engine.pull import fetch_top  # noqa: PLC0415
    from ocivendir.oci.reference import parse_reference  # noqa: PLC0415

    with open_content(run, target=None) as (content, _lock_dir):
        fetch_top(content, parse_reference(reference))


@click.command()
@click.option("-b", "--bundle", metavar="REF", help="Bundle reference to pull.")
@click.option("-i", "--image", metavar="REF", help="Image reference to pull.")
@click.option("--lock", metavar="FILE", help="BundleLock file naming the bundle to pull.")
@click.option("-o", "--output", metavar="DIR", help="Output directory (replaced only after a complete pull).")
@click.option("-r", "--recursive", is_flag=True, help="Also pull nested bundles into .imgpkg/bundles/.")
@click.option("--image-is-bundle-check", type=bool, default=True, show_default=True,
              help="With -i, set to false to pull a bundle as a plain image.")  # fmt: skip
@registry_options
@global_options
@click.pass_context
def pull(ctx: click.Context, bundle: str | None, image: str | None, lock: str | None, output: str | None,
         recursive: bool, image_is_bundle_check: bool) -> None:  # fmt: skip
    """Pull an image or bundle into a directory, as `imgpkg pull` does.

    Digest-pinned content already in the cache is served with no registry request; a tag costs one HEAD.
    A relocated bundle gets its .imgpkg/images.yml rewritten to the bundle's repository, exactly as imgpkg does.

    \b
    Examples:
      ocivendir pull -b registry.example.com/app/bundle@sha256:… -o ./bundle
      ocivendir pull -i registry.example.com/app/config:v1 -o ./config
      ocivendir pull --lock bundle.lock.yml -o ./bundle -r
    """
    from ocivendir.commands.runtime import Run, open_content, prog_name  # noqa: PLC0415 - `--help` stays light
    from ocivendir.engine.pull import PullOptions  # noqa: PLC0415
    from ocivendir.engine.pull import pull as run_pull  # noqa: PLC0415
    from ocivendir.oci.reference import parse_reference  # noqa: PLC0415

    _check(bundle, image, lock, output, recursive, image_is_bundle_check)
    if bundle or image:
        parse_reference(str(bundle or image))  # a bad reference fails before anything is created
    run = Run.start(ctx)
    assert output is not None  # noqa: S101 - checked by _check
    imgpkg = prog_name(ctx) == "imgpkg"
    try:
        target = _output_target(output, run.settings)
    except UsageError:
        if imgpkg and (bundle or image):
            with _imgpkg_frames(active=True):
                _fetch_first(run, str(bundle or image))
        raise
    options = PullOptions(
        reference=bundle or image,
        lock_file=Path(lock) if lock else None,
        mode="image" if image else "bundle",
        output=target,
        recursive=recursive,
        image_is_bundle_check=image_is_bundle_check,
        umask=run.settings.umask,
        relocation_recheck=run.settings.relocation_recheck,
    )
    with _imgpkg_frames(active=imgpkg), open_content(run, target=target) as (content, lock_dir):
        result = run_pull(options, content, lock_dir)
    run.output.line("")
    run.output.line("Succeeded")
    run.output.envelope("pull", "ok", result)
