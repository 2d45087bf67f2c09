"""A tag App's warm sync (kapp-controller's steady state for a tag): one HEAD, and nothing loaded it does not use.

The HEAD goes through requests (the resident server has it loaded already); it must not read the system trust store
for a plain-HTTP registry (the scheme remembered by the cache), nor load a third-party parser for an auth challenge.
Each run is a subprocess whose audit hook sees every file opened and whose `sys.modules` shows what was imported.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.conftest import run_cli
from tests.support.builders import Pusher, make_image
from tests.support.registry import PASSWORD, USERNAME, Registry

HEAD = "apiVersion: vendir.k14s.io/v1alpha1\nkind: Config\n"
_NETWORK_STACKS = ("oras",)
# Nor the XDG dirs' library. A warm run also leaves the thread pool. What requests brings (urllib3, http.client,
# email, ssl, logging, json, ipaddress, ...) is the transport's and is not counted: the resident server preloads it.
_UNUSED = ("platformdirs",)
_HTTP_STACK = ("requests", "urllib3", "http.client", "ssl", "ocivendir.registry.pools")
_WARM_UNUSED = (*_UNUSED, "concurrent")
_PROBE = """\
import sys
opened = []
cert = sys.argv[1]
sys.addaudithook(lambda event, args: opened.append(1) if event == "open" and str(args[0]).startswith(cert) else None)
from ocivendir.commands import main
sys.argv = ["vendir", "sync", "-f", "-", "--lock-file", "/dev/null"]
try:
    main()
except SystemExit as exc:
    code = exc.code
