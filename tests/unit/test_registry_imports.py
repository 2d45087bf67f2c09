"""What loading the registry client costs: no YAML parser (registries.yaml is read apart) and no third-party HTTP."""

from __future__ import annotations

from tests.support.fresh import fresh_python


def test_the_registry_client_loads_no_yaml_parser_and_no_third_party_http_stack() -> None:
    code = (
        "import sys, ocivendir.registry.client, ocivendir.registry.auth;"
        "print(sorted(m for m in ('yaml', 'requests', 'urllib3', 'oras', 'subprocess') if m in sys.modules))"
    )
    done = fresh_python(code)
    assert done.stdout.strip() == "[]"
