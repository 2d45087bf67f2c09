"""Registry rewrite patterns (RE2) are loaded only where a mirror has rewrites, and apply Go's templates."""

from __future__ import annotations

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