loaded = sorted(m for m in {forbidden!r} if m in sys.modules)
sys.stderr.write(f"{{code}} opened={{len(opened)}} {{loaded}}")
"""


@pytest.fixture
def trust(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """SSL_CERT_FILE and SSL_CERT_DIR under one directory, so any read of the trust store is seen."""
    directory = tmp_path / "trust"
    (directory / "certs").mkdir(parents=True)
    (directory / "bundle.pem").write_text("")
    monkeypatch.setenv("SSL_CERT_FILE", str(directory / "bundle.pem"))
    monkeypatch.setenv("SSL_CERT_DIR", str(directory / "certs"))
    return directory


def _tag_config(ref: str) -> str:
    """A Config in the block style kapp-controller writes (go-yaml's Marshal)."""
    return HEAD + textwrap.dedent(f"""\
        directories:
        - contents:
          - image:
              url: {ref}
            path: image
          path: vendor
        """)


def _warm_probe(
    config: str, trust: Path, cache: Path, forbidden: tuple[str, ...] = _NETWORK_STACKS + _WARM_UNUSED
) -> str:
    """Sync once in-process (cold: fills the cache, remembers the scheme), then once in a probed subprocess."""
    first = run_cli("sync", "-f", "-", "--lock-file", "/dev/null", prog="vendir", stdin=config)
    assert first.exit_code == 0, first.stderr
    return _probed(config, trust, cache, forbidden)


def _probed(config: str, trust: Path, cache: Path, forbidden: tuple[str, ...] = _NETWORK_STACKS + _UNUSED) -> str:
    """A vendir-mode sync of `config` in a subprocess: its stderr, ending `<exit code> opened=<n> [<loaded>]`."""
    done = subprocess.run([sys.executable, "-c", _PROBE.format(forbidden=forbidden), str(trust)], input=config,
                          capture_output=True, text=True, check=False,
                          env={**os.environ, "VENDIR_CACHE_DIR": str(cache)})  # fmt: skip
    return done.stderr.strip()


def test_a_warm_tag_sync_is_one_head_and_reads_no_trust_store_for_a_plain_http_registry(
    registry: Registry, pusher: Pusher, repo_prefix: str, tmp_path: Path, trust: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cache = tmp_path / "cache"
    monkeypatch.setenv("VENDIR_CACHE_DIR", str(cache))
    monkeypatch.chdir(tmp_path)
    pusher.image(f"{repo_prefix}/app", make_image({"a.yml": "a"}), tag="v1")
    config = _tag_config(f"{registry.host}/{repo_prefix}/app:v1")
    mark = registry.mark()
    outcome = _warm_probe(config, trust, cache)
    assert outcome.endswith("0 opened=0 []"), outcome
    head = f"/v2/{repo_prefix}/app/manifests/v1"
    assert [r for r in registry.since(mark) if r[0] == "HEAD"] == [("HEAD", head, 200)] * 2  # the cold and warm run


def test_a_warm_digest_pinned_sync_makes_no_request_and_loads_no_http_stack(
    registry: Registry, pusher: Pusher, repo_prefix: str, tmp_path: Path, trust: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """kapp-controller's steady state for a digest: nothing to ask, so neither requests nor urllib3 is imported."""
    cache = tmp_path / "cache"
    monkeypatch.setenv("VENDIR_CACHE_DIR", str(cache))
    monkeypatch.chdir(tmp_path)
    config = _tag_config(pusher.image(f"{repo_prefix}/pinned", make_image({"p.yml": "p"})))
    mark = registry.mark()
    outcome = _warm_probe(config, trust, cache, (*_NETWORK_STACKS, *_WARM_UNUSED, *_HTTP_STACK))
    assert outcome.endswith("0 opened=0 []"), outcome
    assert len(registry.since(mark)) == 3  # the cold run's manifest, config and layer; the warm run asked nothing


def test_an_auth_challenge_loads_no_third_party_parser(
    auth_registry: Registry, repo_prefix: str, tmp_path: Path, trust: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cache = tmp_path / "cache"
    monkeypatch.setenv("VENDIR_CACHE_DIR", str(cache))
    monkeypatch.chdir(tmp_path)
    for name, value in (("HOSTNAME", auth_registry.host), ("USERNAME", USERNAME), ("PASSWORD", PASSWORD)):
        monkeypatch.setenv(f"IMGPKG_REGISTRY_{name}_0", value)
    Pusher(auth_registry).image(f"{repo_prefix}/private", make_image({"p.yml": "p"}), tag="v1")
    config = _tag_config(f"{auth_registry.host}/{repo_prefix}/private:v1")
    mark = auth_registry.mark()
    outcome = _warm_probe(config, trust, cache, _NETWORK_STACKS + _WARM_UNUSED)
    assert outcome.endswith("0 opened=0 []"), outcome
    head = f"/v2/{repo_prefix}/private/manifests/v1"
    assert auth_registry.since(mark)[-2:] == [("HEAD", head, 401), ("HEAD", head, 200)]


def test_a_refused_registry_fails_after_one_attempt_per_scheme_without_reading_the_trust_store(
    tmp_path: Path, trust: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]  # closed again: nothing listens there
    monkeypatch.chdir(tmp_path)
    config = _tag_config(f"127.0.0.1:{port}/team/app@sha256:{'ab' * 32}")
    stderr = _probed(config, trust, tmp_path / "cache", _NETWORK_STACKS + _UNUSED)  # the error's output: json
    assert stderr.endswith("1 opened=0 []"), stderr
    assert stderr.count("connect: connection refused") == 2  # https, then http (loopback): no retries


def test_a_cold_sync_from_a_plain_http_loopback_registry_reads_no_trust_store(
    registry: Registry, pusher: Pusher, repo_prefix: str, tmp_path: Path, trust: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    config = _tag_config(pusher.image(f"{repo_prefix}/cold", make_image({"c.yml": "c"})))
    mark = registry.mark()
    stderr = _probed(config, trust, tmp_path / "cache", _NETWORK_STACKS + _UNUSED)  # cold: json, the pool
    assert stderr.endswith("0 opened=0 []"), stderr  # https was asked with a bare ClientHello: no CA read
    assert [method for method, _, _ in registry.since(mark)] == ["GET", "GET", "GET"]  # manifest, config, layer
