"""The build as kapp-controller's sidecar runs it: a root with only the build and glibc, chroot, UID 1000/GID 0.

The root holds the build (root-owned, read-only) under /opt/ocivendir with /vendir linked to it, glibc's libraries,
/etc/passwd and /etc/group, the CA bundle at photon's path, /dev/null, /dev/urandom and /tmp; no Python, no /proc,
PATH=/ only. The registry speaks TLS with a test CA; a CONNECT proxy stands in for kapp-controller's httpsProxy.
The server a call started in the root (vendir mode's default) is ended with the test, as the pod would end it.
"""

from __future__ import annotations

import os
import shutil
import signal
import stat
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from scripts.dist import elfcheck

from tests.integration.test_kapp_controller import PLACEHOLDER
from tests.support import registry as registry_support
from tests.support.builders import Pusher, make_image, publish_bundle, relocate
from tests.support.serve import serving
from tests.support.tunnel import ConnectProxy

pytestmark = [pytest.mark.dist, pytest.mark.integration]

CA_BUNDLE = "etc/pki/tls/certs/ca-bundle.crt"
MEM_TMP = "etc/kappctrl-mem-tmp"
OPENSHIFT_UID = 1000660000


def _require_root() -> None:
    if os.geteuid() != 0:
        if os.environ.get("CI"):
            pytest.fail("the sidecar test needs root (chroot, mknod) and CI is set")
        pytest.skip("the sidecar test needs root (chroot, mknod)")


def _end_processes_rooted_in(root: Path) -> list[int]:
    """SIGKILL every process whose root directory is `root` (the servers its calls started); their pids."""
    target = root.stat()
    ended = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            rooted = (entry / "root").stat()
            if (rooted.st_dev, rooted.st_ino) == (target.st_dev, target.st_ino):
                os.kill(int(entry.name), signal.SIGKILL)
                ended.append(int(entry.name))
        except OSError:  # gone meanwhile, or not ours to look at
            continue
    return ended


@pytest.fixture
def root(tmp_path: Path) -> Iterator[Path]:
    """Where the test builds its root; every process left running in it is ended with the test."""
    path = tmp_path / "root"
    yield path
    if path.exists():
        _end_processes_rooted_in(path)


def _copy_system_library(root: Path, name: str) -> None:
    for directory in ("/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu", "/lib/aarch64-linux-gnu",
                      "/usr/lib/aarch64-linux-gnu", "/lib64", "/lib"):  # fmt: skip
        source = Path(directory) / name
        if source.exists():
            target = root / directory.lstrip("/") / name
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(source.resolve(), target)
            return
    pytest.fail(f"glibc library {name} not found on this machine")


def _interpreter(executable: Path) -> str:
    headers = subprocess.run(
        [shutil.which("readelf") or "readelf", "-l", "-W", str(executable)], capture_output=True, text=True, check=True
    )
    return headers.stdout.split("[Requesting program interpreter: ", 1)[1].split("]", 1)[0]


def _device(path: Path, major: int, minor: int) -> None:
    os.mknod(path, 0o666 | stat.S_IFCHR, os.makedev(major, minor))
    path.chmod(0o666)


def _install_read_only(tree: Path) -> None:
    for path in [tree, *tree.rglob("*")]:
        if not path.is_symlink():
            os.chown(path, 0, 0)
            path.chmod(path.stat().st_mode & 0o555)


def build_root(root: Path, frozen: Path, ca_cert: Path) -> None:
    """Assemble the sidecar's root directory: the build, glibc, users, the CA bundle, two devices and /tmp."""
    shutil.copytree(frozen, root / "opt/ocivendir", symlinks=True)
    _install_read_only(root / "opt/ocivendir")
    (root / "vendir").symlink_to("/opt/ocivendir/ocivendir")
    for name in elfcheck.check(frozen).system_libraries - {Path(_interpreter(frozen / "ocivendir")).name}:
        _copy_system_library(root, name)
    interpreter = root / _interpreter(frozen / "ocivendir").lstrip("/")
    interpreter.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy(Path(_interpreter(frozen / "ocivendir")).resolve(), interpreter)
    (root / "etc").mkdir(exist_ok=True)
    (root / "etc/passwd").write_text("root:x:0:0:root:/root:/bin/bash\n"
                                     "kapp-controller:x:1000:0:/home/kapp-controller:/usr/sbin/nologin\n")  # fmt: skip
    (root / "etc/group").write_text("root:x:0:\n")
    (root / CA_BUNDLE).parent.mkdir(parents=True)
    shutil.copy(ca_cert, root / CA_BUNDLE)
    (root / "dev").mkdir()
    _device(root / "dev/null", 1, 3)
    _device(root / "dev/urandom", 1, 9)
    for directory, mode in (("tmp", 0o1777), (MEM_TMP, 0o777), ("home/kapp-controller", 0o755)):
        (root / directory).mkdir(parents=True)
        (root / directory).chmod(mode)
    os.chown(root / "home/kapp-controller", 1000, 0)


