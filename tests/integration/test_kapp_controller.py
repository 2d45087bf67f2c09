"""The kapp-controller contract (kapp-controller spec §10).

`vendir sync -f - --lock-file /dev/null` through a program named `vendir`, stdin holding Secrets and the Config,
stdout exactly the lock, nothing written elsewhere.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.support.builders import Pusher, make_image, publish_bundle, relocate
from tests.support.kapp import placeholder_secret
from tests.support.registry import PASSWORD, USERNAME, Registry

ROOT = Path(__file__).resolve().parents[2]
PLACEHOLDER = placeholder_secret()


def config(kind: str, ref: str, secret: str | None = "my-pkgi-fetch-0", extra: str = "") -> str:  # noqa: S107
    key = "image" if kind == "imgpkgBundle" else "url"
    secret_ref = f"\n      secretRef:\n        name: {secret}" if secret else ""
    return (
        f"apiVersion: vendir.k14s.io/v1alpha1\ndirectories:\n- contents:\n  - {kind}:\n      {key}: {ref}{secret_ref}\n"
        f'{extra}    path: .\n  path: "0"\nkind: Config\nminimumRequiredVersion: ""\n'
    )


def lock(kind: str, ref: str, tag: str | None = None) -> str:
    key = "image" if kind == "imgpkgBundle" else "url"
    fields = sorted([f"      {key}: {ref}\n", *([f"      tag: {tag}\n"] if tag else [])])
    return (
        f"apiVersion: vendir.k14s.io/v1alpha1\ndirectories:\n- contents:\n  - {kind}:\n{''.join(fields)}    path: .\n"
        '  path: "0"\nkind: LockConfig\n'
    )


@pytest.fixture(scope="session")
def vendir_binary(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Ocivendir's console script reached through a symlink named `vendir`, as in the sidecar."""
    script = shutil.which("ocivendir") or str(Path(sys.executable).parent / "ocivendir")
    link = tmp_path_factory.mktemp("bin") / "vendir"
    link.symlink_to(script)
    return link


class Controller:
    """Runs `vendir sync -f - --lock-file /dev/null` as kapp-controller does: fresh cwd, VENDIR_CACHE_DIR."""

    def __init__(self, binary: Path, base: Path) -> None:
        self.binary = binary
        self.base = base
        self.cache = base / "cache" / "apps" / "uid-1"
        self.home = base / "home"
        self.home.mkdir(parents=True, exist_ok=True)
        self.runs = 0

    def env(self, **extra: str) -> dict[str, str]:
        keep = {k: v for k, v in os.environ.items()
                if not k.startswith(("OCIVENDIR_", "VENDIR_", "IMGPKG_")) or k.startswith("OCIVENDIR_SERVER")}  # fmt: skip
        return {**keep, "HOME": str(self.home), "VENDIR_CACHE_DIR": str(self.cache), **extra}

    def fetch(self, stdin: str, **env: str) -> tuple[subprocess.CompletedProcess[str], Path]:
        self.runs += 1
        cwd = self.base / f"kapp-controller-fetch-template-deploy{self.runs}"
        cwd.mkdir()
        done = subprocess.run([str(self.binary), "sync", "-f", "-", "--lock-file", "/dev/null"], input=stdin,
                              capture_output=True, text=True, cwd=cwd, env=self.env(**env), check=False, timeout=120)  # fmt: skip
        return done, cwd


@pytest.fixture
def controller(vendir_binary: Path, tmp_path: Path) -> Controller:
    return Controller(vendir_binary, tmp_path)


def test_original_and_relocated_bundles_give_exactly_the_lock_and_nothing_else(
    registry: Registry, pusher: Pusher, repo_prefix: str, controller: Controller
) -> None:
    published = publish_bundle(pusher, repo_prefix, images=1)
    relocate(pusher, published, f"{repo_prefix}/relocated")
    for repo, rewritten in ((published.bundle_repo, False), (f"{repo_prefix}/relocated", True)):
        ref = published.ref(registry, repo)
        done, cwd = controller.fetch(PLACEHOLDER + config("imgpkgBundle", ref))
        assert done.returncode == 0, done.stderr
        assert done.stdout == lock("imgpkgBundle", ref)
        assert done.stderr == ""
        images_yml = (cwd / "0/.imgpkg/images.yml").read_text()
        assert (f"{repo_prefix}/relocated@" in images_yml) is rewritten
        assert sorted(p.name for p in cwd.iterdir()) == ["0"]
    assert list(controller.home.iterdir()) == []
    assert sorted(p.name for p in controller.base.iterdir()) == ["cache", "home", "kapp-controller-fetch-template-deploy1",
                                                                 "kapp-controller-fetch-template-deploy2"]  # fmt: skip


