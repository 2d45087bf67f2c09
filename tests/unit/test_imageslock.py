"""ImagesLock, BundleLock and ImageLocations parse exactly as imgpkg does, with its messages (spec §2.2)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from ocivendir.engine.pull import read_images_lock
from ocivendir.errors import ImagesLockError
from ocivendir.oci.imageslock import (
    MAX_IMAGES_LOCK_BYTES,
    parse_bundle_lock,
    parse_image_locations,
    parse_images_lock,
)
from ocivendir.oci.reference import Digest, parse_reference
from ocivendir.oci.relocation import evaluate, plan, rewrite
from ocivendir.results import ImageStatus

TYPE_CHECKING = False
if TYPE_CHECKING:
    from ocivendir.results import ImageStatusValue

HEX = "75ffea7db4202cd300cda12f5ad43695ef14e731614189cb59bf504729e05c47"
HEAD = "apiVersion: imgpkg.carvel.dev/v1alpha1\nkind: ImagesLock\n"


@pytest.mark.parametrize(
    "text",
    [
        (
            f"---\n{HEAD}images:\n- image: 127.0.0.1:5111/test/img@sha256:{HEX}\n  annotations:\n"
            "    kbld.carvel.dev/id: example.com/app:latest\n"
        ),
        HEAD + "images:\n",
        HEAD + "images: []\n",
        HEAD,
        HEAD + f"images:\n- image: library/image_with_config@sha256:{HEX}\n",
        HEAD + f"images:\n- image: r.io/app@sha256:{HEX}\n  annotations:\n    n: 123\n",
    ],
)
def test_valid_forms_are_accepted(text: str) -> None:
    parse_images_lock(text.encode())


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (HEAD + "extra: 1\n",
         'Unmarshaling images lock: error unmarshaling JSON: while decoding JSON: json: unknown field "extra"'),
        (HEAD + f"images:\n- image: r.io/app@sha256:{HEX}\n  digest: x\n", 'json: unknown field "digest"'),
        (HEAD + "kind: ImagesLock\n", "already set in map"),
        ("apiVersion: v9\nkind: ImagesLock\n",
         "Validating images lock: Validating apiVersion: Unknown version (known: imgpkg.carvel.dev/v1alpha1)"),
        ("apiVersion: imgpkg.carvel.dev/v1alpha1\nkind: BundleLock\n",
         "Validating images lock: Validating kind: Unknown kind (known: ImagesLock)"),
        (HEAD + "images:\n- image: nginx:1.0\n",
         "Validating images lock: Expected ref to be in digest form, got 'nginx:1.0'"),
        (HEAD + f"images:\n- image: r.io/app@sha256:{HEX.upper()}\n", "Expected ref to be in digest form"),
        (HEAD + f"images:\n- image: r.io/app@sha512:{HEX}\n", "Expected ref to be in digest form"),
        (HEAD + f"images:\n- image: r.io/app@sha256:{HEX}\n  annotations:\n    k: [1]\n", "Unmarshaling images lock"),
        ("images: [\n", "Unmarshaling images lock"),
    ],
)  # fmt: skip
def test_invalid_forms_give_imgpkgs_messages(text: str, message: str) -> None:
    with pytest.raises(ImagesLockError) as caught:
        parse_images_lock(text.encode())
    assert message in str(caught.value)


def test_the_rewrite_is_byte_identical_to_imgpkgs_observed_output() -> None:
    lock = parse_images_lock(
        (
            f"---\n{HEAD}images:\n- image: 127.0.0.1:5111/test/img@sha256:{HEX}\n  annotations:\n"
            "    kbld.carvel.dev/id: example.com/app:latest\n"
        ).encode()
    )
    out = rewrite(lock, parse_reference("127.0.0.1:5111/relocated/bundle").repository)
    expected = (
        "---\napiVersion: imgpkg.carvel.dev/v1alpha1\nimages:\n- annotations:\n"
        "    kbld.carvel.dev/id: example.com/app:latest\n"
        f"  image: 127.0.0.1:5111/relocated/bundle@sha256:{HEX}\nkind: ImagesLock\n"
    )
    assert out.decode() == expected
    assert len(out) == 243


def test_float_annotations_are_rewritten_as_imgpkg_0_43_1_rewrote_them() -> None:
    # imgpkg reads an annotation float into its map[string]string as Go's float32 text (`1.2345679e+08`), a float
    # past float64 stays text, and `.inf` is the text `+Inf` (observed with imgpkg 0.43.1, adversarial review)
    values = ["123456789.123", "99999999999999999999", ".inf", "1e400"]
    annotations = "".join(f"    n{i}: {value}\n" for i, value in enumerate(values))
    lock = parse_images_lock(f"{HEAD}images:\n- image: r.io/app@sha256:{HEX}\n  annotations:\n{annotations}".encode())
    out = rewrite(lock, parse_reference("r.io/relocated").repository)
    assert out.decode() == (
        "---\napiVersion: imgpkg.carvel.dev/v1alpha1\nimages:\n- annotations:\n"
        '    n0: "1.2345679e+08"\n    n1: "1e+20"\n    n2: +Inf\n    n3: 1e400\n'
        f"  image: r.io/relocated@sha256:{HEX}\nkind: ImagesLock\n"
    )


def test_a_bundle_without_images_rewrites_to_the_empty_form_and_counts_as_relocated() -> None:
    lock = parse_images_lock(HEAD.encode())
    assert rewrite(lock, parse_reference("r.io/xy").repository) == (
        b"---\napiVersion: imgpkg.carvel.dev/v1alpha1\nkind: ImagesLock\n"
    )
    assert evaluate({}) == "relocated"


def test_plan_probes_each_digest_once_in_the_bundle_repository_with_the_recorded_miss_first() -> None:
    other = "a" * 64
    lock = parse_images_lock(
        (HEAD + f"images:\n- image: r.io/xy@sha256:{HEX}\n- image: s.io/yy@sha256:{other}\n"
         f"- image: t.io/zz@sha256:{HEX}\n").encode()
    )  # fmt: skip
    repo = parse_reference("m.io/mirror/app").repository
    probes = plan(lock, repo)
    assert [str(p.candidate) for p in probes] == [f"m.io/mirror/app@sha256:{HEX}", f"m.io/mirror/app@sha256:{other}"]
    first = plan(lock, repo, first=[f"m.io/mirror/app@sha256:{other}"])
    assert first[0].digest.hex == other


@pytest.mark.parametrize(
    ("statuses", "verdict"),
    [
        ([ImageStatus.PRESENT, ImageStatus.PRESENT], "relocated"),
        ([ImageStatus.PRESENT, ImageStatus.MISSING], "not-relocated"),
        ([ImageStatus.DENIED, ImageStatus.ERROR], "not-relocated"),
        ([ImageStatus.PRESENT, ImageStatus.ERROR], "undetermined"),
    ],
)
def test_evaluate(statuses: list[ImageStatusValue], verdict: str) -> None:
    assert evaluate({Digest(f"{i:064x}"): s for i, s in enumerate(statuses)}) == verdict


def test_bundle_lock_and_image_locations() -> None:
    header = "apiVersion: imgpkg.carvel.dev/v1alpha1\nkind: BundleLock\nbundle:\n"
    lock = parse_bundle_lock(f"{header}  image: r.io/bundle@sha256:{HEX}\n  tag: v1\n".encode())
    assert lock.tag == "v1"
    assert str(lock.image) == f"r.io/bundle@sha256:{HEX}"
    with pytest.raises(ImagesLockError) as caught:
        parse_bundle_lock(f"{header}  image: r.io/bundle:v1\n".encode())
    assert str(caught.value) == "Validating bundle lock: Expected ref to be in digest form, got 'r.io/bundle:v1'"
    locations = parse_image_locations(
        f"apiVersion: imgpkg.carvel.dev/v1alpha1\nkind: ImageLocations\nfuture: ok\nimages:\n"
        f"- image: r.io/xy@sha256:{HEX}\n  isBundle: true\n".encode()
    )
    assert locations[0].is_bundle is True


EVIL = "evil.example/x@sha256:" + "b" * 64
HOSTILE = f"a\nb\u2028  image: {EVIL}\u2028-"  # issue 22: text after LS read as a second image by go-yaml and PyYAML


def test_an_annotation_with_other_line_breaks_cannot_add_an_image_to_the_rewrite() -> None:
    text = f"---\n{HEAD}images:\n- image: r.io/app@sha256:{HEX}\n  annotations:\n    note: {_double(HOSTILE)}\n"
    lock = parse_images_lock(text.encode())
    out = rewrite(lock, parse_reference("r.io/relocated").repository)
    assert out.decode() == (  # what imgpkg (go-yaml v2) writes: LS kept raw, the rest of the line indented
        "---\napiVersion: imgpkg.carvel.dev/v1alpha1\nimages:\n- annotations:\n    note: |-\n      a\n"
        f"      b\u2028        image: {EVIL}\u2028      -\n  image: r.io/relocated@sha256:{HEX}\nkind: ImagesLock\n"
    )
    again = parse_images_lock(out)
    assert [e.image for e in again.images] == [f"r.io/relocated@sha256:{HEX}"]
    assert again.images[0].annotations == {"note": HOSTILE}
    assert yaml.safe_load(out)["images"] == [
        {"annotations": {"note": HOSTILE}, "image": f"r.io/relocated@sha256:{HEX}"}
    ]


def _double(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace("\n", "\\n").replace("\u2028", "\\L") + '"'


def test_a_rewrite_that_would_read_back_otherwise_is_refused_and_nothing_is_returned() -> None:
    text = f"---\n{HEAD}images:\n- image: r.io/app@sha256:{HEX}\n  annotations:\n    '<<': x\n"
    lock = parse_images_lock(text.encode())
    with pytest.raises(ImagesLockError, match=r"Rewriting images lock for r.io/relocated: it would not read back"):
        rewrite(lock, parse_reference("r.io/relocated").repository)


def test_an_images_lock_larger_than_4_mib_is_refused_unread(tmp_path: Path) -> None:
    # a 1.3 MiB layer can hold a 300 MiB images.yml (one comment); read whole, it took 1.8 GiB (adversarial review)
    (tmp_path / ".imgpkg").mkdir()
    lock = tmp_path / ".imgpkg" / "images.yml"
    lock.write_bytes(f"{HEAD}images: []\n#".encode() + b"x" * MAX_IMAGES_LOCK_BYTES)
    with pytest.raises(ImagesLockError) as caught:
        read_images_lock(tmp_path)
    assert caught.value.message == (
        f"Reading path {lock}: the file is larger than the {MAX_IMAGES_LOCK_BYTES} bytes an images lock may be"
    )
    lock.write_bytes(f"{HEAD}images: []\n#".encode().ljust(MAX_IMAGES_LOCK_BYTES, b"x"))
    assert read_images_lock(tmp_path)[0].images == ()
