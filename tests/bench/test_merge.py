"""`bench --merge`: one scenario run again replaces only its own figures and load row, and the report says so."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from bench.__main__ import _merged


def _results(mode: str, started: str, **sections: object) -> dict[str, object]:
    load = [{"scenario": name, "load_start": 1.0, "load_end": 1.0, "seconds": 1.0} for name in sections]
    return {"mode": mode, "machine": {"started_utc": started, "versions": {"ocivendir": started}, "load": load},
            **sections, "skipped": {}}  # fmt: skip


def test_merge_replaces_only_the_scenarios_run_and_records_when(tmp_path: Path) -> None:
    path = tmp_path / "results.json"
    path.write_text(json.dumps(_results("full", "old", fleet={"figure": 1}, pull={"figure": 2})))
    fresh = _results("full", "new", fleet={"not_run": "not selected"}, pull={"figure": 3})
    fresh["machine"]["load"] = fresh["machine"]["load"][1:]  # type: ignore[index]  # only pull ran
    merged = _merged(path, fresh, ["pull"])
    assert (merged["fleet"], merged["pull"]) == ({"figure": 1}, {"figure": 3})
    assert [row["scenario"] for row in merged["machine"]["load"]] == ["fleet", "pull"]
    assert merged["machine"]["started_utc"] == "old"
    assert merged["machine"]["merged"] == [
        {"scenarios": ["pull"], "started_utc": "new", "versions": {"ocivendir": "new"}}
    ]
    path.write_text(json.dumps(merged))  # run again: only the latest run's note stays
    fresh["machine"]["started_utc"] = "newer"  # type: ignore[index]
    again = _merged(path, fresh, ["pull"])
    assert [(m["scenarios"], m["started_utc"]) for m in again["machine"]["merged"]] == [(["pull"], "newer")]


def test_merge_refuses_a_smoke_run_into_a_full_one_and_a_missing_file(tmp_path: Path) -> None:
    path = tmp_path / "results.json"
    with pytest.raises(SystemExit, match="needs an earlier"):
        _merged(path, _results("smoke", "new"), ["pull"])
    path.write_text(json.dumps(_results("full", "old")))
    with pytest.raises(SystemExit, match="smoke run into a full run"):
        _merged(path, _results("smoke", "new"), ["pull"])
