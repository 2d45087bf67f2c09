"""The code pack serves a package's unchanged modules from one file; anything else imports as if it were not there."""

from __future__ import annotations

import compileall
import marshal
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import ocivendir
from ocivendir import codepack
from tests.support.fresh import fresh_python

MODULES = {
    "__init__.py": "VALUE = 'init'\n",
    "mod.py": "VALUE = 'mod'\n\ndef fail():\n    raise ValueError('from mod')\n",
    "sub/__init__.py": "VALUE = 'sub'\n",
    "sub/deep.py": "from pkg.mod import VALUE as MOD\nVALUE = 'deep ' + MOD\n",
}


@pytest.fixture
def package(tmp_path: Path) -> Path:
    """A package `pkg` under tmp_path/root, packed."""
    for name, text in MODULES.items():
        path = tmp_path / "root" / "pkg" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    codepack.build(str(tmp_path / "root" / "pkg"))
    return tmp_path / "root" / "pkg"


def imports(package: Path, *names: str) -> list[str]:
    """For each module, in a new interpreter with the pack installed: `<loader class> <VALUE>`, or the error."""
    code = (
        f"import sys\nsys.path.insert(0, {str(package.parent)!r})\n"
        f"from ocivendir import codepack\ncodepack.install({str(package)!r})\n"
        "import importlib\n"
        f"for name in {list(names)!r}:\n"
        "    try:\n"
        "        module = importlib.import_module(name)\n"
        "        print(type(module.__spec__.loader).__name__, module.VALUE)\n"
        "    except ImportError as exc:\n"
        "        print(type(exc).__name__)\n"
    )
    return fresh_python(code).stdout.splitlines()


def test_unchanged_modules_and_packages_are_served_from_the_pack(package: Path) -> None:
    assert imports(package, "pkg", "pkg.mod", "pkg.sub", "pkg.sub.deep") == [
        "PackFinder init", "PackFinder mod", "PackFinder sub", "PackFinder deep mod"]  # fmt: skip


def test_a_module_edited_after_packing_is_imported_from_its_source(package: Path) -> None:
    (package / "mod.py").write_text("VALUE = 'edited, same length!'\n")
    assert imports(package, "pkg.mod", "pkg.sub.deep") == [
        "SourceFileLoader edited, same length!", "PackFinder deep edited, same length!"]  # fmt: skip


def test_a_module_touched_but_not_changed_is_imported_from_its_source(package: Path) -> None:
    info = (package / "mod.py").stat()
    os.utime(package / "mod.py", ns=(info.st_atime_ns, info.st_mtime_ns + 1))
    assert imports(package, "pkg.mod") == ["SourceFileLoader mod"]


def test_modules_added_or_removed_after_packing_import_as_without_a_pack(package: Path) -> None:
    (package / "new.py").write_text("VALUE = 'new'\n")
    (package / "mod.py").unlink()
    assert imports(package, "pkg.new", "pkg.mod") == ["SourceFileLoader new", "ModuleNotFoundError"]


@pytest.mark.parametrize(
    "damage",
    [
        lambda data: data[:40],  # truncated inside the header
        lambda data: data[:4] + b"\x00\x00\x00\x00" + data[8:],  # another Python's bytecode
        lambda _: b"garbage" * 10,
        lambda data: data[:12] + b"\xff" * (len(data) - 12),  # an unreadable header
        lambda _: b"",
    ],
)
def test_a_damaged_or_foreign_pack_is_ignored(package: Path, damage: object) -> None:
    pack = Path(codepack.pack_path(str(package)))
    pack.write_bytes(damage(pack.read_bytes()))  # type: ignore[operator]
    assert imports(package, "pkg.mod", "pkg.sub.deep") == ["SourceFileLoader mod", "SourceFileLoader deep mod"]


def test_a_module_whose_code_runs_past_the_end_of_the_pack_imports_from_its_source_the_others_from_the_pack(
    package: Path,
) -> None:
    pack = Path(codepack.pack_path(str(package)))
    pack.write_bytes(pack.read_bytes()[:-10])  # the last module packed (pkg.sub.deep) is cut short
    assert imports(package, "pkg.mod", "pkg.sub.deep") == ["PackFinder mod", "SourceFileLoader deep mod"]


def test_an_entry_of_the_wrong_shape_is_skipped_when_its_module_is_asked_for(package: Path) -> None:
    pack = Path(codepack.pack_path(str(package)))
    data = pack.read_bytes()
    size = int.from_bytes(data[8:12], "little")
    table = marshal.loads(data[12 : 12 + size])  # noqa: S302 - the pack this test just built
    table["pkg.mod"] = ("pkg/mod.py", "not a time", None)
    header = marshal.dumps(table)
    pack.write_bytes(data[:8] + len(header).to_bytes(4, "little") + header + data[12 + size :])
    assert imports(package, "pkg.mod", "pkg.sub") == ["SourceFileLoader mod", "PackFinder sub"]


def test_packed_modules_carry_the_attributes_importlib_gives_a_module_from_source(package: Path) -> None:
    code = (
        f"import sys\nsys.path.insert(0, {str(package.parent)!r})\n"
        f"from ocivendir import codepack\ncodepack.install({str(package)!r})\n"
        "import importlib.util, pkg, pkg.mod, pkg.sub.deep\n"
        "for m in (pkg, pkg.mod, pkg.sub, pkg.sub.deep):\n"
        "    print(m.__name__, m.__package__, type(m.__loader__).__name__, m.__loader__ is m.__spec__.loader,\n"
        "          m.__file__ == m.__spec__.origin, m.__cached__ == importlib.util.cache_from_source(m.__file__),\n"
        "          m.__spec__.cached == m.__cached__, getattr(m, '__path__', None))\n"
    )
    root = package.parent
    assert fresh_python(code).stdout.splitlines() == [
        f"pkg pkg PackFinder True True True True {[str(root / 'pkg')]}",
        "pkg.mod pkg PackFinder True True True True None",
        f"pkg.sub pkg.sub PackFinder True True True True {[str(root / 'pkg' / 'sub')]}",
        "pkg.sub.deep pkg.sub PackFinder True True True True None",
    ]


