"""Owns: RESULTS.md, rendered from exactly the figures in results.json.

The goal first, then the machine and its load, what was skipped, and every scenario side by side with ratios.
"""

from __future__ import annotations

from bench.charts import FLEET_SVG, PULL_SVG, chart_names
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
    if FLEET_SVG in chart_names(results):
        lines += [f"![CPU and registry requests per round, per tool and variant]({FLEET_SVG})", ""]
    behind = results["fleet_mirror"]
    lines += (["## Fleet behind a mirror", "", f"Not run: {behind['not_run']}.", ""] if "not_run" in behind
              else mirror_section(behind))  # fmt: skip
    signed = results.get("fleet_signed", {"not_run": "not in these results"})
    lines += (
        ["## Signed fleet", "", f"Not run: {signed['not_run']}.", ""] if "not_run" in signed else signed_section(signed)
    )
    lines += _machine(results["machine"], results["skipped"])
    for name, render_section in (("pull", _pull), ("startup", _startup), ("cache_scale", _cache_scale),
                                 ("verify_relocation", _verify), ("soak", _soak)):  # fmt: skip
        section = results.get(name, {"not_run": "not in these results"})
        lines += (
            [f"## {name.replace('_', ' ')}", "", f"Not run: {section['not_run']}.", ""]
            if "not_run" in section
            else render_section(section)
        )
        if name == "pull" and PULL_SVG in chart_names(results):
            lines += [f"![Cold-pull wall and CPU time against bundle size, per tool]({PULL_SVG})", ""]
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
                 mib(m["max_rss_kib"]["median"]), _private(m), str(m["requests"]), f"{m['bytes']:,}"]
                for name, m in case["tools"].items()]  # fmt: skip
        lines += [f"### {case['name']}", ""]
        lines += table(["tool", "wall", "÷ ocivendir", "CPU (user+sys)", "peak RSS MiB",
                        "server's private MiB added (fresh / reused worker)", "requests", "bytes"], rows)  # fmt: skip
        lines += _private_parts(case)
        lines.append("")
    lines += [f"- {what} skipped: {why}" for what, why in section.get("skipped", {}).items()]
    resumed = section.get("resume")
    return [*lines, "", *_resume(resumed), ""] if resumed else [*lines, ""]


def _private(measured: Row) -> str:
    """What a served call added to the server's private memory at its peak (`bench/serverstat.PrivateGrowth`)."""
    growth = measured.get("private_growth_kib")
    return f"{mib(growth['fresh_worker'])} / {mib(growth['reused_worker'])}" if growth else "-"


def _private_parts(case: Row) -> list[str]:
    """Each served tool's private memory added, split by kind (fresh worker / reused worker), where measured."""
    lines = []
    for name, measured in case["tools"].items():
        growth = measured.get("private_growth_kib") or {}
        if "fresh_worker_parts" in growth:
            kinds = ", ".join(f"{kind} {mib(growth['fresh_worker_parts'][kind])} / "
                              f"{mib(growth['reused_worker_parts'][kind])}"
                              for kind in growth["fresh_worker_parts"])  # fmt: skip
            lines.append(f"- {name}: private MiB added by kind (fresh / reused worker): {kinds}")
    return ["", *lines] if lines else []


def _resume(resumed: Row) -> list[str]:
    """The resumed pull: the connection reset half-way through the layer, and what was sent again."""
    gets = " + ".join(f"{size:,}" for size in resumed["layer_gets"])
    row = [resumed["name"], f"{resumed['cut_at']:,}", gets, f"{resumed['resumed_fraction']:.1%}",
           f"{resumed['sent_twice']:.1%}", f"{resumed['wall_s']:.3f} s", f"{resumed['cpu_s']:.3f} s",
           mib(resumed["max_rss_kib"])]  # fmt: skip
    return ["### Resumed after a reset half-way", "",
            ("ocivendir, cold, through a proxy that resets the connection once it has carried half the layer; the next "
             "attempt asks for the rest with `Range`. *Layer GETs* are the bytes the registry logged for each request "
             "of the layer; *resumed request* is the last one's share of the layer; *sent twice* is the proxy's bytes "
             "beyond the layer's size (manifest, config and the bytes in flight when the reset came)."), "",
            *table(["bundle", "reset after (bytes)", "layer GETs (registry bytes)", "resumed request", "sent twice",
                    "wall", "CPU", "peak RSS MiB"], [row])]  # fmt: skip


