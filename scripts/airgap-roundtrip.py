"""Owns: the air-gap round trip through the real imgpkg and vendir, measured (issue 35's closing check).

Against a throwaway docker-registry on a random 127.0.0.1 port: push a bundle (a nested bundle, a multi-platform index
and an image of `--mib` MiB of random data) with imgpkg, then

  imgpkg copy -b … --to-tar t1 → ocivendir cache import t1 --to-repo R → registry stopped → offline kapp-shaped sync
  (ocivendir named vendir, recursive) → ocivendir cache export → registry started → imgpkg copy --tar t1 --to-repo R
  and imgpkg copy --tar t2 --to-repo F → real vendir syncs of R and F.

It prints the times of `copy --to-tar`, `cache import` and `cache export` (and per GiB), and checks that the offline
tree equals real vendir's online tree of R, that F's tags equal R's, and that F's tree equals R's with F's name. It
runs only when the tools are there and never downloads them; without them it says what is missing and exits 0.

  .venv/bin/python scripts/airgap-roundtrip.py [--mib 200]

Locations: AIRGAP_IMGPKG (/work/tools/bin/imgpkg, else `imgpkg`), AIRGAP_VENDIR (/work/tools/bin/vendir, else
`vendir`).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "cli")]

from tests.support.builders import Pusher, make_image  # noqa: E402

OCIVENDIR = str(Path(sys.executable).parent / "ocivendir")
LOCK = "---\napiVersion: imgpkg.carvel.dev/v1alpha1\nkind: ImagesLock\nimages:\n"


def tool(variable: str, default: str, name: str) -> str | None:
    path = os.environ.get(variable, default)
    return path if os.access(path, os.X_OK) else shutil.which(name)


class LocalRegistry:
    """docker-registry on a fixed random port, so that it can be stopped and started again under the same name."""

    def __init__(self, work: Path) -> None:
        """A registry whose storage and config live in `work` (not started)."""
        probe = socket.socket()
        probe.bind(("127.0.0.1", 0))
        self.port = probe.getsockname()[1]
        probe.close()
        self.host = f"127.0.0.1:{self.port}"
        self.url = f"http://{self.host}"
        self.config = work / "registry.yml"
        self.config.write_text(f"version: 0.1\nlog:\n  level: error\nstorage:\n  filesystem:\n    rootdirectory: "
                               f"{work / 'storage'}\nhttp:\n  addr: {self.host}\n")  # fmt: skip
        self.process: subprocess.Popen[bytes] | None = None

    def auth_header(self) -> dict[str, str]:
        """Anonymous (what Pusher asks of a registry)."""
        return {}

    def ssl_context(self) -> None:
        """Plain HTTP."""
        return

    def start(self) -> None:
        """Serve, and wait for the port to accept connections."""
        self.process = subprocess.Popen(["docker-registry", "serve", str(self.config)],  # noqa: S607
                                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
        for _ in range(200):
            try:
                socket.create_connection(("127.0.0.1", self.port), 0.2).close()
            except OSError:
                time.sleep(0.05)
            else:
                return

    def stop(self) -> None:
        """Stop serving (the storage stays)."""
        if self.process is not None:
            self.process.terminate()
            self.process.wait()
            self.process = None

    def tags(self, repo: str) -> list[str]:
        """A repository's tags, sorted."""
        with urllib.request.urlopen(f"{self.url}/v2/{repo}/tags/list", timeout=30) as response:  # noqa: S310
            return sorted(json.load(response)["tags"])


def run(*args: str, **kwargs: object) -> tuple[subprocess.CompletedProcess[str], float]:
    start = time.monotonic()
    done = subprocess.run(list(args), capture_output=True, text=True, check=False, **kwargs)  # type: ignore[call-overload]
    elapsed = time.monotonic() - start
    if done.returncode:
        sys.exit(f"failed: {' '.join(args)}\n{done.stdout}{done.stderr}")
    return done, elapsed


