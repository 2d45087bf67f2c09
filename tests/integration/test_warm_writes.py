"""A warm call changes nothing on disk but its target: no index transaction, no fsync, whatever it fetches.

kapp-controller syncs every App again and again; a warm call that wrote the index (a transaction, the WAL, the read
memo's generation ended for the next call) or fsynced a directory would pay for a change that did not happen. The
spies count each index transaction (`CacheIndex._commit`) and each `os.fsync` of an in-process call.
"""

from __future__ import annotations

import os
import textwrap
from pathlib import Path

import pytest

from ocivendir.cache.index import CacheIndex
from tests.conftest import run_cli
from tests.support.builders import Pusher, make_image, publish_bundle, relocate
from tests.support.kapp import placeholder_secret
from tests.support.registry import Registry


class _Spy:
    """Index transactions and fsyncs, counted."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.writes = self.fsyncs = 0
        self.transactions: list[list[str]] = []  # each transaction's statements, with their parameters
        write, fsync = CacheIndex._commit, os.fsync

        def counted_write(index: CacheIndex, items: list[tuple[str, tuple[object, ...]]], **kwargs: object) -> None:
            self.writes += 1
            self.transactions.append([f"{sql} {params}" for sql, params in items])
            write(index, items, **kwargs)  # type: ignore[arg-type]

        def counted_fsync(fd: int) -> None:
            self.fsyncs += 1
            fsync(fd)

        monkeypatch.setattr(CacheIndex, "_commit", counted_write)
        monkeypatch.setattr(os, "fsync", counted_fsync)


def _stdin(ref: str) -> str:
    """kapp-controller's stdin for a bundle App."""
    return placeholder_secret("app") + textwrap.dedent(f"""\
        apiVersion: vendir.k14s.io/v1alpha1
        directories:
        - contents:
          - imgpkgBundle:
              image: {ref}
              secretRef:
                name: app-fetch-0
            path: .
          path: "0"
        kind: Config
        """)


def _reconcile(work: Path, number: int, stdin: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """One kapp-controller fetch in a fresh directory."""
    cwd = work / f"fetch-{number}"
    cwd.mkdir()
    monkeypatch.chdir(cwd)
    done = run_cli("sync", "-f", "-", "--lock-file", "/dev/null", prog="vendir", stdin=stdin)
    assert done.exit_code == 0, done.stderr
    assert (cwd / "0" / "config" / "app.yml").read_text() == "app: demo\n"


@pytest.mark.parametrize("by", ["digest", "tag"])
def test_a_warm_bundle_sync_writes_nothing_to_the_index_and_fsyncs_nothing(
    by: str, registry: Registry, pusher: Pusher, repo_prefix: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """After a cold call and the call that fills the read memo, warm calls make no transaction and no fsync."""
    published = publish_bundle(pusher, repo_prefix, images=2)
    relocate(pusher, published, f"{repo_prefix}/relocated")
    ref = (published.ref(registry, f"{repo_prefix}/relocated") if by == "digest"
           else f"{registry.host}/{repo_prefix}/relocated:v1")  # fmt: skip
    monkeypatch.setenv("VENDIR_CACHE_DIR", str(tmp_path / "cache"))
    spy = _Spy(monkeypatch)
    _reconcile(tmp_path, 0, _stdin(ref), monkeypatch)
    assert spy.writes > 0  # the cold call records what it fetched
    _reconcile(tmp_path, 1, _stdin(ref), monkeypatch)
    spy.writes = spy.fsyncs = 0
    for number in range(2, 5):
        _reconcile(tmp_path, number, _stdin(ref), monkeypatch)
    assert (spy.writes, spy.fsyncs) == (0, 0)


def test_a_cold_call_records_a_fetched_manifests_possession_and_grant_in_one_transaction(
    registry: Registry, pusher: Pusher, repo_prefix: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    published = publish_bundle(pusher, repo_prefix, images=1)
    digest = str(published.bundle.digest)
    monkeypatch.setenv("VENDIR_CACHE_DIR", str(tmp_path / "cache"))
    spy = _Spy(monkeypatch)
    _reconcile(tmp_path, 0, _stdin(published.ref(registry)), monkeypatch)
    about = [t for t in spy.transactions if any("possession" in s and digest in s for s in t)]
    assert len(about) == 1
    assert any("INTO grants" in statement for statement in about[0])


@pytest.mark.in_process
def test_a_call_without_a_cache_locks_its_target_under_its_own_tmpdir(
    registry: Registry, pusher: Pusher, repo_prefix: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`tempfile` keeps the first temp directory a process found: a reused worker must use each caller's TMPDIR."""
    import tempfile  # noqa: PLC0415

    ref = pusher.image(f"{repo_prefix}/img", make_image({"a.txt": "a"}))
    earlier, mine = tmp_path / "earlier-caller", tmp_path / "mine"
    earlier.mkdir()
    mine.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(earlier))  # what an earlier call of this process left
    monkeypatch.setenv("TMPDIR", str(mine))
    done = run_cli("pull", "-i", ref, "-o", str(tmp_path / "out"), "--no-cache")
    assert done.exit_code == 0, done.stderr
    assert (mine / f"ocivendir-{os.getuid()}").is_dir()
    assert not (earlier / f"ocivendir-{os.getuid()}").exists()
