"""Owns: the pictures beside RESULTS.md — SVGs drawn from exactly the figures in results.json.

`fleet.svg`: CPU seconds and registry requests per round, one bar per tool, one row of panels per fleet variant.
`pull.svg`: cold-pull wall and CPU time against the bundle's size, one line per tool, log-log, the min–max of the
repetitions as error bars. Drawn with matplotlib (the `bench` extra, never a runtime dependency) on its SVG backend,
with the date and ids fixed, so the same results.json gives the same bytes and a re-render is a no-op in git.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pathlib import Path

    from matplotlib.axes import Axes

    from bench.markdown import Row

__all__ = ["FLEET_SVG", "PULL_SVG", "chart_names", "write_charts"]

FLEET_SVG = "fleet.svg"
PULL_SVG = "pull.svg"
_VARIANT_TITLES = {
    "per_app_cache": "one cache per App",
    "shared_cache": "one shared cache",
    "concurrency_4": "one cache per App, 4 in flight",
}
_MIB = 1 << 20


def chart_names(results: Row) -> list[str]:
    """The SVGs a report of `results` shows (and `write_charts` writes): only for scenarios that ran."""
    names = []
    if "not_run" not in results["fleet"] and _fleet_variants(results["fleet"]):
        names.append(FLEET_SVG)
    if "not_run" not in results["pull"] and _single_layer_cases(results["pull"]):
        names.append(PULL_SVG)
    return names


def write_charts(results: Row, out: Path) -> list[Path]:
    """Draw every chart `chart_names` lists into `out`; the paths written."""
    import matplotlib as mpl  # noqa: PLC0415 - the bench extra, loaded only to draw

    mpl.use("svg")
    mpl.rcParams.update({"svg.hashsalt": "ocivendir-bench", "svg.fonttype": "none", "font.size": 9})
    written = []
    for name in chart_names(results):
        draw = _fleet if name == FLEET_SVG else _pull
        figure = draw(results)
        path = out / name
        figure.savefig(path, format="svg", metadata={"Date": None}, bbox_inches="tight")
        import matplotlib.pyplot as plt  # noqa: PLC0415

        plt.close(figure)
        written.append(path)
    return written


def _fleet_variants(fleet: Row) -> dict[str, dict[str, list[Row]]]:
    """Variant -> tool -> rounds, for the tools that ran rounds."""
    variants = {"per_app_cache": fleet, **fleet.get("variants", {})}
    out = {}
    for name, variant in variants.items():
        tools = {tool: figures["rounds"] for tool, figures in variant["tools"].items() if figures.get("rounds")}
        if tools:
            out[name] = tools
    return out


def _fleet(results: Row) -> Any:  # noqa: ANN401 - a matplotlib Figure
    import matplotlib.pyplot as plt  # noqa: PLC0415

    fleet = results["fleet"]
    variants = _fleet_variants(fleet)
    figure, axes = plt.subplots(len(variants), 2, figsize=(11, 3.2 * len(variants)), squeeze=False)
    for row, (name, tools) in enumerate(variants.items()):
        title = _VARIANT_TITLES.get(name, name.replace("_", " "))
        _round_bars(axes[row][0], tools, "cpu_s", f"CPU per round, {title}", "CPU seconds (user+sys, all processes)")
        _round_bars(axes[row][1], tools, "requests", f"Registry requests per round, {title}", "requests (log scale)")
        axes[row][1].set_yscale("symlog", linthresh=1)
        axes[row][1].yaxis.set_major_formatter(_plain())
        axes[row][1].set_ylim(0, axes[row][1].get_ylim()[1] * 4)  # room for the counts above the bars
    figure.legend(
        *axes[0][0].get_legend_handles_labels(),
        loc="lower center",
        ncol=3,
        fontsize=8,
        bbox_to_anchor=(0.5, -0.04 * (3 / len(variants))),
    )
    figure.suptitle(
        f"Fleet of {fleet['apps']} Apps: round 1 cold, then warm rounds, the last with the registry stopped",
        fontsize=11,
    )
    figure.tight_layout()
    return figure


def _round_bars(axes: Axes, tools: dict[str, list[Row]], key: str, title: str, ylabel: str) -> None:
    """One group of bars per round, one bar per tool."""
    width = 0.8 / len(tools)
    for index, (tool, rounds) in enumerate(tools.items()):
        xs = [r["round"] + (index - (len(tools) - 1) / 2) * width for r in rounds]
        bars = axes.bar(xs, [r[key] for r in rounds], width=width, label=tool)
        if key == "requests":
            axes.bar_label(bars, labels=[str(r[key]) for r in rounds], fontsize=6, rotation=90, padding=2)
    rounds = next(iter(tools.values()))
    axes.set_xticks([r["round"] for r in rounds])
    axes.set_xticklabels([f"{r['round']}" + ("" if r["online"] else "\noffline") for r in rounds])
    axes.set_xlabel("round")
    axes.set_ylabel(ylabel)
    axes.set_title(title, fontsize=9)
    axes.grid(axis="y", alpha=0.3)


def _plain(keep: tuple[int, ...] | None = None) -> Any:  # noqa: ANN401 - a matplotlib Formatter
    """Tick labels as plain numbers (100, 0.5), not powers of ten; with `keep`, only those leading digits."""
    from matplotlib.ticker import FuncFormatter  # noqa: PLC0415

    def label(value: float, _pos: int | None) -> str:
        text = f"{value:g}"
        if keep is None:
            return text
        return text if text.lstrip("0.")[:1] in {str(digit) for digit in keep} else ""

    return FuncFormatter(label)


def _size_label(mib: float) -> str:
    return f"{mib / 1024:.3g} GiB" if mib >= 1000 else f"{mib:.3g} MiB"


def _single_layer_cases(pull: Row) -> list[Row]:
    """The cases whose bytes are one layer: time against size means something only for those."""
    return [case for case in pull.get("cases", []) if "single-layer" in case["name"]]


def _pull(results: Row) -> Any:  # noqa: ANN401 - a matplotlib Figure
    import matplotlib.pyplot as plt  # noqa: PLC0415

    cases = sorted(_single_layer_cases(results["pull"]), key=lambda case: case["tools"]["ocivendir"]["bytes"])
    tools: dict[str, list[tuple[float, Row]]] = {}
    for case in cases:
        size = case["tools"]["ocivendir"]["bytes"] / _MIB
        for tool, figures in case["tools"].items():
            tools.setdefault(tool, []).append((size, figures))
    figure, axes = plt.subplots(1, 2, figsize=(11, 4))
    for tool, points in tools.items():
        for panel, key in ((axes[0], "wall_s"), (axes[1], "cpu_s")):
            sizes = [size for size, _figures in points]
            stats = [figures[key] for _size, figures in points]
            spread = [[s["median"] - s["min"] for s in stats], [s["max"] - s["median"] for s in stats]]
            panel.errorbar(sizes, [s["median"] for s in stats], yerr=spread, marker="o", capsize=3, label=tool)
    for panel, what in ((axes[0], "wall"), (axes[1], "CPU (user+sys)")):
        panel.set_xscale("log")
        panel.set_yscale("log")
        panel.set_xlabel("bundle size (log scale)")
        panel.set_ylabel(f"{what}, seconds (log scale)")
        panel.set_title(f"Cold pull: {what} against size", fontsize=9)
        panel.grid(which="both", alpha=0.3)
        sizes = sorted({size for points in tools.values() for size, _figures in points})
        panel.set_xticks(sizes, [_size_label(size) for size in sizes])
        panel.xaxis.set_minor_formatter(_plain(keep=()))
        panel.yaxis.set_major_formatter(_plain())
        panel.yaxis.set_minor_formatter(_plain(keep=(2, 3, 5)))
    figure.legend(
        *axes[0].get_legend_handles_labels(), loc="lower center", ncol=3, fontsize=8, bbox_to_anchor=(0.5, -0.12)
    )
    figure.suptitle("Cold pulls and syncs of a single-layer bundle (median, min–max as error bars)", fontsize=11)
    figure.tight_layout()
    return figure
