"""The warm path's string checks against the regular expressions they replace: seeded fuzz plus edge cases.

Each replaced expression is kept here as the oracle: YAML document splitting (goyaml/load.py), Go durations
(settings.py) and the IMGPKG_REGISTRY_* names (registry/credentials.py).
"""

from __future__ import annotations

import random
import re

import pytest

from ocivendir.errors import UsageError
from ocivendir.goyaml.load import split_documents
from ocivendir.oci.reference import parse_reference
from ocivendir.registry.credentials import env_host_name
from ocivendir.registry.mirrors import Mirror, MirrorPlan
from ocivendir.registry.rewrite import compile_rewrite
from ocivendir.settings import parse_duration
from tests.support.fresh import fresh_python

SEPARATOR = re.compile(r"^---\s*$", re.MULTILINE)
DURATION_PART = r"([0-9]+(?:\.[0-9]*)?|\.[0-9]+)(ns|us|µs|ms|s|m|h|d)"
DURATION_UNITS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1, "m": 60, "h": 3600, "d": 86400}
ENV_HOST = r"IMGPKG_REGISTRY_(HOSTNAME|USERNAME|PASSWORD|IDENTITY_TOKEN|REGISTRY_TOKEN)(_.+)?"
SPACES = [" ", "\t", "\n", "\r", "\x0b", "\x0c", "\x1c", "\x85", "\xa0", "\u2028", "\u3000", "\r\n", "\n\n"]


def old_split(text: str) -> list[str]:
    return [doc for doc in SEPARATOR.split(text) if doc.strip()]


def old_duration(text: str) -> float | None:
    cleaned = text.strip()
    if cleaned in {"0", "+0", "-0"}:
        return 0.0
    position, total = 0, 0.0
    for match in re.finditer(DURATION_PART, cleaned):
        if match.start() != position:
            break
        total += float(match.group(1)) * DURATION_UNITS[match.group(2)]
        position = match.end()
    return None if position != len(cleaned) or not cleaned else total


def new_duration(text: str) -> float | None:
    try:
        return parse_duration(text, "--x")
    except UsageError:
        return None


def old_env_host(name: str) -> tuple[str, str]:
    match = re.fullmatch(ENV_HOST, name)
    return (match.group(1), match.group(2) or "") if match else ("", "")


def _rng(seed: int) -> random.Random:
    return random.Random(seed)  # noqa: S311 - a seeded generator of test input


def _text(rng: random.Random, pieces: list[str], most: int) -> str:
    return "".join(rng.choice(pieces) for _ in range(rng.randint(0, most)))


def test_documents_split_as_the_separator_expression_splits_them() -> None:
    rng = _rng(12)
    pieces = ["---", "---", "--", "-", "----", "a", "b: 1", "# c", "'---'", "x---", *SPACES, "\n---", "\n--- ", "é"]
    for _ in range(20000):
        text = _text(rng, pieces, 14)
        assert split_documents(text) == old_split(text), repr(text)


@pytest.mark.parametrize(
    "text",
    ["", "---", "---\n", "\n---", "---\n---\n", "a\n---\nb", "---  \n\n\nx", "--- x\n---\t\n", "---\x85\nx",
     "----\n", " ---\n", "a---\n", "---\u2028", "---\u2028x", "x\n---", "x\n--- \n \n", "---\r\n---\r\n"],
)  # fmt: skip
def test_document_splitting_edge_cases(text: str) -> None:
    assert split_documents(text) == old_split(text)


def test_durations_read_as_the_duration_expression_reads_them() -> None:
    rng = _rng(34)
    pieces = ["0", "1", "9", "12", ".", ".5", "1.", "ns", "us", "µs", "ms", "s", "m", "h", "d", "mh", "x", " ", "-",
              "+", "٣", "e3", "μs"]  # fmt: skip
    for _ in range(20000):
        text = _text(rng, pieces, 7)
        assert new_duration(text) == old_duration(text), repr(text)