def test_digest_pinned_content_survives_the_registry_going_away_and_a_tag_does_not(
    own_registry: Registry, controller: Controller
) -> None:
    pusher = Pusher(own_registry)
    image_ref = pusher.image("kc/img", make_image({"app.yml": "a"}), tag="v1")
    plain = publish_bundle(pusher, "kc", images=1)
    relocate(pusher, plain, "kc/relocated")
    streams = {
        "image": PLACEHOLDER + config("image", image_ref),
        "relocated": PLACEHOLDER + config("imgpkgBundle", plain.ref(own_registry, "kc/relocated")),
        "original": PLACEHOLDER + config("imgpkgBundle", plain.ref(own_registry)),
        "tag": PLACEHOLDER + config("image", f"{own_registry.host}/kc/img:v1"),
    }
    for stream in streams.values():
        assert controller.fetch(stream)[0].returncode == 0
    own_registry.stop()
    for name in ("image", "relocated", "original"):
        done, _ = controller.fetch(streams[name])
        assert done.returncode == 0, (name, done.stderr)
        assert done.stderr == ""
    done, _ = controller.fetch(streams["original"], OCIVENDIR_RELOCATION_RECHECK="0")
    assert done.returncode == 0
    assert done.stderr.count("\n") == 1
    assert done.stderr.startswith("vendir: Warning: could not re-check relocation")
    done, cwd = controller.fetch(streams["tag"])
    assert done.returncode == 1
    assert done.stderr.startswith("vendir: Error: Syncing directory '0':")
    assert done.stdout == ""
    assert list(cwd.iterdir()) == []


def _age_verdicts(cache: Path, seconds: float) -> int:
    """Move every recorded relocation verdict `seconds` into the past (as if that much time had gone by).

    The rows are edited behind ocivendir's back, so the read memo that holds copies of them goes too.
    """
    import sqlite3  # noqa: PLC0415

    shutil.rmtree(cache / "memo", ignore_errors=True)
    with contextlib.closing(sqlite3.connect(cache / "index.db")) as db, db:
        return db.execute("UPDATE verdicts SET checked_at = checked_at - ?", (seconds,)).rowcount


def test_a_bundle_relocated_later_is_rewritten_at_the_first_reconcile_after_the_recheck_period(
    registry: Registry, pusher: Pusher, repo_prefix: str, controller: Controller
) -> None:
    published = publish_bundle(pusher, repo_prefix, images=2)
    ref = published.ref(registry)
    stream = PLACEHOLDER + config("imgpkgBundle", ref)
    sidecar = {"OCIVENDIR_RELOCATION_RECHECK": "10m"}
    done, cwd = controller.fetch(stream, **sidecar)
    assert done.returncode == 0, done.stderr
    original = (cwd / "0/.imgpkg/images.yml").read_bytes()
    assert published.bundle_repo.encode() + b"@" not in original

    for source_ref, image in published.images.items():  # the images are copied into the bundle's own repository
        pusher.copy_image(published.image_repos[source_ref], image, published.bundle_repo)
    mark = registry.mark()
    done, cwd = controller.fetch(stream, **sidecar)  # within the period: the negative verdict is trusted
    assert (done.returncode, done.stdout) == (0, lock("imgpkgBundle", ref))
    assert (cwd / "0/.imgpkg/images.yml").read_bytes() == original
    assert registry.since(mark) == []

    assert _age_verdicts(controller.cache, 10 * 60 + 1) == 1
    mark = registry.mark()
    done, cwd = controller.fetch(stream, **sidecar)  # the first reconcile after the period re-checks and rewrites
    assert (done.returncode, done.stdout, done.stderr) == (0, lock("imgpkgBundle", ref), "")
    assert f"{published.bundle_repo}@".encode() in (cwd / "0/.imgpkg/images.yml").read_bytes()
    checks = registry.since(mark)
    assert [method for method, _, _ in checks] == ["HEAD"] * 3  # the locations tag, then one HEAD per image

    mark = registry.mark()
    done, cwd = controller.fetch(stream, **sidecar)  # a positive verdict is kept: no request, still rewritten
    assert f"{published.bundle_repo}@".encode() in (cwd / "0/.imgpkg/images.yml").read_bytes()
    assert registry.since(mark) == []


