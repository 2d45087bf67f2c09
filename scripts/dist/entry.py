"""Owns: the frozen build's entry point — ocivendir's main(), vendir mode from argv[0] as with the console script."""

from __future__ import annotations

from ocivendir.commands import main

main()
