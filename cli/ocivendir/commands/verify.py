"""Owns: the `verify-relocation` command — the CI gate after `imgpkg copy`."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

import click

from ocivendir.commands.options import global_options, registry_options
from ocivendir.errors import UsageError

if TYPE_CHECKING:
    from ocivendir.reports import BundleReport, VerifyRelocationResult

__all__ = ["verify_relocation"]


def _summary(report: BundleReport) -> str:
    signed = f" (signature: {report.signature})" if report.signature else ""
    return _relocation(report) + signed


def _relocation(report: BundleReport) -> str:
    from ocivendir.results import ImageStatus  # noqa: PLC0415 - `--help` stays light

    if report.error:
        return f"{report.ref}: undetermined ({report.error})"
    if report.verdict == "relocated":
        return f"{report.ref}: relocated"
    if report.verdict == "not-relocated":
        missing = sum(1 for i in report.images if i.status is ImageStatus.MISSING)
        denied = sum(1 for i in report.images if i.status is ImageStatus.DENIED)
        return f"{report.ref}: not relocated ({missing} missing, {denied} denied)"
    return f"{report.ref}: undetermined"


def _rows(report: BundleReport, depth: int) -> list[list[str]]:
    pad = "  " * depth
    rows = [[pad + i.image, i.digest, i.status] for i in report.images]
    for child in report.nested:
        rows.append([f"{pad}  (nested bundle) {child.ref}", child.digest, child.verdict])
        rows.extend(_rows(child, depth + 1))
    return rows


def _render(result: VerifyRelocationResult, output: object) -> None:
    from ocivendir.output import Output  # noqa: PLC0415

    assert isinstance(output, Output)  # noqa: S101 - typing aid
    for report in result.bundles:
        if report.images or report.nested:
            output.table(["IMAGE", "DIGEST", "STATUS"], _rows(report, 0))
        output.block(_summary(report) + "\n")
        for child in report.nested:
            output.block(_summary(child) + "\n")


@click.command("verify-relocation")
@click.option("-b", "--bundle", "bundles", metavar="REF", multiple=True, help="Bundle to check (repeatable).")
@click.option("-f", "--file", "files", metavar="FILE", multiple=True,
              help="vendir.yml: check every imgpkgBundle source in it (repeatable).")  # fmt: skip
@click.option("-r", "--recursive", is_flag=True, help="Also check nested bundles, each against its own repository.")
@click.option("--each-image", is_flag=True, help="Ignore the locations image and probe every image.")
@registry_options
@global_options
@click.pass_context
def verify_relocation(ctx: click.Context, bundles: tuple[str, ...], files: tuple[str, ...], recursive: bool,
                      each_image: bool) -> int:  # fmt: skip
    """Check that every image of a bundle lives in the bundle's own repository (as `imgpkg copy` leaves it).

    Exit 0 when every bundle is fully relocated, 3 when one is not, 1 when a verdict cannot be reached (registry
    unreachable, auth failure on the bundle, not a bundle) or, with --policy, a signature policy refuses a bundle
    (each summary then ends with its signature status). It always asks the registry and records what it learns.

    \b
    Examples:
      ocivendir verify-relocation -b registry.internal/mirror/app@sha256:…
      ocivendir verify-relocation -b registry.internal/mirror/app:v1 -r --each-image --json
      ocivendir verify-relocation -f vendir.yml
    """
    from ocivendir.commands.runtime import Run, open_content  # noqa: PLC0415 - `--help` stays light
    from ocivendir.engine.content import ClientSpec  # noqa: PLC0415
    from ocivendir.engine.verify import VerifyOptions, bundles_of, exit_code  # noqa: PLC0415
    from ocivendir.engine.verify import verify_relocation as run_verify  # noqa: PLC0415
    from ocivendir.oci.reference import parse_reference  # noqa: PLC0415

    if not bundles and not files:
        raise UsageError("Expected at least one bundle (-b REF) or vendir.yml (-f FILE)")
    references = tuple(parse_reference(b) for b in bundles)
    stream = None
    if files:
        from ocivendir.commands.syncrun import read_inputs, split_values  # noqa: PLC0415
        from ocivendir.vendir.config import parse_stream  # noqa: PLC0415

        stream = parse_stream(read_inputs(split_values(files), sys.stdin))
    run = Run.start(ctx)
    with open_content(run, target=None) as (content, _):
        specs = (ClientSpec(),) * len(references)
        if stream is not None:
            found, found_specs = bundles_of(stream, content)
            references, specs = references + found, specs + found_specs
        options = VerifyOptions(references=references, specs=specs, recursive=recursive, each_image=each_image,
                                umask=run.settings.umask)  # fmt: skip
        result = run_verify(options, content)
    code = exit_code(result)
    _render(result, run.output)
    run.output.envelope("verify-relocation", {0: "ok", 3: "not-relocated"}.get(code, "error"), result)
    return code
