"""ARCHITECTURE.md stays the map: it names every package and top-level module, on its floor, and nothing that is gone.

The code map's entries (`### \\`name/\\` (floor N)` or `(floors N-M)`) must be exactly the packages and top-level modules
of `cli/ocivendir/`, each with the floors `tests/unit/test_architecture.py` gives its modules; every module path the
file names must exist; and the layering rule that test enforces (the floors, the confined libraries) is explained.
"""

from __future__ import annotations

import re
from pathlib import Path

from tests.unit.test_architecture import FLOORS, ONLY_IN, modules

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "cli" / "ocivendir"
DOC = ROOT / "ARCHITECTURE.md"
ENTRY = re.compile(r"^### `([a-z_0-9]+)(/|\.py)` \(floors? (\d)(?:-(\d))?\)$", re.MULTILINE)


def section(text: str, title: str) -> str:
    start = text.index(f"\n## {title}\n")
    end = text.find("\n## ", start + 1)
    return text[start : end if end >= 0 else len(text)]


def code_map() -> dict[str, set[int]]:
    """Each entry of the code map (`name` or `name/`) and the floors it states."""
    found: dict[str, set[int]] = {}
    for name, kind, low, high in ENTRY.findall(section(DOC.read_text(), "Code map")):
        key = f"{name}{kind}"
        assert key not in found, f"{key} is listed twice"
        found[key] = set(range(int(low), int(high or low) + 1))
    return found


def entries() -> dict[str, set[int]]:
    """Each package and top-level module of cli/ocivendir and the floors of its modules."""
    found: dict[str, set[int]] = {}
    for module, path in modules():
        relative = path.relative_to(PACKAGE)
        key = f"{relative.parts[0]}/" if len(relative.parts) > 1 else relative.name
        found.setdefault(key, set()).add(FLOORS[module])
    return found


def test_the_code_map_names_every_package_and_top_level_module_and_nothing_else() -> None:
    listed, present = set(code_map()), set(entries())
    assert listed - present == set(), "listed in ARCHITECTURE.md but not in cli/ocivendir"
    assert present - listed == set(), "in cli/ocivendir but missing from ARCHITECTURE.md's code map"


def test_each_entry_states_the_floors_the_architecture_test_gives_its_modules() -> None:
    present = entries()
    for key, floors in code_map().items():
        assert floors == present[key], f"{key}: ARCHITECTURE.md says floors {sorted(floors)}, the table {present[key]}"


def test_every_module_path_it_names_exists() -> None:
    text = DOC.read_text()
    named = set(re.findall(r"`((?:[a-z_]+/)*[a-z_0-9]+\.py)`", text))
    missing = sorted(p for p in named if not (PACKAGE / p).is_file() and not (ROOT / p).is_file())
    assert missing == []


def test_the_layering_rule_is_explained_floor_by_floor_with_every_confined_library() -> None:
    layering = section(DOC.read_text(), "Layering")
    floors = {int(n) for n in re.findall(r"^\| (\d) \|", layering, re.MULTILINE)}
    assert floors == set(FLOORS.values())
    for library in ONLY_IN:
        assert f"`{library}`" in layering, f"the Layering section does not say where `{library}` may be imported"
    assert "circle" in layering
    assert "TYPE_CHECKING" in layering


def test_the_checks_see_a_stale_entry() -> None:
    """The map's reader is not vacuous: it finds the entries, and a module that is gone would not be found."""
    listed = code_map()
    assert {"engine/", "errors.py", "server/", "sign/"} <= set(listed)
    assert listed["sign/"] == {1, 2}
    assert "gone.py" not in entries()