@pytest.mark.parametrize(
    ("secret", "message"),
    [
        ("apiVersion: v1\nkind: Secret\nmetadata: {name: s}\ndata: {ca.crt: eA==}\n---\n",
         "Unknown secret field 'ca.crt' in secret 's'"),
        ("apiVersion: v1\nkind: Secret\nmetadata: {name: s}\ntype: kubernetes.io/dockerconfigjson\ndata:\n"
         f"  .dockerconfigjson: {base64.b64encode(json.dumps({'auths': {'r.io': {'auth': 'bm9jb2xvbg=='}}}).encode()).decode()}\n---\n",
         "Expected auth field to have 'username:password' format, but did not"),
        ("", "Expected to find one secret 's', but found none"),
    ],
)  # fmt: skip
def test_secret_problems_give_vendirs_messages_and_exit_1(controller: Controller, secret: str, message: str) -> None:
    done, _ = controller.fetch(secret + config("image", "127.0.0.1:1/some/img@sha256:" + "a" * 64, secret="s"))
    assert done.returncode == 1
    assert done.stderr.startswith("vendir: Error: Syncing directory '0':\n  Syncing directory '.' with image contents:")
    assert message in done.stderr


def test_credentials_from_dockerconfigjson_and_plain_secrets(auth_registry: Registry, controller: Controller) -> None:
    ref = Pusher(auth_registry).image("kc/private", make_image({"p.txt": "private"}))
    auths = {"auths": {auth_registry.host: {"username": USERNAME, "password": PASSWORD}}}
    docker = base64.b64encode(json.dumps(auths).encode()).decode()
    dockerconfig = (f"apiVersion: v1\nkind: Secret\nmetadata: {{name: s}}\ntype: kubernetes.io/dockerconfigjson\n"
                    f"data: {{.dockerconfigjson: {docker}}}\n---\n")  # fmt: skip
    done, cwd = controller.fetch(dockerconfig + config("image", ref, secret="s"))
    assert done.returncode == 0, done.stderr
    assert (cwd / "0/p.txt").read_text() == "private"
    plain = (f"apiVersion: v1\nkind: Secret\nmetadata: {{name: s}}\ndata:\n"
             f"  username: {base64.b64encode(USERNAME.encode()).decode()}\n"
             f"  password: {base64.b64encode(b'not-the-password').decode()}\n---\n")  # fmt: skip
    other = Pusher(auth_registry).image("kc/private2", make_image({"q.txt": "q"}))
    done, _ = controller.fetch(plain + config("image", other, secret="s"))
    assert done.returncode == 1
    assert auth_registry.host in done.stderr
    assert "not-the-password" not in done.stderr


def test_a_private_ca_needs_ssl_cert_file_and_keychains_change_nothing(
    tls_registry: Registry, controller: Controller, tmp_path: Path
) -> None:
    ref = Pusher(tls_registry).image("kc/tls", make_image({"t.txt": "tls"}))
    done, _ = controller.fetch(config("image", ref, secret=None))
    assert done.returncode == 1
    assert "x509: certificate signed by unknown authority" in done.stderr
    assert tls_registry.ca_cert is not None
    bundle = tmp_path / "bundle.pem"
    bundle.write_bytes(tls_registry.ca_cert.read_bytes())
    done, cwd = controller.fetch(config("image", ref, secret=None), SSL_CERT_FILE=str(bundle),
                                 IMGPKG_ACTIVE_KEYCHAINS="gke,aks,ecr")  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
    assert (cwd / "0/t.txt").read_text() == "tls"


