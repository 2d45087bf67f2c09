"""The house rules of ARCHITECTURE.md, checked on every module with `ast`: floors, imports, no circles, forbidden names."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

from tests.support.fresh import fresh_python

PACKAGE = Path(__file__).resolve().parents[2] / "cli" / "ocivendir"

# floor of every module (a new module without a floor fails the suite)
FLOORS: dict[str, int] = {
    "__init__": 0, "errors": 0, "jsondoc": 0, "results": 0, "reports": 0, "goyaml": 0, "goyaml.emit": 0, "goyaml.load": 0, "goyaml.compose": 0, "goyaml.text": 0,
    "goyaml.nodes": 0, "goyaml.scalars": 0, "goyaml.values": 0, "goyaml.keys": 0, "goyaml.gofloat": 0,
    "goyaml.implicit": 0, "goyaml.keyorder": 0, "goyaml.writer": 0, "gofold": 0, "gobase64": 0, "goregexp": 0, "flagscan": 0, "oci.gokeys": 1, "oci.configtypes": 1,
    "diag": 0, "parallel": 0, "serial": 0, "kept": 0,
    "oci": 1, "oci.reference": 1, "oci.manifest": 1, "oci.imageslock": 1, "oci.relocation": 1, "oci.lockmemo": 1, "oci.parsed": 1, "oci.strictyaml": 1,
    "sign": 1, "sign.glob": 1, "sign.policy": 1, "sign.cosign": 1, "sign.keys": 2, "sign.trustroot": 2, "sign.fulcio": 2, "sign.rekor": 2, "sign.keyless": 2, "sign.bundle": 2, "sign.source": 1, "sign.strictb64": 1, "engine.signatures": 3,
    "registry.credentials": 1, "registry.mirrors": 1, "registry.rewrite": 1, "registry.registriesyaml": 1,
    "vendir": 1, "vendir.config": 1, "vendir.lockfile": 1, "vendir.memos": 1, "vendir.globs": 1, "vendir.semver": 1,
    "registry": 2, "registry.endpoints": 2, "registry.auth": 2, "registry.retry": 2, "registry.client": 2, "registry.sender": 2, "registry.proxy": 2,
    "registry.truststore": 2, "registry.tlscontexts": 2, "registry.keptpools": 2,
    "registry.transport": 2, "registry.ggcrtext": 2, "registry.connections": 2, "registry.pools": 2,
    "registry.watchdog": 2, "registry.tlsprobe": 2, "registry.challenge": 2, "registry.authmemo": 2, "registry.download": 2, "cache.partials": 2, "cache.unwritable": 2,
    "cache": 2, "cache.store": 2, "cache.index": 2, "cache.connection": 2, "cache.memo": 2, "cache.opened": 2, "cache.verified": 2, "cache.prune": 2, "cache.rows": 2, "cache.repair": 2, "cache.tidy": 2, "cache.grants": 2, "cache.archive": 2, "cache.staging": 2,
    "fs": 2, "fs.locks": 2, "fs.swap": 2, "fs.swapset": 2, "fs.swapping": 2, "fs.paths": 2, "fs.extract": 2, "fs.remove": 2, "fs.limits": 2, "fs.tarread": 2, "fs.replay": 2, "fs.fileid": 2, "fs.gunzip": 2, "fs.dropbehind": 2,
    "engine": 3, "engine.content": 3, "engine.access": 3, "engine.image": 3, "engine.pull": 3, "engine.relocate": 3, "engine.stream": 3,
    "engine.verify": 3, "engine.sync": 3, "engine.placement": 3, "engine.sources": 3, "engine.delegate": 3, "engine.referrers": 3, "engine.verification": 3, "engine.seed": 3, "engine.export": 3,
    "settings": 4, "output": 4, "__main__": 4,
    "commands": 4, "commands.options": 4, "commands.runtime": 4, "commands.pull": 4, "commands.version": 4,
    "commands.verify": 4, "commands.cache": 4, "commands.cacheio": 4, "commands.sync": 4, "commands._docgen": 4,
    "commands.overrides": 4, "commands.goflags": 4, "commands.tools": 4,
    "commands.root": 4, "commands.syncrun": 4, "commands.vendirargs": 4,
    "commands.pullargs": 4, "commands.pullrun": 4, "commands.server": 4, "commands.ending": 4,
    "server": 4, "server.place": 4, "server.selfpaths": 4, "server.build": 4, "server.wire": 4, "server.client": 4, "server.spawn": 4,
    "server.daemon": 4, "server.worker": 4, "server.preload": 4, "server.identity": 4, "server.interpreter": 4,
    "server.world": 4, "server.schedule": 4, "server.leaks": 4, "server.pool": 4, "server.desk": 4, "server.watch": 4, "server.ownstatus": 4,
    "server.slots": 4, "server.log": 4, "server.sweep": 4,
}  # fmt: skip
PURE_THIRD_PARTY = {"yaml", "re2"}
ONLY_IN = {
    # the transport: requests for the exchanges, urllib3 beneath it for the bounded connections, loaded on first use
    "requests": {"registry.connections", "registry.pools", "registry.challenge"},
    "urllib3": {"registry.connections", "registry.pools"},
    "http": {"registry.connections"},  # http.client's errors (ggcrtext carries Go's status texts, not HTTPStatus's)
    "socket": {
        "registry.pools",
        "registry.watchdog",
        "registry.transport",
        "registry.tlsprobe",
        "server.wire",
        "server.client",
        "server.daemon",
        "server.worker",
        "server.watch",
        "server.identity",
        "server.pool",
        "server.desk",
    },  # registries; the server's Unix socket
    "matplotlib": set(),  # the bench extra draws the report's charts: never the runtime
    "oras": set(),  # oras-py does not serve the distribution protocol here: docs/dependencies.md says why
    "click": {m for m in FLOORS if m == "commands" or m.startswith("commands.")},
    "rich": {"output"},
    "platformdirs": {"settings"},
    "fcntl": {"fs.locks", "fs.dropbehind"},  # file locks; O_DIRECT on and off for a large file being written
    # signature checks (`--policy`): keys, the trusted root, Fulcio certificates, Rekor's SET, the keyless check
    "cryptography": {"sign.keys", "sign.trustroot", "sign.fulcio", "sign.keyless", "sign.bundle", "sign.rekor"},
    "re2": {"goregexp"},  # Go's regexp (registries.yaml rewrites, keyless identities), in one place
    "zlib_ng": {"fs.gunzip"},  # layers' inflate and CRC-32, twice and five times as fast as zlib's
    "concurrent": set(),  # its logging import costs a cold sync a sixth: ocivendir/parallel.py is the thread pool
}
STDLIB_SHADOWS = {"secrets", "types", "logging", "json", "io", "os", "sys", "typing", "string", "select", "signal"}


def modules() -> list[tuple[str, Path]]:
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = list(path.relative_to(PACKAGE).with_suffix("").parts)
        if parts[-1] == "__init__" and len(parts) > 1:
            parts.pop()
        found.append((".".join(parts), path))
    return found


def imported(tree: ast.AST) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
    return names


def internal(name: str) -> str | None:
    if name == "ocivendir":
        return "__init__"
    if name.startswith("ocivendir."):
        rest = name.removeprefix("ocivendir.")
        while rest and rest not in FLOORS:
            rest = rest.rpartition(".")[0]
        return rest or "__init__"
    return None


@pytest.mark.parametrize(("module", "path"), modules(), ids=[m for m, _ in modules()])
def test_module_has_a_floor_and_imports_only_from_floors_at_or_below(module: str, path: Path) -> None:
    assert module in FLOORS, f"{module} has no floor in the architecture table"
    tree = ast.parse(path.read_text())
    for name in imported(tree):
        target = internal(name)
        if target is not None:
            assert FLOORS[target] <= FLOORS[module], f"{module} imports {name} from a higher floor"
            continue
        top = name.split(".")[0]
        if top in ONLY_IN:
            assert module in ONLY_IN[top], f"{module} imports {top}, reserved to {sorted(ONLY_IN[top])}"
        if FLOORS[module] <= 1 and top not in PURE_THIRD_PARTY:
            assert top in sys.stdlib_module_names, f"pure module {module} imports {top}"


def edges(tree: ast.AST) -> set[str]:
    """The modules a module names, at import time, in a function or under TYPE_CHECKING alike.

    `from ocivendir.pkg import mod` names the module `pkg.mod`, not the package: a submodule importing a sibling is
    no circle through its package's `__init__`.
    """
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for alias in node.names:
                whole = f"{node.module}.{alias.name}"
                names.add(whole if internal(whole) == whole.removeprefix("ocivendir.") else node.module)
    return {target for name in names if (target := internal(name)) is not None}


def reach(graph: dict[str, set[str]], start: str) -> set[str]:
    """Every module `start` names, directly or through others."""
    seen: set[str] = set()
    todo = list(graph.get(start, ()))
    while todo:
        node = todo.pop()
        if node not in seen:
            seen.add(node)
            todo.extend(graph.get(node, ()))
    return seen


def circles(graph: dict[str, set[str]]) -> list[set[str]]:
    """The circles: each a set of two or more modules that all reach one another."""
    reached = {node: reach(graph, node) for node in graph}
    found: list[set[str]] = []
    for node in sorted(graph):
        circle = {other for other in reached[node] if node in reached.get(other, set())} | {node}
        if len(circle) > 1 and circle not in found:
            found.append(circle)
    return found


def test_circles_are_found_type_level_included() -> None:
    """The rule can fail: a circle through a TYPE_CHECKING import is a circle."""
    typed = ast.parse("TYPE_CHECKING = False\nif TYPE_CHECKING:\n    from ocivendir.engine.content import Content\n")
    graph = {"engine.access": edges(typed), "engine.content": {"engine.access"}, "errors": set()}
    assert circles(graph) == [{"engine.access", "engine.content"}]


def test_no_module_names_another_that_names_it_back_even_for_types_only() -> None:
    """Imports form no circle, type-level (TYPE_CHECKING) and in-function ones included.

    Each side of a circle would have to know the other, so neither could be read, tested or changed alone.
    """
    graph = {module: edges(ast.parse(path.read_text())) - {module} for module, path in modules()}
    found = [sorted(c) for c in circles(graph)]
    assert not found, f"import circles: {found}"


@pytest.mark.parametrize(("module", "path"), modules(), ids=[m for m, _ in modules()])
def test_module_writes_nothing_and_reads_no_environment_outside_its_layer(module: str, path: Path) -> None:
    source = path.read_text()
    tree = ast.parse(source)
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "print":
            pytest.fail(f"{module} calls print()")
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
            if node.value.id == "sys" and node.attr in {"stdout", "stderr"}:
                assert module == "output", f"{module} touches sys.{node.attr}"
            if node.value.id == "os" and node.attr in {"environ", "getenv"}:
                # the server's switch and place are read by the client before Settings exist; the worker takes the
                # caller's environment as its own and the client sends its own; a server starts with a scrubbed copy
                readers = {
                    "settings",
                    "server.place",
                    "server.client",
                    "server.worker",
                    "server.spawn",
                    "server.identity",
                    "server.world",
                }
                assert module in readers, f"{module} reads os.{node.attr}"


@pytest.mark.parametrize(("module", "path"), modules(), ids=[m for m, _ in modules()])
def test_module_documents_what_it_owns_and_declares_its_api(module: str, path: Path) -> None:
    tree = ast.parse(path.read_text())
    docstring = ast.get_docstring(tree)
    assert docstring, f"{module} has no module docstring"
    assert path.stem not in STDLIB_SHADOWS, f"{module} shadows the standard library"
    has_future = any(isinstance(n, ast.ImportFrom) and n.module == "__future__" for n in tree.body)
    if tree.body[1:]:
        assert has_future, f"{module} lacks `from __future__ import annotations`"


def test_warm_path_modules_import_no_network_stack_at_import_time() -> None:
    code = (
        "import sys, ocivendir.commands, ocivendir.engine.pull, ocivendir.cache.index;"
        "bad = [m for m in ('requests', 'oras', 'rich', 'urllib3', 'sqlite3') if m in sys.modules];"
        "print(bad)"
    )
    done = fresh_python(code)
    assert done.stdout.strip() == "[]"


@pytest.mark.parametrize(("module", "path"), modules(), ids=[m for m, _ in modules()])
def test_module_imports_no_private_cpython_module(module: str, path: Path) -> None:
    private = {name.split(".")[0] for name in imported(ast.parse(path.read_text()))}
    private = {top for top in private if top.startswith("_") and top != "__future__"}
    assert not private, f"{module} imports {sorted(private)}: use the public module"


# what no process that hands its call to the server may load first: the CLI's libraries, TLS, the cache, the records
CLIENT_HEAVY = ("click", "yaml", "rich", "requests", "urllib3", "ssl", "sqlite3", "dataclasses", "json", "logging",
                "threading", "re", "hashlib", "typing", "inspect")  # fmt: skip


def test_the_client_path_imports_only_what_handing_a_call_over_needs() -> None:
    code = (  # what commands.run() imports before it hands the call over (_through_server)
        "import sys\nimport ocivendir.commands, ocivendir.server.place, ocivendir.server.client\n"
        "print(sorted(m for m in sys.modules if m.startswith('ocivendir')))\n"
        f"print(sorted(m for m in {CLIENT_HEAVY!r} if m in sys.modules))\n"
    )
    ours, heavy = fresh_python(code).stdout.splitlines()
    client = ["ocivendir", "ocivendir.commands", "ocivendir.server"]
    client += [
        "ocivendir.server.build",
        "ocivendir.server.client",
        "ocivendir.server.interpreter",
        "ocivendir.server.place",
        "ocivendir.server.wire",
    ]
    assert ours == repr(client)
    assert heavy == "[]"


def test_version_in_process_stays_light() -> None:
    code = (
        "import os, sys\nos.environ['OCIVENDIR_SERVER'] = 'off'\nsys.argv = ['ocivendir', 'version']\n"
        "from ocivendir.commands import main\ntry:\n    main()\nexcept SystemExit as exc:\n    code = exc.code\n"
        f"print(code, sorted(m for m in {CLIENT_HEAVY!r} if m in sys.modules))\n"
    )
    assert fresh_python(code).stdout.splitlines()[-1] == "0 []"
