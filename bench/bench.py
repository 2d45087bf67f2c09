"""Benchmarks: cold and warm pulls against skopeo, and start-up time. Prints ratios; asserts nothing timed."""

from __future__ import annotations

import argparse
import multiprocessing
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "cli"), str(ROOT / "bench")]

from tests.support.builders import Entry, Image, Pusher, config_bytes, images_yml, tar_bytes  # noqa: E402
from tests.support.registry import Registry  # noqa: E402

from harness import OCIVENDIR, measure, report, reset  # noqa: E402


def big_bundle(size_mib: int) -> Image:
    """A single-layer bundle with one incompressible file of `size_mib` MiB (layer stored uncompressed-gzip)."""
    import gzip  # noqa: PLC0415

    payload = os.urandom(size_mib * 1024 * 1024)
    entries = [Entry(".", kind="dir", mode=0o700), Entry(".imgpkg", kind="dir", mode=0o700),
               Entry(".imgpkg/images.yml", images_yml([]).encode()), Entry("data.bin", payload)]  # fmt: skip
    layer = gzip.compress(tar_bytes(entries), compresslevel=0, mtime=0)
    return Image(config=config_bytes(bundle=True, layers=[layer]), layers=[layer])


def _seed(port: int, workdir: str, size_mib: int) -> str:
    registry = Registry(mode="plain", workdir=Path(workdir), port=port)
    return Pusher(registry).image("bench/big", big_bundle(size_mib), tag="v1")


def seed_in_child(registry: Registry, size_mib: int) -> str:
    """Build and push in a child process, so this process stays small and children's peak RSS is their own."""
    with multiprocessing.get_context("spawn").Pool(1) as pool:
        return str(pool.apply(_seed, (registry.port, str(registry.workdir), size_mib)))


def bench_pull(registry: Registry, work: Path, size_mib: int, runs: int) -> None:
    ref = seed_in_child(registry, size_mib)
    cache, out, skopeo_dir = work / "cache", work / "out", work / "skopeo"

    def cold() -> None:
        reset(cache)()
        reset(out)()

    rows = []
    skopeo = shutil.which("skopeo")
    baseline = None
    if skopeo:
        baseline = measure(
            f"skopeo copy docker://… dir:… ({size_mib} MiB, verify only)",
            [skopeo, "copy", "--quiet", "--src-tls-verify=false", f"docker://{ref}", f"dir:{skopeo_dir}"],
            runs=runs, before=reset(skopeo_dir),
        )  # fmt: skip
        rows.append(baseline)
    imgpkg = shutil.which("imgpkg")
    if imgpkg:
        rows.append(measure(f"imgpkg pull -b ({size_mib} MiB)", [imgpkg, "pull", "-b", ref, "-o", str(work / "imgpkg")],
                            runs=runs, before=reset(work / "imgpkg")))  # fmt: skip
    pull = [*OCIVENDIR, "pull", "-b", ref, "-o", str(out), "--cache-dir", str(cache), "--json", "-q"]
    rows.append(measure(f"ocivendir pull, cold ({size_mib} MiB: fetch, verify, extract)", pull, runs=runs,
                        before=cold))  # fmt: skip
    rows.append(measure("ocivendir pull, warm (digest cached)", pull, runs=runs, before=reset(out)))
    report(f"Pull of a {size_mib} MiB single-layer bundle from a local registry", rows, baseline)


def synthetic_cache(root: Path, entries: int) -> None:
    """A cache index with `entries` refs (rows only: `cache ls` and `prune --dry-run` never read blobs)."""
    from ocivendir.cache.index import CacheIndex  # noqa: PLC0415
    from ocivendir.cache.store import BlobStore  # noqa: PLC0415

    BlobStore(root).ensure_layout()
    index = CacheIndex(root / "index.db")
    now = time.time()
    statements: list[tuple[str, tuple[object, ...]]] = []
    for number in range(entries):
        digest = f"sha256:{number:064x}"
        layer = f"sha256:{number + entries:064x}"
        statements += [
            ("INSERT INTO blobs VALUES (?,?,?,?,?)", (digest, 500, "m", now, now)),
            ("INSERT INTO blobs VALUES (?,?,?,?,?)", (layer, 100_000, "l", now, now)),
            ("INSERT INTO edges VALUES (?,?)", (digest, digest)),
            ("INSERT INTO edges VALUES (?,?)", (digest, layer)),
            ("INSERT INTO refs VALUES (?,?,?,?,?,?,?)",
             (f"registry.example.com/app{number}@{digest}", digest, "bundle", "m", 500, now - number, now - number)),
        ]  # fmt: skip
    index._write(statements)  # noqa: SLF001 - bulk seeding for the benchmark
    index.close()


