"""Owns: the small Markdown formatting helpers of the report (figures with their spread, ratios, tables)."""

from __future__ import annotations

from typing import Any

Row = dict[str, Any]


def stat(figure: Row, unit: str = "s", scale: float = 1.0, digits: int = 3) -> str:
    """`median (min–max, n=N)` of a measured figure."""
    median, low, high = (figure[key] * scale for key in ("median", "min", "max"))
    return f"{median:.{digits}f} {unit} ({low:.{digits}f}–{high:.{digits}f}, n={figure['n']})"


def mib(kib: float) -> str:
    """KiB as MiB with one decimal."""
    return f"{kib / 1024:.1f}"


def ratio(value: float, base: float) -> str:
    """`value / base`, or a dash when the base is zero."""
    return f"{value / base:.2f}" if base else "-"


def table(header: list[str], rows: list[list[str]]) -> list[str]:
    """A Markdown table."""
    return ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)] + ["| " + " | ".join(r) + " |" for r in rows]


def one_line(text: str) -> str:
    """A process's stderr as one line of inline code (its last 300 characters)."""
    return " ".join(text.split()).replace("`", "'")[-300:]
