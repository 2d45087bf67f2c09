"""registry/tlscontexts.py: a TLS context is made again unless every file it was made from is unchanged and settled.

A reused worker keeps its contexts between calls; a call must get what it would have made itself: the same roots, the
same certificates, the same warning. Files here are real; "settled" is moved (SETTLED_NS) rather than waited for.
"""

from __future__ import annotations

import logging
import ssl
from pathlib import Path

import pytest

from ocivendir.registry import tlscontexts
from ocivendir.registry.mirrors import TLSFiles
from ocivendir.registry.tlscontexts import MAX_KEPT, Made
from ocivendir.registry.transport import ClientOptions, _ssl_context
from tests.unit.test_truststore import _make_ca


@pytest.fixture(scope="module")
def cas(tmp_path_factory: pytest.TempPathFactory) -> list[bytes]:
    directory = tmp_path_factory.mktemp("cas")
    return [_make_ca(directory, f"ca{i}") for i in range(3)]


@pytest.fixture
def settled_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """Files written by the test count as settled (their ctime is not two seconds old yet)."""
    monkeypatch.setattr(tlscontexts, "SETTLED_NS", 0)


@pytest.fixture
def store(tmp_path: Path, cas: list[bytes]) -> ClientOptions:
    """A trust store of its own: a bundle file and a directory with one more root."""
    (tmp_path / "bundle.pem").write_bytes(cas[0])
    (tmp_path / "certs").mkdir()
    (tmp_path / "certs" / "one.pem").write_bytes(cas[1])
    return ClientOptions(ssl_cert_file=str(tmp_path / "bundle.pem"), ssl_cert_dir=str(tmp_path / "certs"))


def roots(context: ssl.SSLContext) -> int:
    return int(context.cert_store_stats()["x509_ca"])


@pytest.mark.usefixtures("settled_at_once")
def test_the_same_trust_from_unchanged_files_is_the_same_context(store: ClientOptions) -> None:
    first = _ssl_context(store, verify=True)
    assert roots(first) == 2
    assert _ssl_context(store, verify=True) is first
    assert _ssl_context(store, verify=False) is not first  # another key: verification off


@pytest.mark.usefixtures("settled_at_once")
@pytest.mark.parametrize("change", ["rewritten", "replaced", "added", "removed", "chmod"])
def test_a_changed_file_or_directory_makes_a_new_context(
    store: ClientOptions, tmp_path: Path, cas: list[bytes], change: str
) -> None:
    first = _ssl_context(store, verify=True)
    if change == "rewritten":
        (tmp_path / "bundle.pem").write_bytes(cas[0] + cas[2])
    elif change == "replaced":
        (tmp_path / "new.pem").write_bytes(cas[2])
        (tmp_path / "new.pem").replace(tmp_path / "bundle.pem")
    elif change == "added":
        (tmp_path / "certs" / "two.pem").write_bytes(cas[2])
    elif change == "removed":
        (tmp_path / "certs" / "one.pem").unlink()
    else:
        (tmp_path / "certs" / "one.pem").chmod(0o600)
    again = _ssl_context(store, verify=True)
    assert again is not first
    assert roots(again) == {"rewritten": 3, "replaced": 2, "added": 3, "removed": 1, "chmod": 2}[change]


def test_a_context_made_from_files_not_settled_is_not_kept(store: ClientOptions) -> None:
    """The files were written just now: a change within the same clock tick could keep every field of their identity."""
    assert _ssl_context(store, verify=True) is not _ssl_context(store, verify=True)


@pytest.mark.usefixtures("settled_at_once")
def test_named_ca_and_client_certificate_files_are_part_of_what_is_checked(
    store: ClientOptions, tmp_path: Path, cas: list[bytes]
) -> None:
    ca = tmp_path / "extra.pem"
    ca.write_bytes(cas[2])
    options = ClientOptions(ssl_cert_file=store.ssl_cert_file, ssl_cert_dir=store.ssl_cert_dir, ca_files=(str(ca),))
    first = _ssl_context(options, verify=True)
    assert roots(first) == 3
    assert _ssl_context(options, verify=True) is first
    ca.write_bytes(cas[2] + b"\n")
    assert _ssl_context(options, verify=True) is not first

    key, cert = tmp_path / "ca0.key", tmp_path / "ca0.crt"
    _make_ca(tmp_path, "ca0")
    files = TLSFiles(cert_file=str(cert), key_file=str(key))
    client = _ssl_context(store, verify=True, tls=files)
    assert _ssl_context(store, verify=True, tls=files) is client
    key.write_bytes(key.read_bytes() + b"\n")
    assert _ssl_context(store, verify=True, tls=files) is not client


@pytest.mark.usefixtures("settled_at_once")
def test_a_file_that_cannot_be_loaded_is_an_error_every_time_and_nothing_is_kept(
    store: ClientOptions, tmp_path: Path
) -> None:
    options = ClientOptions(ssl_cert_file=store.ssl_cert_file, ca_files=(str(tmp_path / "missing.pem"),))
    for _ in range(2):
        with pytest.raises(Exception, match="Loading CA certificate"):
            _ssl_context(options, verify=True)


@pytest.mark.usefixtures("settled_at_once")
def test_go_s_no_roots_warning_is_given_to_every_call_that_uses_the_context(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    unreadable = tmp_path / "dir-as-file"
    unreadable.mkdir()
    options = ClientOptions(ssl_cert_file=str(unreadable), ssl_cert_dir=str(tmp_path / "none"))
    with caplog.at_level(logging.WARNING):
        first = _ssl_context(options, verify=True)
        assert _ssl_context(options, verify=True) is first
    warnings = [r.getMessage() for r in caplog.records if "failed to load system roots" in r.getMessage()]
    assert len(warnings) == 2


def test_at_most_max_kept_contexts_are_kept_the_least_recently_used_goes() -> None:
    made: list[int] = []

    def make(number: int) -> Made:
        made.append(number)
        return Made(ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT), ())

    contexts = [tlscontexts.kept(number, lambda n=number: make(n)) for number in range(MAX_KEPT)]
    assert tlscontexts.kept(0, lambda: make(-1)) is contexts[0]  # 0 is now the most recently used
    tlscontexts.kept(MAX_KEPT, lambda: make(MAX_KEPT))  # pushes out 1, the least recently used
    assert tlscontexts.kept(0, lambda: make(-1)) is contexts[0]
    assert tlscontexts.kept(1, lambda: make(1)) is not contexts[1]
    assert made == [*range(MAX_KEPT), MAX_KEPT, 1]
