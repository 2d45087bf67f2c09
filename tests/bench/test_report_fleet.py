"""The fleet report puts every ocivendir build beside vendir, each with its own ratio row."""

from __future__ import annotations

from bench.report_fleet import _rounds_table

ROW = {"round": 2, "online": True, "requests": 10, "bytes": 100, "ok": 100, "ok_pinned": 90, "wall_ms_median": 60.0,
       "wall_ms_p90": 70.0, "max_rss_kib": 14336}  # fmt: skip


def test_each_ocivendir_build_gets_a_ratio_row_against_vendir() -> None:
    tools = {
        "ocivendir": {"rounds": [{**ROW, "cpu_s": 6.0}]},
        "ocivendir (dist build)": {"rounds": [{**ROW, "cpu_s": 5.0}]},
        "vendir": {"rounds": [{**ROW, "cpu_s": 3.0, "requests": 265}]},
    }
    lines = _rounds_table(tools)
    ratios = [line for line in lines if "÷ vendir" in line]
    assert [line.split(" | ")[2] for line in ratios] == ["*ocivendir ÷ vendir*", "*ocivendir (dist build) ÷ vendir*"]
    assert [line.split(" | ")[8] for line in ratios] == ["2.00", "1.67"]  # CPU s