@pytest.mark.parametrize(
    "text",
    ["", " ", "0", "-0", "+0", "1h30m", "1.5h", ".5s", "1.s", "5ms", "5mh", "5m5", "1µs", "1μs", " 7d ", ".", "1.5.5s",
     "s", "1", "10ns10us", "1h 30m", "1e3s", "٣s"],
)  # fmt: skip
def test_duration_edge_cases(text: str) -> None:
    assert new_duration(text) == old_duration(text)


def test_registry_env_names_match_as_the_env_expression_matches_them() -> None:
    rng = _rng(56)
    pieces = ["IMGPKG_REGISTRY_", "HOSTNAME", "USERNAME", "PASSWORD", "IDENTITY_TOKEN", "REGISTRY_TOKEN", "IDENTITY",
              "REGISTRY", "TOKEN", "_", "_", "1", "x", "\n", "é", "IMGPKG_"]  # fmt: skip
    for _ in range(20000):
        name = _text(rng, pieces, 5)
        assert env_host_name(name) == old_env_host(name), repr(name)


@pytest.mark.parametrize(
    "name",
    ["IMGPKG_REGISTRY_HOSTNAME", "IMGPKG_REGISTRY_HOSTNAME_0", "IMGPKG_REGISTRY_HOSTNAME_", "IMGPKG_REGISTRY_HOSTNAMEX",
     "IMGPKG_REGISTRY_REGISTRY_TOKEN_A_B", "IMGPKG_REGISTRY_IDENTITY_TOKEN", "IMGPKG_REGISTRY_HOSTNAME_\n",
     "IMGPKG_REGISTRY_HOSTNAME_a\nb", "IMGPKG_REGISTRY_HOSTNAME__", "IMGPKG_REGISTRY_", "imgpkg_registry_hostname"],
)  # fmt: skip
def test_registry_env_name_edge_cases(name: str) -> None:
    assert env_host_name(name) == old_env_host(name)


def test_the_yaml_and_credential_modules_run_without_importing_fnmatch() -> None:
    code = """if True:
        import sys
        from ocivendir.goyaml.load import load_documents, split_documents
        from ocivendir.registry.credentials import rules_from_env
        from ocivendir.vendir import config, globs
        from ocivendir.oci import strictyaml
        docs = list(load_documents(b"a: 1\\n---\\nb:\\n- x\\n--- \\n"))
        assert split_documents("a\\n---\\nb") == ["a\\n", "\\nb"] and docs, docs
        rules_from_env({"IMGPKG_REGISTRY_HOSTNAME_1": "r.io", "IMGPKG_REGISTRY_USERNAME_1": "u"})
        print(sorted(m for m in ("fnmatch",) if m in sys.modules))
    """
    done = fresh_python(code)
    assert done.stdout.strip() == "[]"


def test_connections_error_texts_and_a_plan_without_rewrites_do_not_import_re2() -> None:
    code = """if True:
        import sys
        from ocivendir.registry import connections, ggcrtext
        from ocivendir.registry.mirrors import Mirror, MirrorPlan
        from ocivendir.oci.reference import parse_reference
        plan = MirrorPlan(mirrors={"*": Mirror(urls=(("https", "m.io", "/v2"),))})
        assert [e.host for e in plan.endpoints(parse_reference("r.io/a/b:1").repository)] == ["m.io", "r.io"]
        print(sorted(m for m in ("re2",) if m in sys.modules))
    """
    done = fresh_python(code)
    assert done.stdout.strip() == "[]"


def test_a_mirror_rewrite_still_applies_go_templates_and_checks_the_repository_name() -> None:
    rewrites = (compile_rewrite(r"^team/(.*)$", "mirror/${1}"), compile_rewrite(r"^(.*)$", "UPPER/$1"))
    plan = MirrorPlan(mirrors={"*": Mirror(urls=(("https", "m.io", "/v2"),), rewrites=rewrites)})
    paths = [e.path for e in plan.endpoints(parse_reference("r.io/team/app:1").repository)]
    assert paths == ["mirror/app", "team/app"]
    other = [e.path for e in plan.endpoints(parse_reference("r.io/x/app:1").repository)]
    assert other == ["x/app", "x/app"]  # UPPER/x/app is no valid repository name: the path stays
