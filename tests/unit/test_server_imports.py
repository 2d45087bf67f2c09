"""The server never imports the command layer: the CLI starts the server and hands it the entry point (issue 36).

`commands → commands.root → commands.server → server.daemon → server.worker → commands` was a circle; the worker now
runs the callable `run_server` is given. Every import in `cli/ocivendir/server/` counts, at module level, inside a
function or under TYPE_CHECKING alike.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SERVER = Path(__file__).resolve().parents[2] / "cli" / "ocivendir" / "server"


def _imports(tree: ast.AST) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module if node.level == 0 else f"ocivendir.server.{node.module}")
    return names


@pytest.mark.parametrize("path", sorted(SERVER.glob("*.py")), ids=lambda path: path.stem)
def test_no_server_module_imports_the_command_layer(path: Path) -> None:
    found = sorted(
        name for name in _imports(ast.parse(path.read_text())) if name.split(".")[:2] == ["ocivendir", "commands"]
    )
    assert found == [], f"server/{path.name} imports {found}: hand the server what it needs (run_server's entry)"


def test_the_rule_sees_a_type_level_import() -> None:
    source = "TYPE_CHECKING = False\nif TYPE_CHECKING:\n    from ocivendir.commands import main\n"
    assert "ocivendir.commands" in _imports(ast.parse(source))
