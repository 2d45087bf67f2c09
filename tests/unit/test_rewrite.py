"""registries.yaml rewrites read and applied as containerd's Go `regexp` does (issue 22.9): RE2, never backtracking."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from ocivendir.errors import ConfigError
from ocivendir.oci.reference import Repository
from ocivendir.registry.registriesyaml import parse_registries
from ocivendir.registry.rewrite import compile_rewrite
from tests.support.fresh import fresh_python

GOLDEN = Path(__file__).resolve().parents[1] / "golden" / "regexp" / "go-rewrites.json"
CASES = json.loads(GOLDEN.read_text())
SOURCE = "/etc/ocivendir/registries.yaml"


def plan_path(pattern: str, target: str, repository: str) -> str:
    text = f"mirrors:\n  quay.io:\n    endpoint: ['https://m.example']\n    rewrite:\n      {json.dumps(pattern)}: {json.dumps(target)}\n"
    plan, _ = parse_registries(text, SOURCE)
    return plan.endpoints(Repository("quay.io", repository))[0].path


@pytest.mark.parametrize(("pattern", "target", "path", "status", "expected"), CASES)
def test_every_recorded_case_is_what_go_computed(
    pattern: str, target: str, path: str, status: str, expected: str
) -> None:
    try:
        rule = compile_rewrite(pattern, target)
    except ValueError:
        assert status == "error", f"Go accepts {pattern!r}"
        return
    assert status == "ok", f"Go refuses {pattern!r}: {expected}"
    assert rule.apply(path) == expected


def test_a_pattern_that_backtracks_exponentially_in_python_costs_nothing() -> None:
    started = time.process_time()
    for _ in range(20):  # Python's re took 20 s for one pull's rewrite of this repository
        assert plan_path("^(a+)+b$", "x", "a" * 27) == "a" * 27
        assert plan_path("^(a|aa)+$", "x/$1", "a" * 40) == "x/a"
    assert time.process_time() - started < 2  # well under one Python `re` match of the same input


@pytest.mark.parametrize(
    ("pattern", "expected"),
    [
        (r"^team/(.*)\z", "mirror/app"),  # Go's end of text; Python's re refuses \z
        (r"^\pL+/(.*)", "mirror/app"),  # Unicode classes
        (r"^\Qteam/\E(.*)", "mirror/app"),  # a quoted literal
        (r"^[[:alpha:]]+/(.*)", "mirror/app"),  # POSIX classes
        (r"^team{,2}/(.*)", "team/app"),  # Go reads `{,2}` as text: no match (Python's re: {0,2})
        (r"^(?<org>team)/(.*)", "mirror/app"),
    ],
)
def test_go_syntax_means_what_it_means_in_go(pattern: str, expected: str) -> None:
    assert plan_path(pattern, "mirror/$2" if "org" in pattern else "mirror/$1", "team/app") == expected


@pytest.mark.parametrize(
    ("pattern", "reason"),
    [
        (r"^team/(.*)\Z", "invalid escape sequence: \\Z"),
        (r"^(?=team)(.*)", "invalid perl operator: (?="),
        (r"(?<=team/)app", "invalid"),
        (r"^(t)eam/\1", "invalid escape sequence: \\1"),
        (r"^a++", "bad repetition operator: ++"),
        (r"(?x) ^ team", "invalid perl operator: (?x"),
        (r"a{1001}", "invalid repetition size: {1001}"),
        (r"x\C", "invalid escape sequence: \\C"),
        (r"(", "missing ): ("),
    ],
)
def test_a_pattern_go_refuses_is_a_config_error_naming_the_file_line_and_reason(
    pattern: str, reason: str, capfd: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(ConfigError) as caught:
        plan_path(pattern, "x", "team/app")
    assert caught.value.message.startswith(f"{SOURCE}:5: invalid rewrite pattern '{pattern}' for mirror 'quay.io': ")
    assert reason in caught.value.message
    assert capfd.readouterr() == ("", "")  # RE2's own error log stays off


def test_replace_all_skips_an_empty_match_right_after_a_match_as_go_does() -> None:
    assert compile_rewrite("x*", "-").apply("xab") == "-a-b-"  # Python's re.sub: "--a-b-"
    assert compile_rewrite("a*", "X").apply("baaac") == "XbXcX"  # Python's re.sub: "XbXXcX"


def test_a_name_shared_by_groups_expands_to_the_first_that_took_part() -> None:
    rule = compile_rewrite(r"^(?P<g>x)?(?P<g>t)eam/(.*)", "${g}-m/$3")
    assert rule.apply("team/app") == "t-m/app"
    assert compile_rewrite(r"^(team)/(.*)", "${01}/$2").apply("team/app") == "/app"  # a leading zero: a name


def test_re2_is_loaded_only_for_a_file_with_rewrites() -> None:
    code = """if True:
        import sys
        from ocivendir.registry.registriesyaml import parse_registries
        from ocivendir.oci.reference import Repository
        plan, _ = parse_registries("mirrors:\\n  quay.io:\\n    endpoint: ['https://m.example']\\n", "f")
        assert [e.path for e in plan.endpoints(Repository("quay.io", "team/app"))] == ["team/app", "team/app"]
        before = "re2" in sys.modules
        parse_registries("mirrors:\\n  quay.io:\\n    endpoint: ['https://m.example']\\n    rewrite: {'^t': x}\\n", "f")
        print(before, "re2" in sys.modules)
    """
    assert fresh_python(code).stdout.strip() == "False True"
