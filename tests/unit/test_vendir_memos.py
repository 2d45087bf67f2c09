"""A process serving calls parses a stream and renders a lock once: same results, keyed by everything they depend on.

Counted with spies on the real `parse_stream` and `LockConfig.dump`; every result is compared with a fresh one.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from ocivendir.vendir import memos
from ocivendir.vendir.config import parse_stream
from ocivendir.vendir.lockfile import LockConfig, LockContent, LockDirectory

CONFIG = b"""apiVersion: vendir.k14s.io/v1alpha1
kind: Config
directories:
- path: vendor
  contents:
  - path: app
    imgpkgBundle:
      image: r.io/team/app@sha256:%s
      secretRef:
        name: creds
"""
SECRET = b"""apiVersion: v1
kind: Secret
metadata:
  name: creds
data:
  username: dXNlcg==
  password: cGFzcw==
---
"""


def _stream(hex_char: str = "a", secret: bytes = SECRET) -> list[tuple[str, bytes]]:
    return [("-", secret + CONFIG % (hex_char * 64).encode())]


def _lock(tag: str = "v1", data: dict[str, object] | None = None) -> LockConfig:
    entry = LockContent(path="app", source_type="imgpkgBundle",
                        data=data if data is not None else {"image": "r.io/team/app@sha256:" + "a" * 64, "tag": tag})  # fmt: skip
    return LockConfig(directories=(LockDirectory(path="vendor", contents=(entry,)),))


class _Counted:
    def __init__(self) -> None:
        self.parses = self.dumps = 0


@pytest.fixture
def counted(monkeypatch: pytest.MonkeyPatch) -> _Counted:
    """Spies on the real parser and renderer; the memos start empty."""
    counts = _Counted()
    dump = LockConfig.dump

    def parse(sources: list[tuple[str, bytes]]) -> object:
        counts.parses += 1
        return parse_stream(sources)

    def counted_dump(lock: LockConfig) -> bytes:
        counts.dumps += 1
        return dump(lock)

    monkeypatch.setattr(memos, "parse_stream", parse)
    monkeypatch.setattr(LockConfig, "dump", counted_dump)
    monkeypatch.setattr(memos, "_streams", type(memos._streams)())
    monkeypatch.setattr(memos, "_locks", type(memos._locks)())
    return counts


def test_the_same_inputs_are_parsed_once_and_every_call_gets_an_equal_stream(counted: _Counted) -> None:
    first, second = memos.parsed(_stream()), memos.parsed(_stream())
    assert counted.parses == 1
    assert first == second == parse_stream(_stream())


def test_a_stream_handed_out_cannot_alter_the_next_calls(counted: _Counted) -> None:
    first = memos.parsed(_stream())
    first.config.directories[0].contents[0].source["image"] = "evil.io/x@sha256:" + "b" * 64
    first.secrets[0].data["password"] = "changed"
    again = memos.parsed(_stream())
    assert again == parse_stream(_stream())
    assert again.secret("creds").data["password"] == "pass"


@pytest.mark.parametrize(
    "other",
    [
        _stream("b"),  # another byte of the config
        _stream(secret=SECRET.replace(b"cGFzcw==", b"cGFzczI=")),  # another credential
        [("vendir.yml", _stream()[0][1])],  # another input name (it is in the errors)
        [("-", _stream()[0][1].decode())],  # text, not bytes
        [("-", SECRET), ("-", CONFIG % (b"a" * 64))],  # the same bytes split into two inputs
    ],
)
def test_any_change_in_the_inputs_is_parsed_anew(counted: _Counted, other: list[tuple[str, bytes | str]]) -> None:
    memos.parsed(_stream())
    assert memos.parsed(other) == parse_stream(other)
    assert counted.parses == 2


def test_a_stream_that_fails_to_parse_fails_every_time(counted: _Counted) -> None:
    broken = [("-", b"kind: Nope\n")]
    for _ in range(2):
        with pytest.raises(Exception, match="Unknown apiVersion"):
            memos.parsed(broken)
    assert counted.parses == 2


def test_the_same_lock_is_rendered_once(counted: _Counted) -> None:
    assert memos.dumped(_lock()) == memos.dumped(_lock()) == LockConfig.dump(_lock())
    assert counted.dumps == 2  # once by the memo, once by the comparison


@pytest.mark.parametrize(
    "other",
    [
        _lock("v2"),
        _lock(data={"image": "r.io/team/app@sha256:" + "a" * 64, "tag": 1}),  # a number, not text
        _lock(data={"tag": "v1", "image": "r.io/team/app@sha256:" + "a" * 64}),  # another key order
        replace(_lock(), directories=(replace(_lock().directories[0], path="other"),)),
    ],
)
def test_any_change_in_a_lock_is_rendered_anew(counted: _Counted, other: LockConfig) -> None:
    memos.dumped(_lock())
    assert memos.dumped(other) == memos.dumped(other)
    assert counted.dumps == 2  # rendered for itself, once
    assert memos.dumped(other) == LockConfig.dump(other)


def test_a_lock_holding_what_json_cannot_tell_apart_is_not_remembered(counted: _Counted) -> None:
    odd = _lock(data={1: "one"})
    memos.dumped(odd)
    memos.dumped(odd)
    assert counted.dumps == 2


def test_the_memos_are_bounded(counted: _Counted) -> None:
    for number in range(memos.SIZE + 5):
        memos.parsed([("-", _stream()[0][1] + b"# %d\n" % number)])
        memos.dumped(_lock(f"v{number}"))
    assert (len(memos._streams), len(memos._locks)) == (memos.SIZE, memos.SIZE)


def _mutables(value: object, found: dict[int, object]) -> dict[int, object]:
    """Every dict and list reachable from `value` (through dataclasses and tuples), by id."""
    if isinstance(value, dict | list):
        found[id(value)] = value
        for item in value.values() if isinstance(value, dict) else value:
            _mutables(item, found)
    elif isinstance(value, tuple):
        for item in value:
            _mutables(item, found)
    elif hasattr(value, "__dataclass_fields__"):
        for name in value.__dataclass_fields__:
            _mutables(getattr(value, name), found)
    return found


def test_no_mapping_or_list_is_shared_between_two_calls_streams(counted: _Counted) -> None:
    """What a stream holds that could be altered is its own: nothing reachable is shared with the next call's."""
    stream = [("-", SECRET + CONFIG % (b"a" * 64) + b"    dangerousSkipTLSVerify: true\n")]
    first, second = memos.parsed(stream), memos.parsed(stream)
    mine, theirs = _mutables(first, {}), _mutables(second, {})
    assert mine
    assert not set(mine) & set(theirs)
    assert not set(theirs) & set(_mutables(memos._streams, {}))