def tree(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def push_bundle(imgpkg: str, registry: LocalRegistry, work: Path, mib: int) -> str:
    """The outer bundle's digest reference: it names a nested bundle, an index and an image."""
    host = registry.host
    image_dir = work / "img"
    image_dir.mkdir()
    (image_dir / "app.yml").write_text("app: 1\n")
    if mib:
        (image_dir / "blob.bin").write_bytes(os.urandom(mib << 20))
    run(imgpkg, "push", "-i", f"{host}/src/img:v1", "-f", str(image_dir))
    image = run(imgpkg, "tag", "resolve", "-i", f"{host}/src/img:v1")[0].stdout.strip()
    index = Pusher(registry).index("src/multi", [make_image({"amd.txt": "amd"}), make_image({"arm.txt": "arm"})], "v1")  # type: ignore[arg-type]
    inner = work / "inner"
    (inner / ".imgpkg").mkdir(parents=True)
    (inner / ".imgpkg/images.yml").write_text(f"{LOCK}- image: {image}\n  annotations:\n    kbld.carvel.dev/id: app\n")
    (inner / "inner.yml").write_text("inner: true\n")
    run(imgpkg, "push", "-b", f"{host}/src/inner:v1", "-f", str(inner))
    nested = run(imgpkg, "tag", "resolve", "-i", f"{host}/src/inner:v1")[0].stdout.strip()
    outer = work / "outer"
    (outer / ".imgpkg").mkdir(parents=True)
    (outer / ".imgpkg/images.yml").write_text(f"{LOCK}- image: {nested}\n- image: {index}\n- image: {image}\n")
    (outer / "app.yml").write_text("outer: true\n")
    run(imgpkg, "push", "-b", f"{host}/src/outer:v1", "-f", str(outer))
    return run(imgpkg, "tag", "resolve", "-i", f"{host}/src/outer:v1")[0].stdout.strip()


def sync(program: str, ref: str, cwd: Path, env: dict[str, str]) -> dict[str, bytes]:
    config = (
        "apiVersion: vendir.k14s.io/v1alpha1\ndirectories:\n- contents:\n  - imgpkgBundle:\n"
        f"      image: {ref}\n      recursive: true\n    path: .\n"
        '  path: "0"\nkind: Config\nminimumRequiredVersion: ""\n'
    )
    cwd.mkdir()
    run(program, "sync", "-f", "-", "--lock-file", "/dev/null", input=config, cwd=cwd, env=env)
    return tree(cwd)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mib", type=int, default=200, help="MiB of random data in the bundle's image")
    args = parser.parse_args()
    imgpkg = tool("AIRGAP_IMGPKG", "/work/tools/bin/imgpkg", "imgpkg")
    vendir = tool("AIRGAP_VENDIR", "/work/tools/bin/vendir", "vendir")
    missing = [n for n, p in (("imgpkg", imgpkg), ("vendir", vendir), ("docker-registry",
               shutil.which("docker-registry"))) if p is None]  # fmt: skip
    if missing or imgpkg is None or vendir is None:
        print(f"skipped: {', '.join(missing)} not found")
        return 0
    with tempfile.TemporaryDirectory(prefix="airgap-") as tmp:
        work = Path(tmp)
        registry = LocalRegistry(work)
        registry.start()
        try:
            bundle = push_bundle(imgpkg, registry, work, args.mib)
            digest = bundle.partition("@")[2]
            relocated, final = f"{registry.host}/internal/app", f"{registry.host}/final/app"
            first, second, cache = work / "t1.tar", work / "t2.tar", work / "cache"
            _, to_tar = run(imgpkg, "copy", "-b", bundle, "--to-tar", str(first))
            size = first.stat().st_size
            _, imported = run(
                OCIVENDIR, "cache", "import", str(first), "--to-repo", relocated, "--cache-dir", str(cache)
            )
            registry.stop()
            named = work / "bin" / "vendir"
            named.parent.mkdir()
            named.symlink_to(OCIVENDIR)
            env = {k: v for k, v in os.environ.items() if not k.startswith(("OCIVENDIR_", "VENDIR_", "IMGPKG_"))}
            env |= {"HOME": str(work), "OCIVENDIR_CACHE_DIR": str(cache)}
            offline = sync(str(named), f"{relocated}@{digest}", work / "offline", env)
            _, exported = run(OCIVENDIR, "cache", "export", f"{relocated}@{digest}", "--to-tar", str(second),
                              "--cache-dir", str(cache))  # fmt: skip
            registry.start()
            run(imgpkg, "copy", "--tar", str(first), "--to-repo", relocated)
            run(imgpkg, "copy", "--tar", str(second), "--to-repo", final)
            online = sync(
                vendir, f"{relocated}@{digest}", work / "online", {**env, "VENDIR_CACHE_DIR": str(work / "v1")}
            )
            moved = sync(vendir, f"{final}@{digest}", work / "final", {**env, "VENDIR_CACHE_DIR": str(work / "v2")})
            same_tags = registry.tags("internal/app") == registry.tags("final/app")
        finally:
            registry.stop()
    gib = size / (1 << 30)
    for name, seconds in (("imgpkg copy --to-tar", to_tar), ("cache import", imported), ("cache export", exported)):
        print(f"{name:22} {seconds:6.2f} s  {seconds / gib:6.1f} s/GiB  ({size} bytes)")
    renamed = {k: v.replace(b"final/app", b"internal/app") for k, v in moved.items()}
    checks = {"offline tree == real vendir's online tree": offline == online,
              "exported copy: same tags": same_tags, "exported copy: same tree": renamed == online}  # fmt: skip
    for check, ok in checks.items():
        print(f"{'ok  ' if ok else 'FAIL'} {check}")
    return 0 if all(checks.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
