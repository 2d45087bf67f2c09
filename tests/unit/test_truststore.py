"""registry/truststore.py: Go's crypto/x509 rules for finding and reading the system roots."""

from __future__ import annotations

import logging
import ssl
import subprocess
from pathlib import Path

import pytest

from ocivendir.registry import truststore
from ocivendir.registry.truststore import load_into, read_trust_store


def _make_ca(directory: Path, name: str) -> bytes:
    key, crt = directory / f"{name}.key", directory / f"{name}.crt"
    argv = ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out", str(crt),
            "-days", "2", "-subj", f"/CN={name}"]  # fmt: skip
    subprocess.run(argv, check=True, capture_output=True)
    return crt.read_bytes()


@pytest.fixture(scope="module")
def cas(tmp_path_factory: pytest.TempPathFactory) -> list[bytes]:
    directory = tmp_path_factory.mktemp("cas")
    return [_make_ca(directory, f"ca{i}") for i in range(4)]


def _stats(**kwargs: object) -> int:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    load_into(context, **kwargs)  # type: ignore[arg-type]
    return int(context.cert_store_stats()["x509_ca"])


def test_go_lists_name_photon_debian_rhel_alpine_and_suse_locations() -> None:
    assert "/etc/pki/tls/certs/ca-bundle.crt" in truststore.GO_CERT_FILES  # photon, where kapp-controller appends
    assert truststore.GO_CERT_FILES[0] == "/etc/ssl/certs/ca-certificates.crt"  # Debian first, as Go
    assert "/etc/ssl/cert.pem" in truststore.GO_CERT_FILES  # Alpine
    assert "/etc/ssl/ca-bundle.pem" in truststore.GO_CERT_FILES  # SUSE
    assert "/etc/pki/ca-trust/extracted/pem/tls-ca-bundle.pem" in truststore.GO_CERT_FILES  # RHEL 7+
    assert truststore.GO_CERT_DIRS == ("/etc/ssl/certs", "/etc/pki/tls/certs")


def test_only_the_first_readable_file_of_the_list_counts(tmp_path: Path, cas: list[bytes]) -> None:
    (tmp_path / "second.pem").write_bytes(cas[0])
    (tmp_path / "third.pem").write_bytes(cas[1])
    files = tuple(str(tmp_path / name) for name in ("missing.pem", "second.pem", "third.pem"))
    store = read_trust_store(default_files=files, default_dirs=())
    assert store.certificates == (cas[0].strip(),)
    assert store.sources == (tmp_path / "second.pem",)
    assert store.first_error is None


def test_ssl_cert_file_replaces_the_list_and_ssl_cert_dir_replaces_the_directories(
    tmp_path: Path, cas: list[bytes]
) -> None:
    (tmp_path / "listed.pem").write_bytes(cas[0])
    (tmp_path / "env.pem").write_bytes(cas[1])
    for name, data in (("d1", cas[2]), ("d2", cas[3])):
        (tmp_path / name).mkdir()
        (tmp_path / name / "any-name.crt").write_bytes(data)
    store = read_trust_store(str(tmp_path / "env.pem"), f"{tmp_path / 'd1'}:{tmp_path / 'd2'}",
                             default_files=(str(tmp_path / "listed.pem"),), default_dirs=(str(tmp_path / "d1"),))  # fmt: skip
    assert store.certificates == (cas[1].strip(), cas[2].strip(), cas[3].strip())


def test_directories_read_every_file_skip_same_directory_links_headers_and_duplicates(
    tmp_path: Path, cas: list[bytes]
) -> None:
    certs, elsewhere = tmp_path / "certs", tmp_path / "share"
    certs.mkdir()
    elsewhere.mkdir()
    (certs / "bundle.crt").write_bytes(cas[0] + b"# comment\n" + cas[1])
    (certs / "dup.pem").write_bytes(cas[0])
    (certs / "abcd1234.0").symlink_to("dup.pem")  # c_rehash link: skipped, like Go
    (elsewhere / "three.pem").write_bytes(cas[2])
    (certs / "three.pem").symlink_to(elsewhere / "three.pem")  # points outside: read
    with_headers = cas[3].replace(b"-----\n", b"-----\nProc-Type: 4,ENCRYPTED\n\n", 1)
    (certs / "headers.pem").write_bytes(with_headers)  # Go skips blocks with headers
    (certs / "README").write_text("not a certificate")
    (certs / "subdir").mkdir()
    store = read_trust_store(default_files=(), default_dirs=(str(certs),))
    assert store.certificates == (cas[0].strip(), cas[1].strip(), cas[2].strip())
    assert [p.name for p in store.sources] == ["bundle.crt", "dup.pem", "three.pem"]
    assert store.first_error is None
    assert _stats(default_files=(), default_dirs=(str(certs),)) == 3


def test_nothing_anywhere_is_an_empty_pool_not_an_error(tmp_path: Path) -> None:
    store = read_trust_store(default_files=(str(tmp_path / "none.pem"),), default_dirs=(str(tmp_path / "nodir"),))
    assert store.certificates == ()
    assert not store.failed


def test_an_unreadable_bundle_with_no_other_roots_fails_as_go_and_says_why(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    (tmp_path / "ca-bundle.crt").mkdir()  # unreadable as a file even for root
    files = (str(tmp_path / "ca-bundle.crt"),)
    store = read_trust_store(default_files=files, default_dirs=())
    assert store.failed
    assert store.first_error == f"read {tmp_path / 'ca-bundle.crt'}: is a directory"
    with caplog.at_level(logging.WARNING, logger="ocivendir.registry.truststore"):
        assert _stats(default_files=files, default_dirs=()) == 0
    assert caplog.messages == [
        f"x509: failed to load system roots and no roots provided; read {tmp_path / 'ca-bundle.crt'}: is a directory"
    ]


def test_an_unreadable_bundle_is_no_failure_when_a_directory_gives_roots(tmp_path: Path, cas: list[bytes]) -> None:
    (tmp_path / "bad").mkdir()
    (tmp_path / "certs").mkdir()
    (tmp_path / "certs" / "one.pem").write_bytes(cas[0])
    store = read_trust_store(default_files=(str(tmp_path / "bad"),), default_dirs=(str(tmp_path / "certs"),))
    assert store.first_error is not None
    assert not store.failed
    assert store.certificates == (cas[0].strip(),)


def test_a_corrupt_certificate_does_not_hide_the_good_ones(tmp_path: Path, cas: list[bytes]) -> None:
    corrupt = b"-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n"
    (tmp_path / "bundle.crt").write_bytes(cas[0] + corrupt + cas[1])
    assert _stats(cert_file=str(tmp_path / "bundle.crt"), default_dirs=()) == 2


def test_crlf_bundles_are_read(tmp_path: Path, cas: list[bytes]) -> None:
    (tmp_path / "bundle.crt").write_bytes(cas[0].replace(b"\n", b"\r\n"))
    assert _stats(cert_file=str(tmp_path / "bundle.crt"), default_dirs=()) == 1
