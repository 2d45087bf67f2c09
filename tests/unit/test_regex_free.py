"""Go's regexps (registries.yaml rewrites, keyless identities) are RE2, never Python's re, and load only when used."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from ocivendir.oci.reference import parse_reference
from ocivendir.registry.mirrors import Mirror, MirrorPlan
from ocivendir.registry.rewrite import compile_rewrite
from tests.support.fresh import fresh_python


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


PACKAGE = Path(__file__).resolve().parents[2] / "cli" / "ocivendir"
GO_PATTERNS = ["goregexp.py", "registry/rewrite.py", "registry/registriesyaml.py", "sign/policy.py", "sign/keyless.py"]


@pytest.mark.parametrize("module", GO_PATTERNS)
def test_modules_that_read_go_patterns_never_use_pythons_re(module: str) -> None:
    """Python's re backtracks (a signer's 27-character subject cost 5.9 s) and reads another dialect than Go's."""
    tree = ast.parse((PACKAGE / module).read_text())
    imported = {alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names}
    imported |= {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.module}
    assert not imported & {"re", "regex"}, f"{module} imports Python's re"


def test_a_policy_without_identity_regexps_does_not_import_re2() -> None:
    code = """if True:
        import sys
        from ocivendir.sign.policy import parse_policies
        head = "apiVersion: policy.sigstore.dev/v1beta1\\nkind: ClusterImagePolicy\\nmetadata: {name: p}\\n"
        exact = "spec: {images: [{glob: '**'}], authorities: [{keyless: {url: u, identities: [{issuer: i, subject: s}]}}]}"
        (policy,) = parse_policies(head + exact, "f")
        assert policy.authorities[0].identities[0].matches("i", "s")
        before = "re2" in sys.modules
        parse_policies(head + exact.replace("subject:", "subjectRegExp:"), "f")
        print(before, "re2" in sys.modules)
    """
    assert fresh_python(code).stdout.strip() == "False True"
