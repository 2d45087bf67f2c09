"""The cache against a real registry: many processes at once, tampering on disk, kills, skopeo, the cache commands."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import run_cli
from tests.support.builders import Pusher, make_image, publish_bundle
from tests.support.registry import Registry

ROOT = Path(__file__).resolve().parents[2]


def ocivendir(*args: str) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT / "cli")}
    return subprocess.Popen([sys.executable, "-m", "ocivendir", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env)  # fmt: skip


def files(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_eight_processes_pulling_one_bundle_download_each_blob_once(
    registry: Registry, pusher: Pusher, repo_prefix: str, tmp_path: Path
) -> None:
    published = publish_bundle(pusher, repo_prefix, images=1, files={"big.bin": "x" * 2_000_000})
    cache = tmp_path / "cache"
    mark = registry.mark()
    processes = [
        ocivendir("pull", "-b", published.ref(registry), "-o", str(tmp_path / f"out{n}"), "--cache-dir", str(cache))
        for n in range(8)
    ]
    for process in processes:
        _, stderr = process.communicate(timeout=120)
        assert process.returncode == 0, stderr
    blob_gets = [path for method, path, _ in registry.since(mark) if method == "GET" and "/blobs/" in path]
    assert len(blob_gets) == len(set(blob_gets)) == 2  # the config and the layer, once each
    manifest_gets = [p for m, p, _ in registry.since(mark) if m == "GET" and "/manifests/sha256:" in p]
    assert len(manifest_gets) == 1
    first = files(tmp_path / "out0")
    assert "big.bin" in first
    for n in range(1, 8):
        assert files(tmp_path / f"out{n}") == first


def test_a_blob_truncated_on_disk_is_refetched_online_and_a_clear_error_offline(
    pusher: Pusher, repo_prefix: str, tmp_path: Path
) -> None:
    image = make_image({"data.txt": "precious\n" * 1000})
    ref = pusher.image(f"{repo_prefix}/img", image)
    cache = tmp_path / "cache"
    assert run_cli("pull", "-i", ref, "-o", str(tmp_path / "one"), "--cache-dir", str(cache)).exit_code == 0
    layer_hex = json.loads(image.manifest)["layers"][0]["digest"].split(":")[1]
    blob = cache / "blobs/sha256" / layer_hex
    blob.write_bytes(blob.read_bytes()[:50])
    offline = run_cli("pull", "-i", ref, "-o", str(tmp_path / "two"), "--cache-dir", str(cache), "--offline")
    assert offline.exit_code == 1
    assert "--offline" in offline.stderr
    assert not (tmp_path / "two").exists()
    blob.write_bytes(blob.read_bytes()[:50] if blob.exists() else b"truncated")
    online = run_cli("pull", "-i", ref, "-o", str(tmp_path / "three"), "--cache-dir", str(cache), "--json")
    assert online.exit_code == 0, online.stderr
    assert (tmp_path / "three/data.txt").read_text() == "precious\n" * 1000
    assert run_cli("cache", "verify", "--cache-dir", str(cache)).exit_code == 0


def test_cache_verify_finds_and_removes_a_truncated_blob(pusher: Pusher, repo_prefix: str, tmp_path: Path) -> None:
    image = make_image({"a.txt": "a" * 5000})
    ref = pusher.image(f"{repo_prefix}/img", image)
    cache = tmp_path / "cache"
    assert run_cli("pull", "-i", ref, "-o", str(tmp_path / "out"), "--cache-dir", str(cache)).exit_code == 0
    layer_hex = json.loads(image.manifest)["layers"][0]["digest"].split(":")[1]
    (cache / "blobs/sha256" / layer_hex).write_bytes(b"short")
    dry = run_cli("cache", "verify", "--cache-dir", str(cache))
    assert dry.exit_code == 1
    assert "would remove" in dry.stdout
    fixed = run_cli("cache", "verify", "--repair", "--cache-dir", str(cache), "--json")
    assert fixed.exit_code == 0
    doc = json.loads(fixed.stdout)
    assert any("truncated" in r for r in doc["result"]["repairs"])
    listed = json.loads(run_cli("cache", "ls", "--cache-dir", str(cache), "--json").stdout)
    assert listed["result"]["entries"] == []


@pytest.mark.skipif(shutil.which("skopeo") is None and not os.environ.get("CI"), reason="skopeo not installed")
def test_skopeo_reads_cached_images_through_the_oci_layout(pusher: Pusher, repo_prefix: str, tmp_path: Path) -> None:
    image = make_image({"hello.txt": "hello"})
    ref = pusher.image(f"{repo_prefix}/img", image)
    cache = tmp_path / "cache"
    assert run_cli("pull", "-i", ref, "-o", str(tmp_path / "out"), "--cache-dir", str(cache)).exit_code == 0
    listed = json.loads(run_cli("cache", "ls", "--cache-dir", str(cache), "--json").stdout)
    assert [e["ref"] for e in listed["result"]["entries"]] == [ref]
    inspected = subprocess.run(["skopeo", "inspect", "--raw", f"oci:{cache}:{ref}"],  # noqa: S607
                               capture_output=True, check=True)  # fmt: skip
    assert inspected.stdout == image.manifest
    copied = tmp_path / "copied"
    subprocess.run(["skopeo", "copy", "--quiet", f"oci:{cache}:{ref}", f"dir:{copied}"],  # noqa: S607
                   check=True, capture_output=True)  # fmt: skip
    assert (copied / json.loads(image.manifest)["config"]["digest"].split(":")[1]).read_bytes() == image.config


def test_a_process_killed_mid_download_leaves_nothing_that_is_served(own_registry: Registry, tmp_path: Path) -> None:
    pusher = Pusher(own_registry)
    big = make_image({"big.bin": os.urandom(30 * 1024 * 1024)})
    ref = pusher.image("kill/img", big)
    cache = tmp_path / "cache"
    out = tmp_path / "out"
    layer_hex = json.loads(big.manifest)["layers"][0]["digest"].split(":")[1]
    process = ocivendir("pull", "-i", ref, "-o", str(out), "--cache-dir", str(cache))
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and not any((cache / "tmp").glob(f"{layer_hex}.partial")):
        time.sleep(0.005)
    process.send_signal(signal.SIGKILL)
    process.wait()
    assert not (cache / "blobs/sha256" / layer_hex).exists() or (
        cache / "blobs/sha256" / layer_hex
    ).stat().st_size == len(big.layers[0])
    assert not out.exists() or (out / "big.bin").stat().st_size == 30 * 1024 * 1024
    again = run_cli("pull", "-i", ref, "-o", str(out), "--cache-dir", str(cache))
    assert again.exit_code == 0, again.stderr
    assert (out / "big.bin").stat().st_size == 30 * 1024 * 1024
    assert list((cache / "tmp").iterdir()) == []
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cache", "out"]
    assert run_cli("cache", "verify", "--cache-dir", str(cache)).exit_code == 0


def test_cache_ls_and_prune_through_the_cli(registry: Registry, pusher: Pusher, repo_prefix: str,
                                            tmp_path: Path) -> None:  # fmt: skip
    cache = tmp_path / "cache"
    published = publish_bundle(pusher, repo_prefix, images=1)
    assert (
        run_cli("pull", "-b", published.ref(registry), "-o", str(tmp_path / "b"), "--cache-dir", str(cache)).exit_code
        == 0
    )
    listing = run_cli("cache", "ls", "--cache-dir", str(cache))
    assert listing.exit_code == 0
    assert "REF" in listing.stdout
    assert published.ref(registry) in listing.stdout
    assert "not-relocated" in listing.stdout
    dry = run_cli("cache", "prune", "--all", "--dry-run", "--cache-dir", str(cache))
    assert "would remove" in dry.stdout
    assert (
        json.loads(run_cli("cache", "ls", "--cache-dir", str(cache), "--json").stdout)["result"]["totals"]["entries"]
        == 1
    )
    done = run_cli("cache", "prune", "--all", "--cache-dir", str(cache), "--json")
    assert done.exit_code == 0
    assert json.loads(done.stdout)["result"]["bytes_freed"] > 0
    assert list((cache / "blobs/sha256").iterdir()) == []
    assert json.loads((cache / "index.json").read_text())["manifests"] == []
    assert run_cli("cache", "prune", "--all", "--max-size", "1Gi", "--cache-dir", str(cache)).exit_code == 2


def test_prune_running_alongside_syncs_never_breaks_them(
    registry: Registry, pusher: Pusher, repo_prefix: str, tmp_path: Path
) -> None:
    refs = [pusher.image(f"{repo_prefix}/img{n}", make_image({f"f{n}.txt": str(n) * 50_000})) for n in range(4)]
    cache = tmp_path / "cache"
    config = "apiVersion: vendir.k14s.io/v1alpha1\nkind: Config\ndirectories:\n" + "".join(
        f'- path: d{n}\n  contents:\n  - path: .\n    image: {{url: "{ref}"}}\n' for n, ref in enumerate(refs)
    )
    syncs = []
    for n in range(4):
        work = tmp_path / f"work{n}"
        work.mkdir()
        (work / "vendir.yml").write_text(config)
        syncs.append(ocivendir("sync", "--chdir", str(work), "--cache-dir", str(cache)))
    pruners = [ocivendir("cache", "prune", "--all", "--cache-dir", str(cache)) for _ in range(6)]
    for process in syncs + pruners:
        _, stderr = process.communicate(timeout=120)
        assert process.returncode == 0, stderr
    for n in range(4):
        for m in range(4):
            assert (tmp_path / f"work{n}/d{m}/f{m}.txt").read_text() == str(m) * 50_000
    assert run_cli("cache", "verify", "--cache-dir", str(cache)).exit_code == 0
