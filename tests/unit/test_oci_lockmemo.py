"""A bundle's images.yml is parsed and rewritten once per process: same results, keyed by all they depend on."""

from __future__ import annotations

from collections import OrderedDict

import pytest

from ocivendir.errors import ImagesLockError
from ocivendir.oci import lockmemo
from ocivendir.oci.imageslock import parse_images_lock
from ocivendir.oci.reference import parse_reference
from ocivendir.oci.relocation import rewrite

A, B = "a" * 64, "b" * 64
IMAGES = b"""apiVersion: imgpkg.carvel.dev/v1alpha1
kind: ImagesLock
images:
- image: r.io/team/img@sha256:%s
  annotations:
    kbld.carvel.dev/id: img
"""
REPO = parse_reference(f"r.io/team/bundle@sha256:{A}").repository
OTHER_REPO = parse_reference(f"r.io/team/relocated@sha256:{A}").repository


class _Counted:
    def __init__(self) -> None:
        self.parses = self.rewrites = 0


@pytest.fixture
def counted(monkeypatch: pytest.MonkeyPatch) -> _Counted:
    """Spies on the real parser and rewriter; the memos start empty."""
    counts = _Counted()

    def parse(raw: bytes) -> object:
        counts.parses += 1
        return parse_images_lock(raw)

    def counted_rewrite(lock: object, repo: object) -> bytes:
        counts.rewrites += 1
        return rewrite(lock, repo)  # type: ignore[arg-type]

    monkeypatch.setattr(lockmemo, "parse_images_lock", parse)
    monkeypatch.setattr(lockmemo, "rewrite", counted_rewrite)
    monkeypatch.setattr(lockmemo, "_parsed", OrderedDict())
    monkeypatch.setattr(lockmemo, "_rewritten", OrderedDict())
    return counts


def test_the_same_bytes_are_parsed_once_and_a_caller_cannot_alter_the_next_ones(counted: _Counted) -> None:
    first = lockmemo.images_lock(IMAGES % A.encode())
    assert first.images[0].annotations is not None
    first.images[0].annotations["kbld.carvel.dev/id"] = "changed"
    again = lockmemo.images_lock(IMAGES % A.encode())
    assert counted.parses == 1
    assert again == parse_images_lock(IMAGES % A.encode())


def test_other_bytes_are_parsed_anew_and_a_bad_file_fails_every_time(counted: _Counted) -> None:
    lockmemo.images_lock(IMAGES % A.encode())
    assert lockmemo.images_lock(IMAGES % B.encode()) == parse_images_lock(IMAGES % B.encode())
    for _ in range(2):
        with pytest.raises(ImagesLockError):
            lockmemo.images_lock(b"kind: Nope\n")
    assert counted.parses == 4


def test_the_same_rewrite_is_made_once(counted: _Counted) -> None:
    lock = parse_images_lock(IMAGES % A.encode())
    assert lockmemo.rewritten(lock, REPO) == lockmemo.rewritten(lock, REPO) == rewrite(lock, REPO)
    assert counted.rewrites == 1


@pytest.mark.parametrize(
    ("raw", "repo"),
    [
        (IMAGES % B.encode(), REPO),  # another image
        (IMAGES % A.encode(), OTHER_REPO),  # another repository
        (IMAGES.replace(b"id: img", b"id: other") % A.encode(), REPO),  # another annotation
        (b"\n".join(IMAGES.splitlines()[:-2]) % A.encode() + b"\n", REPO),  # no annotations
    ],
)
def test_any_change_is_rewritten_anew(counted: _Counted, raw: bytes, repo: object) -> None:
    lockmemo.rewritten(parse_images_lock(IMAGES % A.encode()), REPO)
    lock = parse_images_lock(raw)
    assert lockmemo.rewritten(lock, repo) == rewrite(lock, repo)  # type: ignore[arg-type]
    assert counted.rewrites == 2


def test_the_memos_are_bounded(counted: _Counted) -> None:
    for number in range(lockmemo.SIZE + 3):
        raw = IMAGES % A.encode() + b"# %d\n" % number
        lockmemo.rewritten(lockmemo.images_lock(raw), parse_reference(f"r.io/t{number}@sha256:{A}").repository)
    assert (len(lockmemo._parsed), len(lockmemo._rewritten)) == (lockmemo.SIZE, lockmemo.SIZE)


def test_no_annotations_are_shared_between_two_calls_locks(counted: _Counted) -> None:
    first, second = lockmemo.images_lock(IMAGES % A.encode()), lockmemo.images_lock(IMAGES % A.encode())
    assert first.images[0].annotations is not second.images[0].annotations
    stored = next(iter(lockmemo._parsed.values()))
    assert stored.images[0].annotations is not second.images[0].annotations
