"""A clock that ran ahead, then was set right (NTP): what the cache recorded in the future is not trusted for it.

The clock is shifted inside the process, on the index's clock (`CacheIndex.now`), which every recorded time is
written with and measured against.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from ocivendir.cache.index import CacheIndex
from tests.conftest import run_cli
from tests.support.builders import Pusher, make_image, publish_bundle, relocate
from tests.support.registry import Registry

YEAR = 365 * 86400.0


def _clock(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """The index's clock, ahead of the real one by the list's one value (set by the test); calls stay in-process."""
    ahead = [0.0]
    monkeypatch.setattr(CacheIndex, "now", property(lambda _: time.time() + ahead[0]))
    return ahead


def test_a_negative_verdict_recorded_while_the_clock_ran_ahead_is_rechecked(
    registry: Registry, pusher: Pusher, repo_prefix: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A verdict dated a year ahead has no age: the next pull re-checks it and sees the completed relocation."""
    published = publish_bundle(pusher, repo_prefix, images=2)
    left_out = next(iter(published.images))
    relocate(pusher, published, f"{repo_prefix}/copy", with_locations=False, skip=[left_out])
    ref = published.ref(registry, f"{repo_prefix}/copy")
    cache = tmp_path / "cache"
    pull = ("pull", "-b", ref, "--cache-dir", str(cache), "--json")
    ahead = _clock(monkeypatch)
    ahead[0] = YEAR
    first = run_cli(*pull, "-o", str(tmp_path / "one"))
    assert first.exit_code == 0, first.stderr
    assert json.loads(first.stdout)["result"]["relocation"]["relocated"] is False
    relocate(pusher, published, f"{repo_prefix}/copy", with_locations=False)  # the copy completes
    ahead[0] = 0.0  # NTP sets the clock right
    second = run_cli(*pull, "-o", str(tmp_path / "two"))
    assert second.exit_code == 0, second.stderr
    relocation = json.loads(second.stdout)["result"]["relocation"]
    assert (relocation["relocated"], relocation["method"]) == (True, "probes")
    assert f"{registry.host}/{repo_prefix}/copy@" in (tmp_path / "two/.imgpkg/images.yml").read_text()


def test_stale_if_error_does_not_serve_a_tag_answer_dated_in_the_future(
    own_registry: Registry, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An answer recorded a year ahead is not "young enough" for --stale-if-error: the registry's error stands."""
    Pusher(own_registry).image("ahead/img", make_image({"s.txt": "stale"}), tag="v1")
    tag = f"{own_registry.host}/ahead/img:v1"
    cache = tmp_path / "cache"
    ahead = _clock(monkeypatch)
    ahead[0] = YEAR
    assert run_cli("pull", "-i", tag, "-o", str(tmp_path / "one"), "--cache-dir", str(cache)).exit_code == 0
    own_registry.stop()
    ahead[0] = 0.0
    stale = run_cli("pull", "-i", tag, "-o", str(tmp_path / "two"), "--cache-dir", str(cache), "--stale-if-error", "1h")
    assert stale.exit_code == 1, stale.stderr
    assert "using its answer from" not in stale.stderr
    assert not (tmp_path / "two").exists()