def bench_cache_commands(work: Path, runs: int, entries: int = 10_000) -> None:
    root = work / "big-cache"
    synthetic_cache(root, entries)
    rows = [
        measure(f"ocivendir cache ls ({entries} entries)", [*OCIVENDIR, "cache", "ls", "--cache-dir", str(root)],
                runs=runs),
        measure(f"ocivendir cache ls --json ({entries} entries)",
                [*OCIVENDIR, "cache", "ls", "--cache-dir", str(root), "--json"], runs=runs),
        measure(f"ocivendir cache prune --max-size 500MiB --dry-run ({entries})",
                [*OCIVENDIR, "cache", "prune", "--max-size", "500MiB", "--dry-run", "--cache-dir", str(root)],
                runs=runs),
    ]  # fmt: skip
    report(f"Cache commands on a synthetic cache of {entries} entries (target < 1 s each)", rows)


WARM_SYNC = """apiVersion: vendir.k14s.io/v1alpha1
kind: Config
directories:
- path: vendor
  contents:
  - path: bundle
    imgpkgBundle: {{image: "{bundle}"}}
  - path: image
    image: {{url: "{image}"}}
"""


def bench_warm_sync(registry: Registry, work: Path, runs: int) -> None:
    """A digest-pinned relocated bundle and an image, synced once, then re-synced from the cache."""
    from tests.support.builders import make_image, publish_bundle, relocate  # noqa: PLC0415

    pusher = Pusher(registry)
    published = publish_bundle(pusher, "bench-sync", images=1)
    relocate(pusher, published, "bench-sync/relocated")
    image = pusher.image("bench-sync/img", make_image({"app.yml": "a: 1\n"}))
    project = work / "sync"
    project.mkdir()
    (project / "vendir.yml").write_text(
        WARM_SYNC.format(bundle=published.ref(registry, "bench-sync/relocated"), image=image)
    )
    command = [*OCIVENDIR, "sync", "--chdir", str(project), "--cache-dir", str(work / "sync-cache"), "--json"]
    measure("first sync", command, runs=1)
    bare = measure("python -c pass (same interpreter)", [sys.executable, "-c", "pass"], runs=runs * 3)
    warm = measure("ocivendir sync, warm (bundle + image by digest)", command, runs=runs * 3)
    console = shutil.which("ocivendir", path=str(Path(sys.executable).parent))
    rows = [bare, warm]
    if console:
        rows.append(measure("ocivendir sync via the console script", [console, *command[3:]], runs=runs * 3))
    vendir = shutil.which("vendir")
    if vendir:
        env = {**os.environ, "VENDIR_CACHE_DIR": str(work / "vendir-cache")}
        argv = [vendir, "sync", "--chdir", str(project)]
        rows.append(measure("vendir sync (on PATH), VENDIR_CACHE_DIR set", argv, runs=runs * 3, env=env))
    report("Warm re-sync (target: 0 requests, under 4x the bare interpreter start-up)", rows, bare)


def bench_verify_200(registry: Registry, work: Path, runs: int) -> None:
    """verify-relocation --each-image on a 200-image bundle: 1 HEAD to resolve the tag + 200 HEAD probes."""
    from tests.support.builders import publish_bundle, relocate  # noqa: PLC0415

    pusher = Pusher(registry)
    published = publish_bundle(pusher, "bench-verify", images=200)
    relocate(pusher, published, "bench-verify/relocated", with_locations=False)
    ref = f"{registry.host}/bench-verify/relocated:v1"
    cache = work / "verify-cache"
    base = [*OCIVENDIR, "verify-relocation", "-b", ref, "--each-image", "--cache-dir", str(cache), "--json"]
    measure("warm the content cache", base, runs=1)
    pooled = measure("verify-relocation --each-image, 200 images, pool of 8", base, runs=runs)
    sequential = measure("verify-relocation --each-image, 200 images, --concurrency 1", [*base, "--concurrency", "1"],
                         runs=runs)  # fmt: skip
    report("verify-relocation on 200 images (requests: 1 tag HEAD + 200 probes)", [sequential, pooled], sequential)


def bench_startup(runs: int) -> None:
    bare = measure("python -c pass (same interpreter)", [sys.executable, "-c", "pass"], runs=runs * 3)
    version = measure("ocivendir --version", [*OCIVENDIR, "--version"], runs=runs * 3)
    report("Start-up", [bare, version], bare)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--size-mib", type=int, default=100)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    # installed packages carry compiled bytecode; make the source tree match so start-up is measured fairly
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(ROOT / "cli")], check=True)
    work = Path(tempfile.mkdtemp(prefix="ocivendir-bench-"))
    registry = Registry(mode="plain", workdir=work / "registry").start()
    try:
        bench_pull(registry, work, args.size_mib, args.runs)
        bench_warm_sync(registry, work, args.runs)
        bench_verify_200(registry, work, args.runs)
        bench_cache_commands(work, args.runs)
        bench_startup(args.runs)
    finally:
        registry.stop()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
