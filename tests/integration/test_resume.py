"""Blob downloads that resume, asking for the rest with `Range`; the digest still covers every byte.

A download cut off part-way keeps its bytes in the cache's `tmp/`, and the next attempt (a retry in the same run, or
the next run) asks only for what is missing. Through the fault proxy in front of the real registry, which records the Range of every request and the body bytes it
sent, so each test says exactly which bytes crossed the wire twice.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import run_cli
from tests.support.builders import Image, Pusher, make_image
from tests.support.cutter import CuttingProxy
from tests.support.faults import FaultProxy, Rule, fault_proxy
from tests.support.registry import Registry

ROOT = Path(__file__).resolve().parents[2]
DATA = os.urandom(9 << 20)  # incompressible, and large enough to be written on a thread of its own


def _image(pusher: Pusher, repo: str) -> tuple[Image, str, bytes]:
    """A one-layer image of DATA, pushed: the image, its layer's digest, and the layer's bytes."""
    image = make_image({"big.bin": DATA})
    pusher.image(repo, image)
    return image, json.loads(image.manifest)["layers"][0]["digest"], image.layers[0]


def _pull(proxy: FaultProxy, repo: str, image: Image, out: Path, cache: Path, *extra: str) -> tuple[int, str]:
    result = run_cli("pull", "-i", f"{proxy.host}/{repo}@{image.digest}", "-o", str(out), "--cache-dir", str(cache),
                     *extra)  # fmt: skip
    return result.exit_code, result.stderr


def _pull_ok(proxy: FaultProxy, repo: str, image: Image, out: Path, cache: Path) -> None:
    """A pull through `proxy` that succeeds and writes DATA."""
    code, stderr = _pull(proxy, repo, image, out, cache)
    assert code == 0, stderr
    assert (out / "big.bin").read_bytes() == DATA


def _layer_ranges(proxy: FaultProxy, layer: str) -> list[str | None]:
    """The Range header of each GET of the layer, in order (None: the whole blob was asked for)."""
    return [value for method, path, value in proxy.ranges if method == "GET" and path.endswith(f"/blobs/{layer}")]


def _partial(cache: Path, layer: str) -> Path:
    return cache / "tmp" / f"{layer.split(':')[1]}.partial"


def _keep(cache: Path, layer: str, data: bytes) -> None:
    """Leave `data` as the layer's partial download, as a broken-off run (or someone else) would."""
    _partial(cache, layer).parent.mkdir(parents=True)
    _partial(cache, layer).write_bytes(data)


