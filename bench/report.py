"""Owns: RESULTS.md, rendered from exactly the figures in results.json.

The goal first, then the machine and its load, what was skipped, and every scenario side by side with ratios.
"""

from __future__ import annotations

from bench.markdown import Row, mib, ratio, stat, table
from bench.report_fleet import fleet_section
from bench.report_mirror import mirror_section
from bench.report_signed import signed_section


def render(results: Row) -> str:
    """The whole report."""
    lines = [
        "# ocivendir benchmark results", "",
        (f"Written by `./bench/run.sh{' --smoke' if results['mode'] == 'smoke' else ''}` ({results['mode']} run, "
        f"started {results['machine']['started_utc']}). The same figures are in `results.json`. Requests and bytes "
        "are counted from the registry's own access log. Every time is a median with min–max over n repetitions."), "",
    ]  # fmt: skip
    fleet = results["fleet"]
    lines += ["## Fleet", "", f"Not run: {fleet['not_run']}.", ""] if "not_run" in fleet else fleet_section(fleet)
    behind = results["fleet_mirror"]
    lines += (["## Fleet behind a mirror", "", f"Not run: {behind['not_run']}.", ""] if "not_run" in behind
              else mirror_section(behind))  # fmt: skip
    signed = results.get("fleet_signed", {"not_run": "not in these results"})
    lines += (
        ["## Signed fleet", "", f"Not run: {signed['not_run']}.", ""] if "not_run" in signed else signed_section(signed)
    )
    lines += _machine(results["machine"], results["skipped"])
    for name, render_section in (("pull", _pull), ("startup", _startup), ("cache_scale", _cache_scale),
                                 ("verify_relocation", _verify)):  # fmt: skip
        section = results[name]
        lines += (
            [f"## {name.replace('_', ' ')}", "", f"Not run: {section['not_run']}.", ""]
            if "not_run" in section
            else render_section(section)
        )
    return "\n".join(lines).rstrip() + "\n"


def _machine(machine: Row, skipped: dict[str, str]) -> list[str]:
    lines = ["## Machine", "",
             (f"{machine['cores']} cores, {machine['cpu_model']}, {machine['memory_gib']} GiB memory, Linux "
             f"{machine['kernel']}, Python {machine['python']}. The machine may be shared: the 1-minute load average "
             f"at the start and end of every scenario is below. Peak RSS: {machine['rss_method']}."), ""]  # fmt: skip
    lines += table(["tool", "version"], [[name, f"`{version}`"] for name, version in machine["versions"].items()])
    lines += ["", *table(["scenario", "load at start", "load at end", "took"],
                         [[row["scenario"], str(row["load_start"]), str(row["load_end"]), f"{row['seconds']} s"]
                          for row in machine["load"]]), ""]  # fmt: skip
    lines += [
        f"`{', '.join(m['scenarios'])}` ran separately on {m['started_utc']} (`--merge`): its figures and load row "
        "are from that run."
        for m in machine.get("merged", [])
    ]
    lines += ["", "### Skipped", ""] if machine.get("merged") else ["### Skipped", ""]
    lines += [f"- {what}: {why}" for what, why in skipped.items()] or ["- nothing"]
    return [*lines, ""]


def _pull(section: Row) -> list[str]:
    lines = ["## Cold pull", "", f"Cache and output removed before every repetition. {section.get('notes', '')}.", ""]
    for case in section.get("cases", []):
        base = case["tools"]["ocivendir"]["wall_s"]["median"]
        rows = [[name, stat(m["wall_s"]), f"{ratio(m['wall_s']['median'], base)}", stat(m["cpu_s"]),
                 mib(m["max_rss_kib"]["median"]), str(m["requests"]), f"{m['bytes']:,}"]
                for name, m in case["tools"].items()]  # fmt: skip
        lines += [f"### {case['name']}", ""]
        lines += table(["tool", "wall", "÷ ocivendir", "CPU (user+sys)", "peak RSS MiB", "requests", "bytes"], rows)
        lines.append("")
    lines += [f"- {what} skipped: {why}" for what, why in section.get("skipped", {}).items()]
    return [*lines, ""]


def _startup(section: Row) -> list[str]:
    base = section["rows"][0]["wall_s"]["median"]
    rows = [[row["what"], row["tool"], stat(row["wall_s"]), ratio(row["wall_s"]["median"], base), stat(row["cpu_s"]),
             _total_cpu(row), mib(row["max_rss_kib"]["median"]), str(row.get("requests", "-"))]
            for row in section["rows"]]  # fmt: skip
    lines = ["## Start-up and warm sync", "",
             ("The warm sync is kapp-controller's call (`vendir sync -f - --lock-file /dev/null` through a program "
             "named `vendir`, fresh working directory) of a relocated bundle by digest already in the per-App cache."),
             ""]  # fmt: skip
    lines += table(["what", "program", "wall", "÷ python -c pass", "CPU", "CPU with server", "peak RSS MiB",
                    "requests"], rows)  # fmt: skip
    lines += [
        "",
        (
            "Through a server, `CPU` is the client's own and `CPU with server` adds the server's and its "
            "workers' CPU per call (their total over the measured calls, from /proc, divided by the calls)."
        ),
    ]
    lines += ["", *[f"- {what} skipped: {why}" for what, why in section["skipped"].items()]]
    return [*lines, ""]


def _total_cpu(row: Row) -> str:
    total = row.get("cpu_total_s")
    return f"{total * 1000:.1f} ms" if total is not None else "-"


def _cache_scale(section: Row) -> list[str]:
    rows = [[f"`ocivendir {row['command']}`", stat(row["wall_s"]), stat(row["cpu_s"]),
             mib(row["max_rss_kib"]["median"])] for row in section["rows"]]  # fmt: skip
    return [f"## Cache commands at {section['entries']:,} entries", "",
            *table(["command", "wall", "CPU", "peak RSS MiB"], rows), ""]  # fmt: skip


def _verify(section: Row) -> list[str]:
    rows = [[row["command"], stat(row["wall_s"]), stat(row["cpu_s"]), str(row["requests"])] for row in section["rows"]]
    return [f"## verify-relocation of {section['images']} images", "",
            "A relocated bundle by tag, its content cached: expect 1 tag HEAD + one HEAD probe per image.", "",
            *table(["command", "wall", "CPU", "requests"], rows), ""]  # fmt: skip
