"""Owns: the `pull` command's flags (click); the run itself is `commands/pullrun.py`."""

from __future__ import annotations

import click

from ocivendir.commands.options import global_options, registry_options
from ocivendir.commands.pullrun import PullFlags, run_pull

__all__ = ["pull"]


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
    from ocivendir.commands.runtime import Run  # noqa: PLC0415 - `--help` stays light

    flags = PullFlags(bundle=bundle, image=image, lock=lock, output=output, recursive=recursive,
                      image_is_bundle_check=image_is_bundle_check)  # fmt: skip
    run_pull(flags, lambda: Run.start(ctx))
