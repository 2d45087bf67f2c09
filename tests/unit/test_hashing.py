"""sha256 and HMAC-SHA256 (ocivendir/hashing.py) give hashlib's and hmac's values, and load OpenSSL only when it pays."""

from __future__ import annotations

import hashlib
import hmac
import random
import sys

import pytest

from ocivendir import hashing
from tests.support.fresh import fresh_python


def _blobs(seed: int) -> list[bytes]:
    rng = random.Random(seed)  # noqa: S311 - reproducible test data
    sizes = [0, 1, 55, 56, 63, 64, 65, 127, 128, 129, 1000, 4096, 70_000]
    return [rng.randbytes(n) for n in sizes] + [rng.randbytes(rng.randint(0, 300)) for _ in range(200)]


def test_sha256_is_hashlibs_for_every_size_and_every_way_of_feeding_it() -> None:
    for data in _blobs(1):
        expected = hashlib.sha256(data).hexdigest()
        assert hashing.sha256_hex(data) == expected
        for size in (len(data), None):
            hasher = hashing.new_sha256(size)
            for start in range(0, len(data), 37):
                hasher.update(data[start : start + 37])
            assert hasher.hexdigest() == expected


def test_hmac_is_rfc_2104_as_the_hmac_module_computes_it() -> None:
    rng = random.Random(2)  # noqa: S311 - reproducible test data
    keys = [b"", b"k", rng.randbytes(32), rng.randbytes(63), rng.randbytes(64), rng.randbytes(65), rng.randbytes(500)]
    keys += [rng.randbytes(rng.randint(0, 200)) for _ in range(100)]
    messages = _blobs(3)
    for position, key in enumerate(keys):
        for message in messages[position % 7 :: 7]:
            assert hashing.hmac_sha256_hex(key, message) == hmac.new(key, message, hashlib.sha256).hexdigest()
    # RFC 4231 test case 6: a 131-byte key, longer than the block, is hashed first
    key, message = b"\xaa" * 131, b"Test Using Larger Than Block-Size Key - Hash Key First"
    assert hashing.hmac_sha256_hex(key, message) == "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54"


def _modules_after(code: str) -> list[str]:
    probe = f"import sys\nfrom ocivendir import hashing\n{code}\nprint(sorted(m for m in ('hashlib', '_hashlib', 'hmac') if m in sys.modules))"
    done = fresh_python(probe)
    return eval(done.stdout)  # noqa: S307 - our own probe's list of names


@pytest.mark.skipif(hashing._builtin() is None, reason="this interpreter has no built-in sha256")
def test_small_content_is_hashed_without_loading_openssl_and_large_or_unsized_content_loads_it() -> None:
    small = "hashing.sha256_hex(bytes(1000)); hashing.hmac_sha256_hex(b'k' * 100, b'm'); hashing.new_sha256(4096)"
    assert _modules_after(small) == []
    budget = hashing.BUILTIN_BUDGET
    assert _modules_after(f"[hashing.sha256_hex(bytes({budget // 4})) for _ in range(4)]") == []
    assert _modules_after(f"[hashing.sha256_hex(bytes({budget // 4})) for _ in range(5)]") == ["_hashlib", "hashlib"]
    assert _modules_after(f"hashing.new_sha256({budget + 1})") == ["_hashlib", "hashlib"]
    assert _modules_after("hashing.new_sha256()") == ["_hashlib", "hashlib"]


def test_without_a_built_in_sha256_hashlib_does_the_work(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "_sha256", None)  # an import of it raises ImportError
    monkeypatch.setitem(sys.modules, "_sha2", None)
    assert hashing._builtin() is None
    chooser = hashing._Chooser()
    assert chooser.constructor(10) is hashlib.sha256
    assert chooser.constructor(None) is hashlib.sha256
