"""vendir's formats: the config stream (lenient Go decoding, validation messages), the lock, globs and semver."""

from __future__ import annotations

import hashlib

import pytest

from ocivendir.errors import ConfigError, SyncError
from ocivendir.vendir.config import config_digest, parse_stream, unix_mode
from ocivendir.vendir.globs import MAX_ALTERNATIVES, expand_braces, match
from ocivendir.vendir.lockfile import LockConfig, LockContent, LockDirectory, parse_lock
from ocivendir.vendir.semver import select_tag

HEAD = "apiVersion: vendir.k14s.io/v1alpha1\nkind: Config\n"


def parse(text: str) -> object:
    return parse_stream([("-", text)])


def error(text: str) -> str:
    with pytest.raises(ConfigError) as caught:
        parse(text)
    return str(caught.value)


def test_decoding_is_lenient_like_sigs_k8s_yaml() -> None:
    stream = parse(
        HEAD + "Directories:\n- Path: 0\n  permissions: 0755\n  unknownField: 1\n  contents:\n  - path: .\n"
        "    inline:\n      paths:\n        a.txt: 1e3\n        b.txt: yes\n        c.txt: 0x1F\n        d.txt: ~\n"
        "        e.txt: 2024-01-01\n    dangerouSkipTLSVerify: true\n"
    )
    directory = stream.config.directories[0]  # type: ignore[attr-defined]
    assert directory.path == "0"
    assert directory.permissions == 493
    assert directory.contents[0].source["paths"] == {
        "a.txt": "1000", "b.txt": "true", "c.txt": "31", "d.txt": "", "e.txt": "2024-01-01",
    }  # fmt: skip


@pytest.mark.parametrize(
    ("permissions", "mode"),
    [
        (0o755, 0o755),
        (0o4755, 0o755),
        (0o2775, 0o775),
        (0o1777, 0o777),  # the Unix bits as a number are no flag of Go's: dropped
        ((1 << 23) | 0o755, 0o4755),
        ((1 << 22) | 0o775, 0o2775),
        ((1 << 20) | 0o777, 0o1777),  # Go's own flags
        ((1 << 31) | 0o700, 0o700),  # fs.ModeDir and the other type bits: not a mode os.Chmod sets
    ],
)
def test_permissions_are_an_fs_filemode_applied_as_go_os_chmod_applies_it(permissions: int, mode: int) -> None:
    assert unix_mode(permissions) == mode  # observed with vendir 0.40.0 (adversarial review)


@pytest.mark.parametrize(
    ("value", "literal"),
    [
        ("-1", "-1"),
        ("4294967296", "4294967296"),
        ("1.5", "1.5"),
        ("1e21", "1e+21"),
        ("1e20", "100000000000000000000"),
        ("1.5e300", "1.5e+300"),
        ("5e-05", "0.00005"),
        ("1e-7", "1e-7"),
    ],
)  # encoding/json's literal for the float (vendir 0.40.0's text)
def test_permissions_an_fs_filemode_cannot_hold_are_gos_error(value: str, literal: str) -> None:
    message = error(HEAD + f"directories:\n- path: v\n  contents:\n  - path: .\n    permissions: {value}\n"
                           "    manual: {}\n")  # fmt: skip
    assert message == (
        "Parsing resource config '-': Unmarshaling config: Unmarshaling config: error unmarshaling JSON: while decoding "
        "JSON: json: "
        f"cannot unmarshal number {literal} into Go struct field .directories.0.contents.0.permissions of type "
        "fs.FileMode"
    )


def test_a_wrong_kind_for_a_bool_is_gos_error_with_the_field_path() -> None:
    message = error(HEAD + "directories:\n- path: v\n  contents:\n  - path: .\n    lazy: sure\n    manual: {}\n")
    assert message == (
        "Parsing resource config '-': Unmarshaling config: Unmarshaling config: error unmarshaling JSON: while decoding "
        "JSON: json: "
        "cannot unmarshal string into Go struct field .directories.0.contents.0.lazy of type bool"
    )


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ("directories:\n- path: .\n  contents: []\n",
         "Validating directory '.' (0): Expected path to not be one of '/', '.', '..', ''"),
        ("directories:\n- path: v\n  contents:\n  - path: .\n    manual: {}\n  - path: x\n    manual: {}\n",
         "Validating directory 'v' (0): Expected only one directory contents if path is set to '.'"),
        ("directories:\n- path: v\n  contents:\n  - path: x\n    git2: {}\n",
         "Validating directory contents 'x' (0): Expected directory contents type to be specified (one of git, "
         "manual, etc.)"),
        ("directories:\n- path: v\n  contents:\n  - path: x\n    image: {url: a/b}\n    imgpkgBundle: {image: a/b}\n",
         "Expected exactly one directory contents type to be specified (multiple found: image, imgpkgBundle)"),
        ("directories:\n- path: v\n  contents:\n  - path: ..\n    manual: {}\n",
         "Validating directory contents '..' (0): Expected path to not be one of '/', '.', '..', ''"),
        ("directories:\n- path: vendor\n  contents: []\n- path: vendor/foo\n  contents: []\n",
         "Expected to not manage overlapping paths: 'vendor/foo' and 'vendor'"),
        ("directories:\n- path: vendor\n  contents: []\n- path: vendor\n  contents: []\n",
         "Expected to not manage overlapping paths: 'vendor' and 'vendor'"),
        ("minimumRequiredVersion: v0.1.0\n", "Validating minimum version: Must not have prefix 'v' (e.g. '0.8.0')"),
        ("minimumRequiredVersion: 9.0.0\n",
         "vendir version '0.41.1' does not meet the minimum required version '9.0.0'"),
        ("minimumRequiredVersion: 0.41.2\n",
         "vendir version '0.41.1' does not meet the minimum required version '0.41.2'"),
    ],
)  # fmt: skip
def test_validation_uses_vendirs_wording_and_indexes(body: str, message: str) -> None:
    text = error(HEAD + body)
    assert text.startswith("Parsing resource config '-': Unmarshaling config: Validating config: ")
    assert text.endswith(message)