def _spawn(*args: str, stderr: int | None = subprocess.DEVNULL) -> subprocess.Popen[str]:
    """`python -m ocivendir ARGS` in a process of its own (one a test can kill)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT / "cli")}
    return subprocess.Popen([sys.executable, "-m", "ocivendir", *args], env=env, stdout=subprocess.DEVNULL,
                            stderr=stderr, text=True)  # fmt: skip


def test_a_download_cut_off_mid_blob_resumes_from_where_it_broke_in_the_same_run(
    registry: Registry, pusher: Pusher, repo_prefix: str, tmp_path: Path
) -> None:
    image, layer, blob = _image(pusher, f"{repo_prefix}/img")
    cache = tmp_path / "cache"
    with fault_proxy(registry.host) as proxy:
        proxy.rules.append(Rule("GET", f"/blobs/{layer}", truncate=True, times=1))
        _pull_ok(proxy, f"{repo_prefix}/img", image, tmp_path / "out", cache)
        assert _layer_ranges(proxy, layer) == [None, f"bytes={len(blob) // 2}-"]
        assert [s for m, p, s in proxy.log if p.endswith(layer)] == [200, 206]
        assert proxy.body_bytes == len(image.manifest) + len(image.config) + len(blob)  # no byte sent twice
    assert list((cache / "tmp").iterdir()) == []


def test_a_process_killed_mid_download_leaves_its_bytes_and_the_next_run_asks_only_for_the_rest(
    registry: Registry, pusher: Pusher, repo_prefix: str, tmp_path: Path
) -> None:
    image, layer, _ = _image(pusher, f"{repo_prefix}/img")
    cache = tmp_path / "cache"
    with fault_proxy(registry.host) as proxy:
        proxy.rules.append(Rule("GET", f"/blobs/{layer}", truncate=True, stall=60, times=1))  # half, then silence
        ref = f"{proxy.host}/{repo_prefix}/img@{image.digest}"
        process = _spawn("pull", "-i", ref, "-o", str(tmp_path / "out"), "--cache-dir", str(cache))
        partial, deadline = _partial(cache, layer), time.monotonic() + 30
        while time.monotonic() < deadline and not (partial.exists() and partial.stat().st_size):
            time.sleep(0.01)
        time.sleep(0.3)  # what it received before the silence is written; nothing more comes
        kept = partial.stat().st_size
        process.send_signal(signal.SIGKILL)
        process.wait()
        assert partial.stat().st_size == kept > 0
        _pull_ok(proxy, f"{repo_prefix}/img", image, tmp_path / "out", cache)
        assert _layer_ranges(proxy, layer) == [None, f"bytes={kept}-"]
    assert list((cache / "tmp").iterdir()) == []
    assert run_cli("cache", "verify", "--cache-dir", str(cache)).exit_code == 0


def test_a_registry_that_ignores_range_sends_the_whole_blob_and_it_is_taken_from_byte_zero(
    registry: Registry, pusher: Pusher, repo_prefix: str, tmp_path: Path
) -> None:
    image, layer, blob = _image(pusher, f"{repo_prefix}/img")
    with fault_proxy(registry.host) as proxy:
        proxy.rules.append(Rule("GET", f"/blobs/{layer}", truncate=True, times=1))
        proxy.rules.append(Rule("GET", f"/blobs/{layer}", strip_range=True, ranged=True))
        _pull_ok(proxy, f"{repo_prefix}/img", image, tmp_path / "out", tmp_path / "cache")
        assert _layer_ranges(proxy, layer) == [None, f"bytes={len(blob) // 2}-"]
        assert [s for m, p, s in proxy.log if p.endswith(layer)] == [200, 200]


def test_a_416_answer_to_the_range_drops_the_kept_bytes_and_fetches_the_blob_again(
    registry: Registry, pusher: Pusher, repo_prefix: str, tmp_path: Path
) -> None:
    image, layer, blob = _image(pusher, f"{repo_prefix}/img")
    with fault_proxy(registry.host) as proxy:
        proxy.rules.append(Rule("GET", f"/blobs/{layer}", truncate=True, times=1))
        proxy.rules.append(Rule("GET", f"/blobs/{layer}", status=416, ranged=True, times=1))
        _pull_ok(proxy, f"{repo_prefix}/img", image, tmp_path / "out", tmp_path / "cache")
        assert _layer_ranges(proxy, layer) == [None, f"bytes={len(blob) // 2}-", None]


def test_a_tampered_partial_is_caught_by_the_digest_and_the_blob_is_fetched_again_from_byte_zero(
    registry: Registry, pusher: Pusher, repo_prefix: str, tmp_path: Path
) -> None:
    image, layer, blob = _image(pusher, f"{repo_prefix}/img")
    cache = tmp_path / "cache"
    tampered = bytearray(blob[: len(blob) // 2])
    tampered[100] ^= 0xFF
    _keep(cache, layer, bytes(tampered))
    with fault_proxy(registry.host) as proxy:
        _pull_ok(proxy, f"{repo_prefix}/img", image, tmp_path / "out", cache)
        assert _layer_ranges(proxy, layer) == [f"bytes={len(tampered)}-", None]
    assert list((cache / "tmp").iterdir()) == []


def test_a_partial_holding_another_blobs_bytes_is_dropped_and_the_blob_fetched_from_byte_zero(
    registry: Registry, pusher: Pusher, repo_prefix: str, tmp_path: Path
) -> None:
    image, layer, _ = _image(pusher, f"{repo_prefix}/img")
    other = make_image({"other.bin": os.urandom(1 << 20)}).layers[0]
    cache = tmp_path / "cache"
    _keep(cache, layer, other[:700_000])
    with fault_proxy(registry.host) as proxy:
        _pull_ok(proxy, f"{repo_prefix}/img", image, tmp_path / "out", cache)
        assert _layer_ranges(proxy, layer) == ["bytes=700000-", None]


def test_a_complete_partial_from_a_run_killed_before_it_published_is_verified_without_a_request(
    registry: Registry, pusher: Pusher, repo_prefix: str, tmp_path: Path
) -> None:
    image, layer, blob = _image(pusher, f"{repo_prefix}/img")
    cache = tmp_path / "cache"
    _keep(cache, layer, blob)
    with fault_proxy(registry.host) as proxy:
        _pull_ok(proxy, f"{repo_prefix}/img", image, tmp_path / "out", cache)
        assert _layer_ranges(proxy, layer) == []
    assert (cache / "blobs/sha256" / layer.split(":")[1]).read_bytes() == blob


def test_a_resumed_download_follows_a_redirect_to_blob_storage_with_its_range(
    registry: Registry, pusher: Pusher, repo_prefix: str, tmp_path: Path
) -> None:
    image, layer, blob = _image(pusher, f"{repo_prefix}/img")
    storage = f"{registry.url}/v2/{repo_prefix}/img/blobs/{layer}"  # another host:port, as blob storage is
    mark = registry.mark()
    with fault_proxy(registry.host) as proxy:
        proxy.rules.append(Rule("GET", f"/blobs/{layer}", truncate=True, times=1))
        proxy.rules.append(Rule("GET", f"/blobs/{layer}", status=307, headers={"Location": storage}, ranged=True))
        _pull_ok(proxy, f"{repo_prefix}/img", image, tmp_path / "out", tmp_path / "cache")
        assert _layer_ranges(proxy, layer) == [None, f"bytes={len(blob) // 2}-"]
    direct = [status for method, path, status in registry.since(mark) if method == "GET" and path.endswith(layer)]
    assert direct == [200, 206]  # the proxy's forward of the first GET, then the storage URL's ranged GET


def test_a_download_cut_off_by_the_runs_deadline_keeps_its_bytes_for_the_next_run(
    registry: Registry, pusher: Pusher, repo_prefix: str, tmp_path: Path
) -> None:
    image, layer, blob = _image(pusher, f"{repo_prefix}/img")
    cache = tmp_path / "cache"
    with fault_proxy(registry.host) as proxy:
        proxy.rules.append(Rule("GET", f"/blobs/{layer}", truncate=True, stall=8, times=1))
        started = time.monotonic()
        code, _ = _pull(proxy, f"{repo_prefix}/img", image, tmp_path / "out", cache, "--timeout", "2s")
        assert code == 1
        assert time.monotonic() - started < 7  # the deadline ended it, not the proxy's silence
        kept = _partial(cache, layer).stat().st_size
        assert 0 < kept <= len(blob) // 2  # what had arrived in whole chunks before the silence
        _pull_ok(proxy, f"{repo_prefix}/img", image, tmp_path / "out", cache)
        assert _layer_ranges(proxy, layer) == [None, f"bytes={kept}-"]


def test_processes_pulling_a_blob_with_a_kept_partial_at_once_resume_it_once(
    registry: Registry, pusher: Pusher, repo_prefix: str, tmp_path: Path
) -> None:
    image, layer, blob = _image(pusher, f"{repo_prefix}/img")
    cache, half = tmp_path / "cache", len(blob) // 2
    _keep(cache, layer, blob[:half])
    with fault_proxy(registry.host) as proxy:
        proxy.rules.append(Rule("GET", f"/blobs/{layer}", delay=0.5))  # long enough for the others to wait
        ref = f"{proxy.host}/{repo_prefix}/img@{image.digest}"
        processes = [_spawn("pull", "-i", ref, "-o", str(tmp_path / f"out{n}"), "--cache-dir", str(cache),
                            stderr=subprocess.PIPE) for n in range(4)]  # fmt: skip
        for process in processes:
            _, stderr = process.communicate(timeout=120)
            assert process.returncode == 0, stderr
        assert _layer_ranges(proxy, layer) == [f"bytes={half}-"]  # one download, of the missing half
    for n in range(4):
        assert (tmp_path / f"out{n}/big.bin").read_bytes() == DATA


def test_a_connection_reset_mid_blob_is_resumed_from_the_bytes_received(
    registry: Registry, pusher: Pusher, repo_prefix: str, tmp_path: Path
) -> None:
    image, layer, blob = _image(pusher, f"{repo_prefix}/img")
    mark = registry.mark()
    with CuttingProxy(registry.host, cut_at=len(blob) // 2) as proxy:
        result = run_cli("pull", "-i", f"{proxy.host}/{repo_prefix}/img@{image.digest}", "-o", str(tmp_path / "out"),
                         "--cache-dir", str(tmp_path / "cache"))  # fmt: skip
        assert result.exit_code == 0, result.stderr
        assert proxy.cut
        assert proxy.total < len(blob) + len(blob) // 2  # the bytes before the reset were not sent again
    gets = [status for method, path, status in registry.since(mark) if method == "GET" and path.endswith(layer)]
    assert gets == [200, 206]
    assert (tmp_path / "out/big.bin").read_bytes() == DATA


def test_a_sync_resumes_a_blob_cut_off_mid_download_as_a_pull_does(
    registry: Registry, pusher: Pusher, repo_prefix: str, tmp_path: Path
) -> None:
    image, layer, blob = _image(pusher, f"{repo_prefix}/img")
    work, cache = tmp_path / "work", tmp_path / "cache"
    work.mkdir()
    with fault_proxy(registry.host) as proxy:
        proxy.rules.append(Rule("GET", f"/blobs/{layer}", truncate=True, times=1))
        (work / "vendir.yml").write_text(
            "apiVersion: vendir.k14s.io/v1alpha1\nkind: Config\ndirectories:\n- path: vendor\n  contents:\n"
            f"  - path: app\n    image:\n      url: {proxy.host}/{repo_prefix}/img@{image.digest}\n"
        )
        result = run_cli("sync", "--chdir", str(work), "--cache-dir", str(cache))
        assert result.exit_code == 0, result.stderr
        assert _layer_ranges(proxy, layer) == [None, f"bytes={len(blob) // 2}-"]
    assert (work / "vendor/app/big.bin").read_bytes() == DATA
    assert list((cache / "tmp").iterdir()) == []


def test_bytes_kept_from_a_mirror_are_resumed_at_the_origin_when_the_mirror_fails(
    registry: Registry, pusher: Pusher, repo_prefix: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    image, layer, blob = _image(pusher, f"{repo_prefix}/img")
    half = len(blob) // 2
    mark = registry.mark()
    with fault_proxy(registry.host) as mirror:
        mirror.rules.append(Rule("GET", f"/blobs/{layer}", truncate=True, times=1))
        mirror.rules.append(Rule("GET", f"/blobs/{layer}", status=503, ranged=True))  # then the mirror is down
        config = tmp_path / "registries.yaml"
        config.write_text(f'mirrors:\n  "{registry.host}":\n    endpoint: ["{mirror.url}"]\n')
        monkeypatch.setenv("OCIVENDIR_REGISTRY_CONFIG", str(config))
        result = run_cli("pull", "-i", f"{registry.host}/{repo_prefix}/img@{image.digest}", "-o",
                         str(tmp_path / "out"), "--cache-dir", str(tmp_path / "cache"))  # fmt: skip
        assert result.exit_code == 0, result.stderr
        ranges = _layer_ranges(mirror, layer)
        assert ranges[0] is None
        assert set(ranges[1:]) == {f"bytes={half}-"}
    at_registry = [(s) for m, p, s in registry.since(mark) if m == "GET" and p.endswith(layer)]
    assert at_registry == [200, 206]  # the mirror's forward of the first GET; the origin's answer to the Range
    assert (tmp_path / "out/big.bin").read_bytes() == DATA


def test_files_from_bytes_a_download_started_over_from_never_stay_in_the_tree(
    registry: Registry, pusher: Pusher, repo_prefix: str, tmp_path: Path
) -> None:
    """The tee applies only what is verified in the end, even when a download starts over.

    A registry sends half of another layer (with a file of its own), then cuts; the resumed bytes do not match, the
    blob is fetched again from byte zero and verifies: the tree holds the verified layer's files alone.
    """
    image, layer, blob = _image(pusher, f"{repo_prefix}/img")
    other = make_image({"injected.txt": "not in the layer\n", "pad.bin": os.urandom(len(blob))}).layers[0]
    with fault_proxy(registry.host) as proxy:
        proxy.rules.append(Rule("GET", f"/blobs/{layer}", body=other, times=1, ranged=False))
        proxy.rules.append(Rule("GET", f"/blobs/{layer}", truncate=True, times=1, ranged=False))
        _pull_ok(proxy, f"{repo_prefix}/img", image, tmp_path / "out", tmp_path / "cache")
        assert _layer_ranges(proxy, layer) == [None, f"bytes={len(other) // 2}-", None]
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["big.bin"]
