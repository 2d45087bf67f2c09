"""Owns: the fleet-behind-a-mirror part of RESULTS.md.

The origin's requests per round and per node, with and without the mirror, and what the mirror itself served.
"""

from __future__ import annotations

from bench.markdown import Row, one_line, table

_MODES = {"direct": "straight to the origin", "mirror": "through the mirror"}


def mirror_section(section: Row) -> list[str]:
    """The setup in one paragraph, then one table: every round of both modes."""
    lines = [
        "## Fleet behind a mirror", "",
        (f"{section['nodes']} nodes, each with its own cache (`OCIVENDIR_CACHE_DIR`), reconcile the same "
         f"{section['apps']} Apps ({section['pinned_apps']} by digest, {section['tag_apps']} by tag, over "
         f"{section['artifacts']} artifacts: the fleet's mix) as kapp-controller runs them, one node after another: "
         "first straight to the origin, then from empty node caches through one Distribution (`docker-registry`) in "
         "proxy mode (`proxy.remoteurl` = the origin, empty storage) named in `registries.yaml`. "
         f"{section['online_rounds']} online round(s) per mode, then one with the origin stopped (the mirror still "
         "up). Requests and bytes come from the origin's and the mirror's own access logs; *per node* is each node's "
         "share of the origin's requests, in node order."), "",
    ]  # fmt: skip
    rows = [_row(mode, row) for mode, figures in section["modes"].items() for row in figures["rounds"]]
    lines += table(["mode", "round", "origin", "reconciles ok", "origin requests", "per node", "origin blob GETs",
                    "most GETs of one blob", "origin bytes", "mirror requests"], rows)  # fmt: skip
    lines.append("")
    failures = [(mode, row["round"], failure) for mode, figures in section["modes"].items()
                for row in figures["rounds"] for failure in row["failures"]]  # fmt: skip
    if failures:
        lines += ["Failures (the first three of a round):", ""]
        lines += [f"- {_MODES[mode]}, round {number}: {f['app']} exit {f['exit']}: `{one_line(f['stderr'])}`"
                  for mode, number, f in failures]  # fmt: skip
        lines.append("")
    return lines


def _row(mode: str, row: Row) -> list[str]:
    up = row["origin_up"]
    return [
        _MODES[mode], str(row["round"]), "up" if up else "**stopped**", f"{row['ok']}/{row['reconciles']}",
        str(row["origin_requests"]), " / ".join(map(str, row["origin_requests_per_node"])) if up else "-",
        str(row["origin_blob_gets"]), str(row["origin_most_gets_per_blob"]), f"{row['origin_bytes']:,}",
        str(row["mirror_requests"]) if "mirror_requests" in row else "-",
    ]  # fmt: skip
