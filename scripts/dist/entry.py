"""Owns: the frozen build's entry point — ocivendir's run(), vendir mode from argv[0] as with the console script."""

from __future__ import annotations

from ocivendir.commands import run

run()