def _startup(section: Row) -> list[str]:
    base = section["rows"][0]["wall_s"]["median"]
    rows = [[row["what"], row["tool"], stat(row["wall_s"]), ratio(row["wall_s"]["median"], base), stat(row["cpu_s"]),
             _total_cpu(row), mib(row["max_rss_kib"]["median"]), str(row.get("requests_per_call", "-")),
             str(row.get("connections_per_call", "-"))]
            for row in section["rows"]]  # fmt: skip
    lines = ["## Start-up and warm sync", "",
             ("The warm sync is kapp-controller's call (`vendir sync -f - --lock-file /dev/null` through a program "
             "named `vendir`, fresh working directory) of a relocated bundle by digest already in the per-App cache; "
             "the warm tag sync over TLS is the same call of an image by tag on an https registry whose throwaway CA "
             "is appended to Debian's bundle (`SSL_CERT_FILE`), as kapp-controller appends its CAs. `python -c pass`, "
             "every ratio's base, takes its turn among the warm digest-pinned syncs, round by round."),
             ""]  # fmt: skip
    lines += table(["what", "program", "wall", "÷ python -c pass", "CPU", "CPU with server", "peak RSS MiB",
                    "requests per call", "TCP connections per call"], rows)  # fmt: skip
    lines += [
        "",
        (
            "Through a server, `CPU` is the client's own and `CPU with server` adds the server's and its "
            "workers' CPU per call (their total over the measured calls, from /proc, divided by the calls)."
        ),
    ]
    lines += ["", *[f"- {what} skipped: {why}" for what, why in section["skipped"].items()]]
    if "anatomy" in section:
        lines += ["", *_anatomy(section["anatomy"])]
    return [*lines, ""]


def _anatomy(calls: Row) -> list[str]:
    """A call through the server taken apart: fork, adopt, work and restore (bench/anatomy.py)."""
    labels = {"fork": "fork and exit of a worker (one process per call pays it on every call)",
              "adopt": "adopt: the caller's stdio, directory, umask, environment, argv and signals put in place",
              "first": "work, the first call of a freshly forked worker",
              "work": "work, a later call of a reused worker",
              "restore": "restore: the worker's own world back, and the check that nothing was left"}  # fmt: skip
    if any(key not in calls for key in labels):  # results from before the workers were reused
        return []
    rows = [[label, stat(calls[key]["cpu_s"]), f"{calls[key]['minor_faults']['median']:,.0f}"]
            for key, label in labels.items()]  # fmt: skip
    fresh = calls["first"]["cpu_s"]["median"] - calls["work"]["cpu_s"]["median"]
    reused = sum(calls[key]["cpu_s"]["median"] for key in ("adopt", "work", "restore"))
    return ["### A call through the server, taken apart", "",
            ("Measured inside workers forked from a process that preloaded what the server preloads "
             "(`bench/anatomy.py`), each phase as `server/worker.py` runs it; CPU of the worker alone, minor page "
             "faults per call."), "",
            *table(["phase", "CPU", "minor faults"], rows), "",
            (f"A reused worker's call costs {reused * 1000:.1f} ms of its CPU (adopt, work, restore); a fresh "
             f"copy-on-write worker per call would add {fresh * 1000:.1f} ms over the work, plus the fork and "
             "exit."), ""]  # fmt: skip


def _soak(section: Row) -> list[str]:
    """Thousands of warm calls through one server: what the server tree keeps (bench/soak.py)."""
    first, last, idle = section["after_100"], section["after_all"], section["idle"]
    rows = [[label, str(tree["processes"]), mib(tree["rss_kib"]), mib(tree.get("pss_kib", 0)), str(tree["fds"])]
            for label, tree in (("after 100 calls", first), (f"after {section['calls']:,} calls", last),
                                ("idle, once idle workers beyond the spare ended", idle))]  # fmt: skip
    goal = section["goal"]
    verdict = "**MET**" if goal["met"] else "**NOT MET**"
    return [f"## Soak: {section['calls']:,} warm calls through one server", "",
            (f"{section['tool']}, kapp-controller's call of a {section['app']} ({section['wall_s']} s in all, the "
             f"server tree's CPU {section['server_cpu_ms_per_call']} ms per call, {section['requests']} registry "
             "requests). The server tree is the parent and its live workers, read from /proc; RSS is the sum of "
             "their VmRSS (pages a worker shares with the parent counted in each), PSS the sum of their "
             "proportional sets (each shared page divided among its sharers)."), "",
            *table(["when", "processes", "RSS MiB (sum)", "PSS MiB (sum)", "descriptors"], rows), "",
            f"Goal (RSS within 10 %: {goal['rss_growth']:+.1%}; descriptors unchanged; idle ≤ 96 MiB): {verdict}.",
            *[f"- {check}: {'yes' if met else '**no**'}" for check, met in goal["checks"].items()], ""]  # fmt: skip


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
