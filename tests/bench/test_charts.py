"""The report's pictures: drawn from results.json alone, one per scenario that ran, naming every tool it measured."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

from bench import charts, report

ROOT = Path(__file__).resolve().parents[2]
COMMITTED = json.loads((ROOT / "bench" / "results.json").read_text())
_SVG = "{http://www.w3.org/2000/svg}"


def _texts(path: Path) -> str:
    """Every text the SVG shows (fonts are kept as text, so tool names are searchable)."""
    tree = ET.parse(path)  # noqa: S314 - our own file
    assert tree.getroot().tag == f"{_SVG}svg"
    return " ".join("".join(node.itertext()) for node in tree.getroot().iter(f"{_SVG}text"))


def test_the_charts_are_svg_naming_every_tool_of_their_scenario(tmp_path: Path) -> None:
    written = charts.write_charts(COMMITTED, tmp_path)
    assert [path.name for path in written] == [charts.FLEET_SVG, charts.PULL_SVG]
    fleet_text = _texts(tmp_path / charts.FLEET_SVG)
    for tool, figures in COMMITTED["fleet"]["tools"].items():
        if figures["rounds"]:
            assert tool in fleet_text
    pull_text = _texts(tmp_path / charts.PULL_SVG)
    for case in COMMITTED["pull"]["cases"]:
        for tool in case["tools"]:
            assert tool in pull_text
    assert "GiB" in pull_text  # sizes are labelled with their unit


def test_the_same_results_draw_the_same_bytes(tmp_path: Path) -> None:
    first, second = tmp_path / "a", tmp_path / "b"
    first.mkdir()
    second.mkdir()
    charts.write_charts(COMMITTED, first)
    charts.write_charts(COMMITTED, second)
    for name in (charts.FLEET_SVG, charts.PULL_SVG):
        assert (first / name).read_bytes() == (second / name).read_bytes()


def test_a_scenario_not_run_gets_no_picture_and_no_link(tmp_path: Path) -> None:
    results = {**COMMITTED, "fleet": {"not_run": "not selected with --only"}}
    assert charts.write_charts(results, tmp_path) == [tmp_path / charts.PULL_SVG]
    rendered = report.render(results)
    assert charts.FLEET_SVG not in rendered
    assert f"]({charts.PULL_SVG})" in rendered


def test_the_committed_report_links_the_committed_pictures() -> None:
    rendered = (ROOT / "bench" / "RESULTS.md").read_text()
    for name in (charts.FLEET_SVG, charts.PULL_SVG):
        assert f"]({name})" in rendered
        assert (ROOT / "bench" / name).is_file()
