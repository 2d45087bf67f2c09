"""Owns: `python -m ocivendir`."""

from __future__ import annotations

from ocivendir.commands import run

__all__: list[str] = []

if __name__ == "__main__":
    run()
