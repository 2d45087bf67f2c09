"""The system trust store reaches real TLS connections: Go's SSL_CERT_DIR semantics, and no trust without a root."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import run_cli
from tests.support.builders import Pusher, make_image
from tests.support.registry import Registry

pytestmark = pytest.mark.integration


def _pull(ref: str, out: Path) -> tuple[int, str]:
    done = run_cli("pull", "-i", ref, "-o", str(out), "--json")
    return done.exit_code, done.stderr + done.stdout


def test_ssl_cert_dir_trusts_every_file_of_the_directory_without_hashed_names(
    tls_registry: Registry, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ref = Pusher(tls_registry).image("ts/dir", make_image({"d.txt": "dir"}))
    assert tls_registry.ca_cert is not None
    certs = tmp_path / "certs"
    certs.mkdir()
    (certs / "ca-bundle.crt").write_bytes(
        tls_registry.ca_cert.read_bytes()
    )  # no c_rehash link: OpenSSL's capath misses it
    monkeypatch.setenv("SSL_CERT_FILE", str(tmp_path / "absent.pem"))
    monkeypatch.setenv("SSL_CERT_DIR", f"{tmp_path / 'nodir'}:{certs}")
    code, text = _pull(ref, tmp_path / "out")
    assert code == 0, text
    assert (tmp_path / "out/d.txt").read_text() == "dir"


def test_an_unusable_bundle_refuses_the_registry_with_the_x509_message(
    tls_registry: Registry, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ref = Pusher(tls_registry).image("ts/none", make_image({"n.txt": "none"}))
    (tmp_path / "bundle.crt").mkdir()
    monkeypatch.setenv("SSL_CERT_FILE", str(tmp_path / "bundle.crt"))
    monkeypatch.setenv("SSL_CERT_DIR", str(tmp_path / "empty"))
    code, text = _pull(ref, tmp_path / "out")
    assert code == 1
    assert "x509: certificate signed by unknown authority" in text
    assert "Traceback" not in text
    assert not (tmp_path / "out").exists()