@pytest.mark.parametrize("minimum", ["0.41.1", "0.41", "0.41.1-rc.1", "0.40.0"])
def test_a_minimum_version_up_to_the_vendir_kapp_controller_v0_53_1_ships_is_met(minimum: str) -> None:
    parse(
        HEAD
        + f"minimumRequiredVersion: {minimum}\ndirectories:\n- path: v\n  contents:\n  - path: x\n    manual: {{}}\n"
    )


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "Expected to find at least one config, but found none"),
        (HEAD + "---\n" + HEAD, "Expected to find exactly one config, but found multiple"),
        ("apiVersion: v2\nkind: Thing\n", "Parsing resource config '-': Unknown apiVersion 'v2' or kind 'Thing' for resource"),
        ("# only a comment\n---\n" + HEAD, "Unknown apiVersion '' or kind '' for resource"),
        ("directories: [\n", "Parsing resource config '-': Unmarshaling doc: error converting YAML to JSON: yaml: line"),
    ],
)  # fmt: skip
def test_stream_errors(text: str, message: str) -> None:
    assert message in error(text)


def test_secrets_are_deduplicated_when_identical_and_refused_when_not() -> None:
    secret = "apiVersion: v1\nkind: Secret\nmetadata:\n  name: s\ndata:\n  username: dXNlcg==\n---\n"
    stream = parse(secret + secret + HEAD)
    assert stream.secret("s").data == {"username": "user"}  # type: ignore[attr-defined]
    other = secret.replace("dXNlcg==", "b3RoZXI=")
    assert "Expected to find one secret 's', but found multiple" in error(secret + other + HEAD)


def test_paths_are_cleaned_after_validation() -> None:
    stream = parse(HEAD + "directories:\n- path: vendor/foo/..//\n  contents:\n  - path: a/./b\n    manual: {}\n")
    directory = stream.config.directories[0]  # type: ignore[attr-defined]
    assert (directory.path, directory.contents[0].path) == ("vendor", "a/b")


def test_config_digest_matches_vendirs_for_the_documented_example() -> None:
    stream = parse(
        HEAD + "directories:\n- path: v\n  contents:\n  - path: .\n    lazy: true\n    inline:\n      paths:\n"
        '        a.txt: "line one\\nline two\\n"\n        b.yml: "x: 1"\n'
    )
    content = stream.config.directories[0].contents[0]  # type: ignore[attr-defined]
    expected = (
        b"inline:\n  paths:\n    a.txt: |\n      line one\n      line two\n    b.yml: 'x: 1'\nlazy: true\npath: .\n"
    )
    assert config_digest(content) == hashlib.sha256(expected).hexdigest()


def test_lock_dump_read_and_merge() -> None:
    lock = LockConfig(directories=(
        LockDirectory(path="0", contents=(LockContent(path=".", source_type="inline"),)),
        LockDirectory(path="1", contents=(LockContent(path=".", source_type="image",
                                                      data={"url": "r.io/x@sha256:ab", "tag": "1.0"}),)),
    ))  # fmt: skip
    text = lock.dump().decode()
    assert text == (
        'apiVersion: vendir.k14s.io/v1alpha1\ndirectories:\n- contents:\n  - inline: {}\n    path: .\n  path: "0"\n'
        '- contents:\n  - image:\n      tag: "1.0"\n      url: r.io/x@sha256:ab\n    path: .\n  path: "1"\nkind: LockConfig\n'
    )
    assert parse_lock(text, "x").dump().decode() == text
    update = LockConfig(directories=(LockDirectory(path="1", contents=(LockContent(path=".", source_type="manual"),)),
                                     LockDirectory(path="2", contents=(LockContent(path=".", source_type="manual"),))))  # fmt: skip
    merged = lock.merged(update)
    assert [d.path for d in merged.directories] == ["0", "1", "2"]
    assert merged.directories[1].contents[0].source_type == "manual"
    with pytest.raises(ConfigError, match="Unknown version"):
        parse_lock("", "/dev/null")
    with pytest.raises(ConfigError, match="Expected to find directory 'z' within lock config, but did not"):
        lock.find("z", ".")