def test_under_optimization_the_pack_is_not_used(package: Path) -> None:
    code = (
        f"import sys\nsys.path.insert(0, {str(package.parent)!r})\n"
        f"from ocivendir import codepack\ncodepack.install({str(package)!r})\n"
        "import pkg.mod\nprint(type(pkg.mod.__spec__.loader).__name__)\n"
    )
    done = subprocess.run([sys.executable, "-O", "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.split() == ["SourceFileLoader"]  # the pack holds code compiled without -O


def test_a_header_size_past_the_end_of_the_pack_is_ignored_without_allocating_it(package: Path) -> None:
    pack = Path(codepack.pack_path(str(package)))
    data = pack.read_bytes()
    pack.write_bytes(data[:8] + b"\xff\xff\xff\xff" + data[12:])  # a 4 GiB table in a 1 MiB file
    code = (  # with an address-space limit, as a sidecar has, reading 4 GiB would be a MemoryError at import
        f"import resource, sys\nresource.setrlimit(resource.RLIMIT_AS, ({1 << 30}, {1 << 30}))\n"
        f"sys.path.insert(0, {str(package.parent)!r})\n"
        f"from ocivendir import codepack\ncodepack.install({str(package)!r})\n"
        "import pkg.mod\nprint(type(pkg.mod.__spec__.loader).__name__)\n"
    )
    assert fresh_python(code).stdout.split() == ["SourceFileLoader"]


def test_a_module_whose_packed_code_is_damaged_is_compiled_from_its_source(package: Path) -> None:
    pack = Path(codepack.pack_path(str(package)))
    data = bytearray(pack.read_bytes())
    size = int.from_bytes(data[8:12], "little")
    data[12 + size :] = b"\xee" * (len(data) - 12 - size)  # every module's code, not the table
    pack.write_bytes(bytes(data))
    assert imports(package, "pkg.mod", "pkg.sub.deep") == ["PackFinder mod", "PackFinder deep mod"]


def test_a_moved_tree_reports_its_own_paths_in_tracebacks(package: Path, tmp_path: Path) -> None:
    moved = tmp_path / "elsewhere" / "pkg"
    shutil.copytree(package, moved)  # copy2 keeps mtimes: the pack still matches
    code = (
        f"import sys, traceback\nsys.path.insert(0, {str(moved.parent)!r})\n"
        f"from ocivendir import codepack\ncodepack.install({str(moved)!r})\n"
        "import pkg.mod\nprint(type(pkg.mod.__spec__.loader).__name__, pkg.mod.__file__)\n"
        "try:\n    pkg.mod.fail()\nexcept ValueError:\n    print(traceback.format_exc().splitlines()[-3].strip())\n"
    )
    lines = fresh_python(code).stdout.splitlines()
    assert lines == [f"PackFinder {moved / 'mod.py'}", f'File "{moved / "mod.py"}", line 4, in fail']


def test_an_unchecked_pack_serves_a_build_that_ships_no_sources(package: Path, tmp_path: Path) -> None:
    shipped = tmp_path / "shipped" / "pkg"
    shipped.mkdir(parents=True)
    codepack.build(str(package), unchecked=True, target=codepack.pack_path(str(shipped)))
    assert imports(shipped, "pkg", "pkg.sub.deep") == ["PackFinder init", "PackFinder deep mod"]


def test_a_warm_kapp_sync_takes_every_module_from_the_pack_and_compiles_no_source_file(tmp_path: Path) -> None:
    compileall.compile_dir(ocivendir.__path__[0], quiet=1)  # as scripts/bootstrap.sh does: the tree may have
    codepack.build(ocivendir.__path__[0])  # changed since
    code = (  # compile() is audited; a module's source costs far more to compile than dataclasses' generated methods
        "import sys\nsys.argv = ['vendir', 'sync', '-f', '-', '--lock-file', '/dev/null']\n"
        "compiled = []\nsys.addaudithook(lambda event, args: event == 'compile' and args[1] != '<string>'"
        " and compiled.append(args[1]))\n"
        "import atexit\n"
        "atexit.register(lambda: print(compiled, sorted(n for n, m in sys.modules.items() if n.startswith('ocivendir')"
        " and type(m.__spec__.loader).__name__ != 'PackFinder')))\n"
        "from ocivendir.commands import run\nrun()\n"
    )
    stdin = "apiVersion: vendir.k14s.io/v1alpha1\nkind: Config\ndirectories: []\n"
    env = {**os.environ, "VENDIR_CACHE_DIR": str(tmp_path / "cache"), "OCIVENDIR_SERVER": "off"}  # in-process
    for _ in range(2):  # the first run creates the cache (index.json is written with the json package)
        done = subprocess.run([sys.executable, "-c", code], input=stdin, capture_output=True, text=True, check=True,
                              cwd=tmp_path, env=env)  # fmt: skip
    assert done.stdout.splitlines()[-1] == "[] ['ocivendir', 'ocivendir.codepack']"  # the two that install the pack