def test_two_processes_sharing_a_cache_download_each_digest_once(
    registry: Registry, pusher: Pusher, repo_prefix: str, vendir_binary: Path, tmp_path: Path
) -> None:
    published = publish_bundle(pusher, repo_prefix, images=1, files={"big.bin": "z" * 1_000_000})
    stream = config("imgpkgBundle", published.ref(registry), secret=None)
    controllers = [Controller(vendir_binary, tmp_path / f"c{n}") for n in range(2)]
    controllers[1].cache = controllers[0].cache
    mark = registry.mark()
    processes = []
    for number, each in enumerate(controllers):
        cwd = each.base / "fetch"
        cwd.mkdir(parents=True)
        processes.append((subprocess.Popen([str(vendir_binary), "sync", "-f", "-", "--lock-file", "/dev/null"],
                                           stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                           text=True, cwd=cwd, env=each.env()), cwd))  # fmt: skip
        del number
    for process, _ in processes:
        _, err = process.communicate(stream, timeout=120)
        assert process.returncode == 0, err
    gets = [p for m, p, _ in registry.since(mark) if m == "GET"]
    assert len(gets) == len(set(gets))
    trees = [sorted(str(p.relative_to(cwd)) for p in cwd.rglob("*")) for _, cwd in processes]
    assert trees[0] == trees[1]
    assert "0/big.bin" in trees[0]


def test_a_kill_at_any_moment_leaves_the_old_tree_or_the_new_one(
    registry: Registry, pusher: Pusher, repo_prefix: str, tmp_path: Path
) -> None:
    old = pusher.image(f"{repo_prefix}/img", make_image({"version.txt": "old", "pad.bin": "p" * 3_000_000}))
    new = pusher.image(f"{repo_prefix}/img", make_image({"version.txt": "new", "pad.bin": "q" * 3_000_000}))
    work = tmp_path / "work"
    work.mkdir()
    env = {**os.environ, "PYTHONPATH": str(ROOT / "cli"), "OCIVENDIR_CACHE_DIR": str(tmp_path / "cache")}

    def run(ref: str) -> subprocess.Popen[bytes]:
        stream = config("image", ref, secret=None).replace('path: "0"', "path: vendor")
        process = subprocess.Popen([sys.executable, "-m", "ocivendir", "sync", "-f", "-", "--lock-file", "/dev/null"],
                                   stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                   cwd=work, env=env)  # fmt: skip
        assert process.stdin is not None
        process.stdin.write(stream.encode())
        process.stdin.close()
        return process

    assert run(old).wait(60) == 0
    chooser = random.Random(1234)  # noqa: S311 - reproducible kill moments
    for _ in range(12):
        process = run(new if chooser.random() < 0.5 else old)
        time.sleep(chooser.uniform(0.05, 0.6))
        process.send_signal(signal.SIGKILL)
        process.wait()
        version = work / "vendor" / "version.txt"
        leftovers = [p.name for p in work.iterdir() if p.name != "vendor"]
        if version.exists():
            assert version.read_text() in {"old", "new"}
            assert (work / "vendor/pad.bin").stat().st_size == 3_000_000
        else:
            assert any(".vendor.ocivendir-old-" in name for name in leftovers), leftovers
        assert run(new).wait(60) == 0
        assert (work / "vendor/version.txt").read_text() == "new"
        assert [p.name for p in work.iterdir()] == ["vendor"]


def test_dangerous_skip_tls_verify_skips_verification_for_that_content_only(
    tls_registry: Registry, controller: Controller
) -> None:
    ref = Pusher(tls_registry).image("kc/skip", make_image({"s.txt": "skipped"}))
    skipping = config("image", ref, secret=None).replace(
        f"      url: {ref}\n", f"      dangerousSkipTLSVerify: true\n      url: {ref}\n"
    )
    done, cwd = controller.fetch(skipping)
    assert done.returncode == 0, done.stderr
    assert (cwd / "0/s.txt").read_text() == "skipped"
    assert done.stdout == lock("image", ref)


def test_twenty_reconciles_into_fresh_directories_do_not_grow_the_cache(
    registry: Registry, pusher: Pusher, repo_prefix: str, controller: Controller
) -> None:
    published = publish_bundle(pusher, repo_prefix, images=1)
    stdin = PLACEHOLDER + config("imgpkgBundle", published.ref(registry))
    counts = []
    for _ in range(20):
        done, cwd = controller.fetch(stdin)
        assert done.returncode == 0, done.stderr
        shutil.rmtree(cwd)  # kapp-controller removes its temporary fetch directory after each reconcile
        # the index's WAL and shared-memory files live while a connection is open: a reused worker keeps one
        counts.append(sum(1 for path in controller.cache.rglob("*") if not path.name.endswith(("-wal", "-shm"))))
    assert counts[1:] == [counts[1]] * 19
    assert counts[1] == counts[0] + 1  # the first warm run leaves the repository's shard of the read memo
    assert not list((controller.cache / "locks").glob("target-*"))
