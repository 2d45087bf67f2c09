"""The demo: a throwaway local registry seeded with a sample bundle, then ocivendir pulling it twice.

The second pull of the digest-pinned bundle is served from the cache: the registry's access log shows 0 requests.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "cli")]

from tests.support.builders import Pusher, publish_bundle, relocate  # noqa: E402
from tests.support.registry import Registry, binary  # noqa: E402

OCIVENDIR = [sys.executable, "-m", "ocivendir"]
VENDIR_YML = """apiVersion: vendir.k14s.io/v1alpha1
kind: Config
directories:
- path: vendor
  contents:
  - path: bundle
    imgpkgBundle:
      image: {bundle}
  - path: image
    image:
      url: {image}
  - path: values
    inline:
      paths:
        values.yml: |
          replicas: 2
"""


def step(title: str) -> None:
    print(f"\n== {title}")


def run(*args: str) -> dict[str, object]:
    shown = " ".join(["ocivendir", *args])
    print(f"$ {shown}")
    done = subprocess.run([*OCIVENDIR, *args, "--json"], capture_output=True, text=True, check=False)
    if done.returncode not in (0, 3):
        print(done.stderr, file=sys.stderr)
        sys.exit(done.returncode)
    return dict(json.loads(done.stdout))


def main() -> None:
    if binary() is None:
        sys.exit("docker-registry is missing: run scripts/bootstrap.sh as root, or apt-get install docker-registry")
    work = Path(tempfile.mkdtemp(prefix="ocivendir-demo-"))
    registry = Registry(mode="plain", workdir=work / "registry").start()
    try:
        step(f"Seeding a throwaway registry at {registry.host}")
        pusher = Pusher(registry)
        published = publish_bundle(pusher, "demo", images=2)
        relocate(pusher, published, "demo-relocated/bundle")
        bundle = published.ref(registry, "demo-relocated/bundle")
        print(f"sample bundle (relocated copy, as imgpkg copy leaves it): {bundle}")
        cache = work / "cache"

        step("First pull: fetched, verified and cached")
        mark = registry.mark()
        first = run("pull", "-b", bundle, "-o", str(work / "pull-1"), "--cache-dir", str(cache))
        print(f"requests: {first['result']['requests']['total']} (registry log: {len(registry.since(mark))})")  # type: ignore[index]

        step("Second pull of the same digest: served from the cache")
        mark = registry.mark()
        second = run("pull", "-b", bundle, "-o", str(work / "pull-2"), "--cache-dir", str(cache))
        logged = len(registry.since(mark))
        print(f"requests: {second['result']['requests']['total']} (registry log: {logged})")  # type: ignore[index]
        images_yml = (work / "pull-2/.imgpkg/images.yml").read_text()
        print(f"\n.imgpkg/images.yml, rewritten to the bundle's repository:\n{images_yml}")
        if logged != 0:
            sys.exit("unexpected: the second pull reached the registry")

        step("sync: a vendir.yml with the relocated bundle, a plain image and inline values")
        sync_dir = work / "sync"
        sync_dir.mkdir()
        image_ref = next(iter(published.images))
        (sync_dir / "vendir.yml").write_text(VENDIR_YML.format(bundle=bundle, image=image_ref))
        mark = registry.mark()
        synced = run("sync", "--chdir", str(sync_dir), "--cache-dir", str(work / "sync-cache"))
        print(f"requests: {synced['result']['requests']['total']} (registry log: {len(registry.since(mark))})")  # type: ignore[index]
        print((sync_dir / "vendir.lock.yml").read_text())

        step("Re-sync: everything is digest-pinned and cached")
        mark = registry.mark()
        again = run("sync", "--chdir", str(sync_dir), "--cache-dir", str(work / "sync-cache"))
        logged = len(registry.since(mark))
        print(f"requests: {again['result']['requests']['total']} (registry log: {logged})")  # type: ignore[index]
        if logged != 0:
            sys.exit("unexpected: the cached re-sync reached the registry")

        step("verify-relocation: the relocated copy, then the original (exit 3: not relocated)")
        for ref in (bundle, published.ref(registry)):
            report = run("verify-relocation", "-b", ref, "--no-cache")
            verdicts = [b["verdict"] for b in report["result"]["bundles"]]  # type: ignore[index]
            print(f"{ref}: {verdicts[0]} (status {report['status']})")
        print(f"\ndemo files are in {work}")
    finally:
        registry.stop()


if __name__ == "__main__":
    main()
