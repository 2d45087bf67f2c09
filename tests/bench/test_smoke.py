"""The benchmark cannot rot: `bench --smoke` runs every scenario against real registries into a temporary directory.

It checks the shape of results.json (a contract), the counts it reports, and ocivendir's fleet goal.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from bench import report
from tests.support import registry as registry_support

pytestmark = pytest.mark.integration
ROOT = Path(__file__).resolve().parents[2]
ROUND_KEYS = {"round": int, "online": bool, "requests": int, "bytes": int, "ok": int, "wall_ms_median": float,
              "wall_ms_p90": float, "cpu_s": float, "max_rss_kib": int}  # fmt: skip


@pytest.fixture(scope="module")
def smoke(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, object], str, subprocess.CompletedProcess[str]]:
    if registry_support.binary() is None:
        if os.environ.get("CI"):
            pytest.fail("docker-registry is not installed and CI is set: the bench smoke run must run")
        pytest.skip("docker-registry not installed")
    out = tmp_path_factory.mktemp("bench-out")
    env = {**os.environ, "PYTHONPATH": f"{ROOT / 'cli'}:{ROOT}"}
    done = subprocess.run([sys.executable, "-m", "bench", "--smoke", "--out", str(out)], cwd=ROOT, env=env,
                          capture_output=True, text=True, check=False, timeout=600)  # fmt: skip
    results = json.loads((out / "results.json").read_text()) if (out / "results.json").exists() else {}
    report = (out / "RESULTS.md").read_text() if (out / "RESULTS.md").exists() else ""
    return results, report, done


def _rounds_ok(rounds: list[dict[str, object]], expected: int) -> None:
    assert [r["round"] for r in rounds] == list(range(1, expected + 1))
    assert [r["online"] for r in rounds] == [True] * (expected - 1) + [False]
    for row in rounds:
        for key, kind in ROUND_KEYS.items():
            assert type(row[key]) is kind or (kind is float and type(row[key]) is int), (key, row[key])


def test_smoke_run_writes_the_contracted_json_and_the_report(smoke) -> None:
    results, report, done = smoke
    assert done.returncode == 0, done.stderr[-3000:]
    scenarios = ["fleet", "fleet_mirror", "fleet_signed", "pull", "startup", "cache_scale", "verify_relocation", "soak"]
    assert set(results) >= {"machine", *scenarios, "skipped"}
    assert {"cores", "cpu_model", "python", "versions", "load"} <= set(results["machine"])
    assert [row["scenario"] for row in results["machine"]["load"]] == scenarios
    fleet = results["fleet"]
    assert (fleet["apps"], fleet["tag_apps"], fleet["pinned_apps"]) == (6, 1, 5)
    _rounds_ok(fleet["tools"]["ocivendir"]["rounds"], 3)
    assert fleet["tools"]["vendir"] == {"rounds": [], "skipped": "VENDIR_BIN is not set"}
    for name in ("shared_cache", "concurrency_4"):
        _rounds_ok(fleet["variants"][name]["tools"]["ocivendir"]["rounds"], 3)
    assert report.startswith("# ocivendir benchmark results")
    for heading in ("## Goal", "## Fleet", "## Fleet behind a mirror", "## Signed fleet", "## Machine", "## Cold pull", "## Start-up",
                    "## Cache commands", "## verify-relocation", "## Soak"):  # fmt: skip
        assert heading in report


def test_smoke_fleet_counts_come_from_the_access_log_and_meet_the_goal(smoke) -> None:
    results, report, _ = smoke
    fleet = results["fleet"]
    for variant in (fleet, fleet["variants"]["shared_cache"], fleet["variants"]["concurrency_4"]):
        cold, warm, offline = variant["tools"]["ocivendir"]["rounds"]
        assert (cold["requests"] > 0, cold["bytes"] > 0, cold["ok"]) == (True, True, 6)
        assert (warm["requests_pinned_apps"], warm["requests"] <= 1, warm["ok"]) == (0, True, 6)
        assert (offline["requests"], offline["ok_pinned"], offline["ok_tag"]) == (0, 5, 0)
    # one cache per App fetches every App's content; a shared cache fetches each artifact once
    assert fleet["variants"]["shared_cache"]["tools"]["ocivendir"]["rounds"][0]["requests"] < cold_requests(fleet)
    assert fleet["goal"]["met"] is True
    assert "**MET**" in report


def cold_requests(fleet: dict[str, dict[str, list[dict[str, int]]]]) -> int:
    return fleet["tools"]["ocivendir"]["rounds"][0]["requests"]


def test_smoke_fleet_behind_a_mirror_spares_the_origin_the_blobs_and_serves_with_the_origin_stopped(smoke) -> None:
    section = smoke[0]["fleet_mirror"]
    assert (section["nodes"], section["apps"], section["tag_apps"], section["online_rounds"]) == (3, 6, 1, 1)
    (direct_cold, direct_stopped), (cold, stopped) = [mode["rounds"] for mode in section["modes"].values()]
    assert list(section["modes"]) == ["direct", "mirror"]
    for row in (direct_cold, cold):
        assert (row["ok"], row["reconciles"], row["failures"]) == (18, 18, [])
        assert sum(row["origin_requests_per_node"]) == row["origin_requests"]
    # straight to the origin every node fetches every blob; through the mirror the origin serves each at most twice
    assert direct_cold["origin_most_gets_per_blob"] == 3
    assert len(set(direct_cold["origin_requests_per_node"])) == 1
    assert "mirror_requests" not in direct_cold
    assert cold["origin_most_gets_per_blob"] <= 2
    assert cold["origin_blob_gets"] < direct_cold["origin_blob_gets"]
    assert cold["mirror_blob_gets"] == direct_cold["origin_blob_gets"]  # the nodes asked the mirror for all of them
    assert cold["origin_requests_per_node"][0] > cold["origin_requests_per_node"][-1]
    # origin stopped: the digest-pinned Apps come from each node's cache; through the mirror the tag App works too
    assert (direct_stopped["ok_pinned"], direct_stopped["ok_tag"], direct_stopped["origin_requests"]) == (15, 0, 0)
    assert (stopped["ok"], stopped["ok_tag"], stopped["origin_requests"]) == (18, 3, 0)
    assert stopped["mirror_by_kind"] == {"manifests": 3}  # one tag HEAD per node, answered by the mirror


def test_smoke_signed_fleet_verifies_every_app_once_and_then_asks_nothing_more(smoke) -> None:
    section = smoke[0]["fleet_signed"]
    assert (section["apps"], section["pinned_apps"], section["signed_artifacts"]) == (6, 5, section["artifacts"])
    (cold, warm, offline), (signed_cold, signed_warm, signed_offline) = (
        section["variants"][name]["rounds"] for name in ("unsigned", "signed")
    )
    assert (cold["ok"], signed_cold["ok"], signed_warm["ok"]) == (6, 6, 6)
    assert signed_cold["requests"] > cold["requests"]  # each artifact's .sig tag, manifest and payload, once
    assert signed_warm["requests"] == warm["requests"] <= 1  # the verdict is remembered: no signature asked again
    assert (offline["ok_pinned"], signed_offline["ok_pinned"], signed_offline["requests"]) == (5, 5, 0)
    extra = [c for c in section["goal"]["checks"] if c["check"] == "extra requests with verification"]
    assert [(c["measured"], c["met"]) for c in extra] == [(0, True)]


def test_smoke_pull_startup_cache_and_verify_figures(smoke) -> None:
    results, _, _ = smoke
    for case in results["pull"]["cases"]:
        ocivendir = case["tools"]["ocivendir"]
        assert ocivendir["requests"] >= 3
        assert ocivendir["wall_s"]["n"] == 1
        assert ocivendir["max_rss_kib"]["median"] > 0
        sidecar = [name for name in case["tools"] if "native client" in name]  # when dist/ is built
        for sync in ("ocivendir sync", "ocivendir sync (server)", *sidecar):  # the same bundle: the same exchanges
            assert (case["tools"][sync]["requests"], case["tools"][sync]["bytes"]) == (
                ocivendir["requests"], ocivendir["bytes"])  # fmt: skip
        for served in ("ocivendir (server)", "ocivendir sync (server)", *sidecar):  # a client's RSS: not run in-process
            assert case["tools"][served]["max_rss_kib"]["median"] < 25 << 10 < ocivendir["max_rss_kib"]["median"]
    assert results["pull"]["cases"][1]["tools"]["ocivendir"]["bytes"] > 8 << 20
    resumed = results["pull"]["resume"]  # the 8 MiB bundle, its connection reset once half the layer went through
    assert resumed["name"] == "8 MiB single-layer bundle"
    assert len(resumed["layer_gets"]) == 2  # cut off, then resumed with Range: never from byte zero again
    assert 0 < resumed["layer_gets"][1] < resumed["layer_bytes"]
    assert 0 < resumed["resumed_fraction"] < 1
    assert [row["tool"] for row in results["startup"]["rows"][:2]] == ["python -c pass",
                                                                        "ocivendir (venv console script)"]  # fmt: skip
    warm = [row for row in results["startup"]["rows"] if row["what"] == "warm digest-pinned sync"]
    assert [row["requests"] for row in warm] == [0] * len(warm)
    over_tls = [row for row in results["startup"]["rows"] if row["what"] == "warm tag sync over TLS"]
    assert [row["tool"] for row in over_tls] == [row["tool"] for row in warm]
    assert [row["requests_per_call"] for row in over_tls if row["tool"] != "vendir"] == [1] * len(warm)  # one HEAD
    for row in over_tls:  # a served call goes out on the connection its worker kept; one in-process connects
        assert (row["connections_per_call"] == 0) if "server" in row["tool"] else (row["connections_per_call"] >= 1)
    calls = results["startup"]["anatomy"]  # a fresh worker copies the pages it writes; a reused one does not
    assert calls["first"]["minor_faults"]["median"] > 4 * calls["work"]["minor_faults"]["median"]
    assert calls["work"]["cpu_s"]["n"] == calls["adopt"]["cpu_s"]["n"] == calls["restore"]["cpu_s"]["n"] >= 20
    assert calls["fork"]["cpu_s"]["n"] >= 20
    assert calls["first"]["cpu_s"]["n"] >= 1
    assert results["cache_scale"]["entries"] == 300
    assert len(results["cache_scale"]["rows"]) == 4
    assert results["verify_relocation"]["images"] == 10
    assert [row["requests"] for row in results["verify_relocation"]["rows"]] == [11, 11]


def test_committed_results_are_a_full_run_with_vendir_and_the_report_renders_from_them(smoke) -> None:
    fresh = smoke[0]
    committed = json.loads((ROOT / "bench" / "results.json").read_text())
    assert committed["mode"] == "full"
    fleet = committed["fleet"]
    assert (fleet["apps"], fleet["tag_apps"]) == (100, 10)
    for variant in (fleet, *fleet["variants"].values()):
        for tool in ("ocivendir", "vendir"):
            _rounds_ok(variant["tools"][tool]["rounds"], 6)
            assert set(variant["tools"][tool]["rounds"][0]) == set(fresh["fleet"]["tools"]["ocivendir"]["rounds"][0])
    assert set(committed) == set(fresh)
    behind = committed["fleet_mirror"]
    assert (behind["nodes"], behind["online_rounds"], list(behind["modes"])) == (10, 2, ["direct", "mirror"])
    for mode in behind["modes"].values():
        assert [row["origin_up"] for row in mode["rounds"]] == [True, True, False]
        assert set(mode["rounds"][0]) <= set(fresh["fleet_mirror"]["modes"]["mirror"]["rounds"][0])
    assert "vendir" in committed["machine"]["versions"]
    assert "imgpkg" in committed["machine"]["versions"]
    assert (ROOT / "bench" / "RESULTS.md").read_text() == report.render(committed)


def test_smoke_soak_counts_the_server_tree_after_100_calls_and_after_all(smoke) -> None:
    """Every call warm (no request), through a live server tree whose memory and descriptors are read from /proc."""
    results, _, _ = smoke
    soak = results["soak"]
    assert (soak["calls"], soak["requests"]) == (150, 0)
    for when in ("after_100", "after_all", "idle"):
        assert soak[when]["processes"] >= 2  # the parent and at least one worker (pooled workers live on)
        assert soak[when]["rss_kib"] > 0
        assert soak[when]["fds"] > 0
    assert set(soak["goal"]["checks"]) == {"RSS within 10 % of the figure after 100 calls", "descriptors unchanged",
                                           "idle server and workers at most 96 MiB"}  # fmt: skip