@pytest.mark.parametrize(
    ("pattern", "name", "matches"),
    [("*.yml", "a.yml", True), ("*.yml", "d/a.yml", False), ("**/*.yml", "a.yml", True),
     ("**/*.yml", "d/e/a.yml", True), ("d/**", "d/e/f", True), ("d/*", "d/e/f", False), ("a?c", "abc", True),
     ("[a-c]x", "bx", True), ("[!a-c]x", "dx", True), ("{a,b}/*.txt", "b/x.txt", True), ("LICENSE{,.md}", "LICENSE.md", True),
     ("config/**/*.yml", "config/x.yml", True), ("**", "anything/at/all", True)],
)  # fmt: skip
def test_doublestar_globs(pattern: str, name: str, matches: bool) -> None:
    assert match(pattern, name) is matches


def test_a_brace_pattern_standing_for_too_many_alternatives_is_a_usage_error_not_a_hang() -> None:
    # 22 groups of {a,b} (110 bytes of a tenant's vendir.yml) would stand for 4,194,304 patterns.
    with pytest.raises(ConfigError, match="at most 4096 alternatives"):
        match("{a,b}" * 22, "a" * 22)
    assert len(expand_braces("{a,b}" * 12)) == MAX_ALTERNATIVES


def test_brace_groups_and_double_stars_cost_no_recursion_or_backtracking() -> None:
    assert expand_braces("{a}" * 2000) == ["a" * 2000]  # recursed once per group before
    deep = "/".join(["**"] * 40) + "/z"
    assert not match(deep, "/".join(["a"] * 60))
    assert match(deep, "/".join(["a"] * 60) + "/z")  # 40 stars over 60 segments: exponential before


def test_semver_selection() -> None:
    tags = ["v1.0.0", "1.2.0", "2.0.0-rc.1", "2.0.0-beta.1", "latest", "1.10.0", "3.0.0", "1.2.0+build.2",
            "1.2.0+build.10"]  # fmt: skip
    assert select_tag(tags, "", None) == "3.0.0"
    assert select_tag(tags, "<3.0.0", None) == "1.10.0"
    assert select_tag(tags, ">=2.0.0-0 <3.0.0", ["rc"]) == "2.0.0-rc.1"
    assert select_tag(tags, ">1.0.0 <3.0.0", []) == "2.0.0-rc.1"
    assert select_tag(tags, "1.2.x", None) == "1.2.0+build.10"
    assert select_tag(tags, "<1.0.0 || >=3.0.0", None) == "3.0.0"
    with pytest.raises(SyncError) as caught:
        select_tag(tags, ">5.0.0", None)
    assert str(caught.value) == (
        "Determining tag selection: Expected to find at least one version, but did not "
        "(details: all=8 -> after-prereleases-filter=6 -> after-constraints-filter=0)"
    )
    with pytest.raises(ConfigError, match="Parsing version constraint 'nonsense'"):
        select_tag(tags, "nonsense", None)


SECRET = "apiVersion: v1\nkind: Secret\nmetadata: {{name: s}}\ndata: {{password: {value}, username: dXNlcg==}}\n---\n"
GO_BASE64 = "json: cannot unmarshal string into Go struct field .data.password of type []uint8: illegal base64 data"


@pytest.mark.parametrize(
    ("value", "offset"),
    [('"aGk"', 0), ('"aG k="', 2), ('"a!hi"', 1), ('"aGk=x"', 4), ('"aGk=\\naGk="', 5), ('"aGk=="', 4), ('"==="', 0)],
)  # as vendir 0.40.0 reports them
def test_secret_data_that_is_not_base64_fails_as_vendir_fails(value: str, offset: int) -> None:
    message = error(SECRET.format(value=value) + HEAD + "directories: []\n")
    assert message == (
        "Parsing resource config '-': Unmarshaling secret: error unmarshaling JSON: while decoding JSON: "
        f"{GO_BASE64} at input byte {offset}"
    )


def test_secret_data_is_decoded_as_go_decodes_it_newlines_included() -> None:
    stream = parse(SECRET.format(value='"aGVs\\nbG8="') + HEAD + "directories: []\n")
    assert stream.secrets[0].data == {"password": "hello", "username": "user"}  # type: ignore[attr-defined]
    number = error(SECRET.format(value="1234") + HEAD + "directories: []\n")
    assert number.endswith("json: cannot unmarshal number into Go struct field .data.password of type []uint8")


def test_a_lock_file_is_read_back_before_it_is_written() -> None:
    hostile = LockContent(path=".", source_type="image", data={"url": "a\u2028  path: x\u2028", "tag": "t"})
    lock = LockConfig(directories=(LockDirectory(path="vendor", contents=(hostile,)),))
    assert parse_lock(lock.dump(), "vendir.lock.yml").directories[0].contents[0].data["url"] == "a\u2028  path: x\u2028"
    merged = LockContent(path=".", source_type="image", data={"<<": {"url": "x"}})
    with pytest.raises(SyncError, match="Writing lock config: it would read back as other data than was written"):
        LockConfig(directories=(LockDirectory(path="vendor", contents=(merged,)),)).dump()
