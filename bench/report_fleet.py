"""Owns: the fleet part of RESULTS.md.

The goal verdict first, then every variant's rounds with the tools side by side and the ocivendir / vendir ratios.
"""

from __future__ import annotations

import statistics

from bench.markdown import Row, mib, one_line, ratio, table

_VARIANT_TITLES = {
    "per_app_cache": "one cache per App (VENDIR_CACHE_DIR, as kapp-controller sets it), one App at a time",
    "shared_cache": "one cache shared by all Apps (OCIVENDIR_CACHE_DIR for ocivendir; one VENDIR_CACHE_DIR for "
    "vendir), one App at a time",
    "concurrency_4": "one cache per App, four Apps in flight (kapp-controller's workers)",
}


def fleet_section(fleet: Row) -> list[str]:
    """The goal, the shape of the fleet, and one table per variant."""
    variants = {"per_app_cache": fleet, **fleet["variants"]}
    lines = _goal(fleet)
    lines += [
        "## Fleet", "",
        f"{fleet['apps']} Apps over {fleet['artifacts']} distinct artifacts: "
        + ", ".join(f"{count} {name.replace('_', ' ')}" for name, count in fleet["shape"].items())
        + " (tag Apps: half relocated bundles, half images). Each App is kapp-controller's call: stdin = placeholder "
        'dockerconfigjson Secret + Config (one directory `"0"`, `path: .`), `vendir sync -f - --lock-file /dev/null` '
        "through a program named `vendir`, a fresh working directory per reconcile. ocivendir runs as the venv's "
        "console script and, when `dist/` is built, as the dist build too (what kapp-controller's sidecar runs). "
        f"{fleet['online_rounds']} online rounds, then 1 round with the registry stopped. Tools run interleaved round "
        "by round (the first tool alternating). Wall is per App; CPU is user+sys of all the round's processes; RSS "
        "is the largest process. Each round is one pass over every App; the warm rounds repeat the same work, so the "
        "summary gives their median with min–max.", "",
    ]  # fmt: skip
    vendir = fleet["tools"]["vendir"]
    if vendir.get("skipped"):
        lines += [f"vendir side by side: skipped ({vendir['skipped']}).", ""]
    lines += ["### Summary", "", *_summary(variants, fleet["apps"]), ""]
    for name, variant in variants.items():
        lines += [f"### {_VARIANT_TITLES[name]}", "", *_rounds_table(variant["tools"]), ""]
        lines += _failures(variant["tools"])
    return lines


def _summary(variants: Row, apps: int) -> list[str]:
    """One line per variant and tool: the cold round, the warm rounds (medians over them), the offline round."""
    rows = []
    for name, variant in variants.items():
        for tool, figures in variant["tools"].items():
            if len(figures["rounds"]) < 3:  # a cold, at least one warm and the offline round
                continue
            cold, warm, offline = figures["rounds"][0], figures["rounds"][1:-1], figures["rounds"][-1]
            failed = offline.get("failed_by_category", {})
            rows.append([
                name, tool, str(cold["requests"]), f"{cold['bytes']:,}", " / ".join(str(r["requests"]) for r in warm),
                _spread([r["wall_ms_median"] for r in warm], 0), _spread([r["cpu_s"] for r in warm], 2),
                f"{offline['ok']}/{apps}" + (f" (failed: {_counts(failed)})" if failed else ""),
            ])  # fmt: skip
    return table(["variant", "tool", "cold: requests", "cold: bytes", "warm rounds: requests",
                  "warm: wall/App median ms", "warm: CPU s per round", "registry stopped: Apps ok"], rows)  # fmt: skip


def _spread(values: list[float], digits: int) -> str:
    """The median of the warm rounds' figures with their min–max."""
    return f"{statistics.median(values):.{digits}f} ({min(values):.{digits}f}–{max(values):.{digits}f})"


def _counts(failed: dict[str, int]) -> str:
    return ", ".join(f"{count} {category.replace('_', ' ')}" for category, count in failed.items())


def _goal(fleet: Row) -> list[str]:
    goal = fleet["goal"]
    checks = goal["checks"]
    warm = [c for c in checks if c["check"].startswith("requests in all")]
    pinned = [c for c in checks if c["check"].startswith("requests for digest")]
    offline = [c for c in checks if c["check"].startswith("digest-pinned")]
    verdict = "**MET**" if goal["met"] else "**NOT MET** — see the failing checks below"
    lines = [
        "## Goal", "",
        ("ocivendir's warm rounds make at most one request per tag App (0 for every digest-pinned App), and its "
         f"offline round serves every digest-pinned App, in every variant: {verdict}."), "",
        (f"- Warm rounds: at most {max((c['measured'] for c in warm), default=0)} requests per round for "
        f"{fleet['tag_apps']} tag Apps; at most {max((c['measured'] for c in pinned), default=0)} for the "
        f"{fleet['pinned_apps']} digest-pinned Apps."),
        "- Registry stopped: " + ", ".join(f"{c['measured']}/{c['expected']} digest-pinned Apps served ({c['variant']})"
                                           for c in offline) + ".",
    ]  # fmt: skip
    failing = [c for c in checks if not c["met"]]
    if failing:
        lines += ["", "**Failing checks:**", ""]
        lines += table(["variant", "round", "check", "expected", "measured"],
                       [[c["variant"], str(c["round"]), c["check"], str(c["expected"]), str(c["measured"])]
                        for c in failing])  # fmt: skip
    return [*lines, ""]


def _rounds_table(tools: Row) -> list[str]:
    ran = {name: tool["rounds"] for name, tool in tools.items() if tool["rounds"]}
    rows: list[list[str]] = []
    for index in range(len(ran["ocivendir"])):
        for name, rounds in ran.items():
            row = rounds[index]
            rows.append([str(row["round"]), "online" if row["online"] else "**registry stopped**", name,
                         str(row["requests"]), f"{row['bytes']:,}", f"{row['ok']} ({row['ok_pinned']} pinned)",
                         f"{row['wall_ms_median']:.0f}", f"{row['wall_ms_p90']:.0f}", f"{row['cpu_s']:.2f}",
                         mib(row["max_rss_kib"])])  # fmt: skip
        if "vendir" in ran:
            rows += [
                _ratios(name, ran[name][index], ran["vendir"][index]) for name in ran if name.startswith("ocivendir")
            ]
    return table(["round", "registry", "tool", "requests", "bytes", "Apps ok", "wall/App median ms", "p90 ms",
                  "CPU s", "peak RSS MiB"], rows)  # fmt: skip


def _ratios(name: str, ours: Row, theirs: Row) -> list[str]:
    """Divide one ocivendir build's figures by vendir's, in the rounds table's columns."""
    keys = ("requests", "bytes", "", "wall_ms_median", "wall_ms_p90", "cpu_s", "max_rss_kib")
    return ["", "", f"*{name} ÷ vendir*", *(ratio(ours[key], theirs[key]) if key else "" for key in keys)]


def _failures(tools: Row) -> list[str]:
    lines = []
    for name, tool in tools.items():
        for row in tool["rounds"]:
            lines += [f"- {name}, round {row['round']}: {f['app']} exit {f['exit']}: `{one_line(f['stderr'])}`"
                      for f in row["failures"]]  # fmt: skip
    title = "Failures (online: any App; registry stopped: digest-pinned Apps), the first three of a round:"
    return [title, "", *lines, ""] if lines else []