def _config(bundle: str, image: str) -> str:
    return (f"apiVersion: vendir.k14s.io/v1alpha1\ndirectories:\n- contents:\n  - imgpkgBundle:\n      image: {bundle}\n"
            f'      secretRef:\n        name: my-pkgi-fetch-0\n    path: .\n  path: "0"\n- contents:\n  - image:\n'
            f'      url: {image}\n    path: .\n  path: "1"\nkind: Config\nminimumRequiredVersion: ""\n')  # fmt: skip


def _config_image(image: str) -> str:
    return (f"apiVersion: vendir.k14s.io/v1alpha1\ndirectories:\n- contents:\n  - image:\n      url: {image}\n"
            '    path: .\n  path: "0"\nkind: Config\nminimumRequiredVersion: ""\n')  # fmt: skip


def _lock(bundle: str, image: str) -> str:
    return (f"apiVersion: vendir.k14s.io/v1alpha1\ndirectories:\n- contents:\n  - imgpkgBundle:\n      image: {bundle}\n"
            f'    path: .\n  path: "0"\n- contents:\n  - image:\n      url: {image}\n    path: .\n  path: "1"\n'
            "kind: LockConfig\n")  # fmt: skip


class Sidecar:
    """Runs `/vendir sync -f - --lock-file /dev/null` in the root, as the sidecar does, in a fresh fetch directory."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.runs = 0

    def _enter(self, cwd: str, uid: int) -> Callable[[], None]:
        def enter() -> None:
            os.chroot(self.root)
            os.chdir(cwd)
            os.setgroups([])
            os.setgid(0)
            os.setuid(uid)

        return enter

    def sync(self, stdin: str, *, cache: str | None, uid: int = 1000, home: str | None = "/home/kapp-controller",
             env: dict[str, str] | None = None) -> tuple[
            subprocess.CompletedProcess[str], Path]:  # fmt: skip
        self.runs += 1
        cwd = f"/{MEM_TMP}/kapp-controller-fetch-template-deploy{self.runs}"
        (self.root / cwd.lstrip("/")).mkdir()
        os.chown(self.root / cwd.lstrip("/"), uid, 0)
        extra_env = env
        env = {"PATH": "/", "IMGPKG_ACTIVE_KEYCHAINS": "gke,aks,ecr"}
        env |= {"HOME": home} if home else {}
        env |= {"VENDIR_CACHE_DIR": f"/{MEM_TMP}/{cache}"} if cache else {}
        env |= extra_env or {}
        done = subprocess.run(["/vendir", "sync", "-f", "-", "--lock-file", "/dev/null"], input=stdin, env=env,
                              capture_output=True, text=True, preexec_fn=self._enter(cwd, uid), check=False,
                              timeout=120)  # fmt: skip
        return done, self.root / cwd.lstrip("/")


def _snapshot(root: Path, skip: tuple[str, ...]) -> dict[str, tuple[int, int, int]]:
    """Every path outside `skip` with its mode, size and mtime: what a run may not change."""
    seen = {}
    for path in root.rglob("*"):
        relative = str(path.relative_to(root))
        if not relative.startswith(skip):
            info = path.lstat()
            seen[relative] = (info.st_mode, info.st_size, info.st_mtime_ns)
    return seen


@pytest.fixture
def tls_registry_own(tmp_path_factory: pytest.TempPathFactory) -> Iterator[registry_support.Registry]:
    if registry_support.binary() is None:
        pytest.fail("docker-registry is needed") if os.environ.get("CI") else pytest.skip("no docker-registry")
    running = registry_support.Registry(mode="tls", workdir=tmp_path_factory.mktemp("sidecar-registry")).start()
    try:
        yield running
    finally:
        running.stop()


def test_the_build_syncs_in_a_glibc_only_root_as_uid_1000_cold_warm_and_with_the_registry_stopped(
    frozen: Path, tls_registry_own: registry_support.Registry, root: Path
) -> None:
    _require_root()
    registry = tls_registry_own
    assert registry.ca_cert is not None
    pusher = Pusher(registry)
    published = publish_bundle(pusher, "sc", images=1)
    relocate(pusher, published, "sc/relocated")
    bundle = published.ref(registry, "sc/relocated")
    image = pusher.image("sc/app", make_image({"app.yml": "app: 1\n"}))
    stdin, expected = PLACEHOLDER + _config(bundle, image), _lock(bundle, image)
    build_root(root, frozen, registry.ca_cert)
    sidecar = Sidecar(root)
    untouched = _snapshot(root, (MEM_TMP, "tmp"))

    mark = registry.mark()
    done, cwd = sidecar.sync(stdin, cache="cache-a/apps/uid-1")
    assert (done.returncode, done.stderr, done.stdout) == (0, "", expected)
    assert len(registry.since(mark)) > 0
    assert (cwd / "1/app.yml").read_text() == "app: 1\n"
    assert "sc/relocated@" in (cwd / "0/.imgpkg/images.yml").read_text()

    mark = registry.mark()
    done, cwd = sidecar.sync(stdin, cache="cache-a/apps/uid-1")
    assert (done.returncode, done.stderr, done.stdout) == (0, "", expected)
    assert registry.since(mark) == []  # warm: no request at all

    done, cwd = sidecar.sync(stdin, cache="cache-b/apps/uid-1", uid=OPENSHIFT_UID)  # HOME not writable for it
    assert (done.returncode, done.stderr, done.stdout) == (0, "", expected)

    mark = registry.mark()
    done, cwd = sidecar.sync(stdin, cache=None, uid=OPENSHIFT_UID, home=None)  # env -i: no HOME, no passwd entry
    assert (done.returncode, done.stderr, done.stdout) == (0, "", expected)  # the documented fallback: no cache
    assert len(registry.since(mark)) > 0
    assert (cwd / "1/app.yml").read_text() == "app: 1\n"

    (root / CA_BUNDLE).unlink()
    done, _ = sidecar.sync(stdin, cache="cache-c/apps/uid-1")
    assert done.returncode == 1
    assert "x509: certificate signed by unknown authority" in done.stderr
    assert "Traceback" not in done.stderr
    shutil.copy(registry.ca_cert, root / CA_BUNDLE)

    registry.stop()
    done, cwd = sidecar.sync(stdin, cache="cache-a/apps/uid-1")
    assert (done.returncode, done.stderr, done.stdout) == (0, "", expected)
    assert (cwd / "1/app.yml").read_text() == "app: 1\n"

    after = _snapshot(root, (MEM_TMP, "tmp"))
    for changed_by_the_test in (CA_BUNDLE, str(Path(CA_BUNDLE).parent)):
        untouched[changed_by_the_test] = after[changed_by_the_test]
    assert after == untouched  # nothing written outside the fetch dirs, caches and /tmp
    assert list((root / "home/kapp-controller").iterdir()) == []


@pytest.fixture
def connect_proxy() -> Iterator[ConnectProxy]:
    with serving(ConnectProxy()) as proxy:
        yield proxy


def test_the_build_reaches_the_registry_through_https_proxy_and_honours_no_proxy(
    frozen: Path, tls_registry: registry_support.Registry, connect_proxy: ConnectProxy, root: Path
) -> None:
    _require_root()
    assert tls_registry.ca_cert is not None
    digest_ref = Pusher(tls_registry).image("sc/proxied", make_image({"p.yml": "proxied: true\n"}))
    named = digest_ref.replace("127.0.0.1:", "registry.test:", 1)  # unresolvable in the root: only the proxy knows it
    stdin = PLACEHOLDER + _config_image(named)
    build_root(root, frozen, tls_registry.ca_cert)
    sidecar = Sidecar(root)
    proxy = f"127.0.0.1:{connect_proxy.server_address[1]}"  # no scheme, as kapp-controller's config allows

    done, cwd = sidecar.sync(stdin, cache="cache-p", env={"HTTPS_PROXY": proxy})
    assert (done.returncode, done.stderr) == (0, "")
    assert (cwd / "0/p.yml").read_text() == "proxied: true\n"
    port = named.split("/", 1)[0].split(":")[1]
    assert set(connect_proxy.connects) == {f"registry.test:{port}"}

    seen = len(connect_proxy.connects)
    done, _ = sidecar.sync(stdin, cache="cache-q", env={"https_proxy": f"http://{proxy}", "no_proxy": ".test"})
    assert done.returncode == 1
    assert "Traceback" not in done.stderr
    assert len(connect_proxy.connects) == seen
