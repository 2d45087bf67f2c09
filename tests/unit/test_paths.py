"""fs/paths.py: paths are resolved first (`..`, trailing slashes, symlinks), then checked against what must survive."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from ocivendir.fs.paths import Guard, UnsafePath, leaves, pure, replace_target, resolved, scoped_path, split, within


@pytest.fixture
def tree(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """tmp/work (the cwd) with a subdirectory, a file, links to itself, its parent and elsewhere; tmp/cache."""
    work = tmp_path / "work"
    (work / "sub").mkdir(parents=True)
    (work / "file").write_text("x")
    (work / "self").symlink_to(".")
    (work / "up").symlink_to("..")
    (work / "dangling").symlink_to("missing")
    (tmp_path / "elsewhere").mkdir()
    (work / "away").symlink_to(tmp_path / "elsewhere")
    (tmp_path / "cache").mkdir()
    monkeypatch.chdir(work)
    return work


def guards(tree: Path) -> list[Guard]:
    return [Guard.of(tree, "the working directory"), Guard.of(tree.parent / "cache", "the cache", inside=True)]


@pytest.mark.parametrize(
    ("given", "reason"),
    [
        (".", "is the working directory"),
        ("./", "is the working directory"),
        (".//", "is the working directory"),
        ("sub/..", "is the working directory"),
        ("sub/../", "is the working directory"),
        ("self", "is the working directory"),
        ("self/", "is the working directory"),
        ("..", "contains the working directory"),
        ("up", "contains the working directory"),
        ("/", "contains the working directory"),
        ("../cache", "is the cache"),
        ("../cache/blobs/x", "is inside the cache"),
        ("up/cache", "is the cache"),
    ],
)
def test_what_a_path_resolves_to_is_checked(tree: Path, given: str, reason: str) -> None:
    with pytest.raises(UnsafePath, match=f"which {reason}"):
        replace_target(given, guards(tree))
    with pytest.raises(UnsafePath, match=f"which {reason}"):
        replace_target(Path(os.getcwd(), given) if given != "/" else given, guards(tree))  # noqa: PTH109


def test_an_existing_non_directory_is_refused_only_when_asked(tree: Path) -> None:
    for given in ("file", "dangling"):
        with pytest.raises(UnsafePath, match="exists and is not a directory"):
            replace_target(given, guards(tree), directory_only=True)
        assert replace_target(given, guards(tree)) == str(tree / given)


def test_the_placement_is_the_resolved_parent_and_the_last_name(tree: Path) -> None:
    assert replace_target("sub/out/", guards(tree)) == str(tree / "sub/out")
    assert replace_target("self/out", guards(tree)) == str(tree / "out")
    # a final symlink is replaced by the swap, not followed: its target is spared
    assert replace_target("away", guards(tree)) == str(tree / "away")


def test_within_keeps_a_target_strictly_inside(tree: Path) -> None:
    root = Guard.of(tree, "the working directory")
    assert replace_target("sub/x", [], within=root) == str(tree / "sub/x")
    for given, reason in (("away", "is outside"), ("up/x", "is outside"), ("self", "is the working")):
        with pytest.raises(UnsafePath, match=reason):
            replace_target(given, [], within=root)


@pytest.mark.parametrize(
    ("relative", "expected"),
    [("a", False), ("a/b/../c", False), (".", False), ("0", False), ("..", True), ("../x", True),
     ("a/../../x", True), ("/abs", True), ("", False)],
)  # fmt: skip
def test_leaves_is_lexical(relative: str, expected: bool) -> None:
    assert leaves(relative) is expected


def test_scoped_path_refuses_escapes(tmp_path: Path) -> None:
    assert scoped_path(tmp_path, "a/b") == str(tmp_path / "a/b")
    assert scoped_path(str(tmp_path) + "/", "a//b/") == str(tmp_path / "a/b")
    for bad in ("../x", "a/../../x", "/etc/passwd"):
        with pytest.raises(ValueError, match="leaves"):
            scoped_path(tmp_path, bad)


@pytest.mark.parametrize(
    ("inner", "outer", "expected"),
    [("/a/b", "/a/b", True), ("/a/b/c", "/a/b", True), ("/a/bc", "/a/b", False), ("/a/b", "/a/bc", False),
     ("/a", "/a/b", False), ("/a/b/", "/a/b", True), ("/a/b", "/a/b/", True), ("/a/bc/", "/a/b/", False),
     ("/a//b/./c", "/a/b", True), ("/x", "/", True), ("/", "/", True), ("/", "/a", False),
     ("a/b", "/a", False), ("/a/b", "a", False), ("a/b", "a", True), ("ab", "a", False)],
)  # fmt: skip
def test_within_compares_whole_names_never_a_string_prefix(inner: str, outer: str, expected: bool) -> None:
    assert within(inner, outer) is expected


def test_a_guard_is_checked_on_the_resolved_path_of_a_symlinked_parent(tmp_path: Path) -> None:
    (tmp_path / "real/b").mkdir(parents=True)
    (tmp_path / "real/bc").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "real")
    guard = Guard.of(tmp_path / "link/b/", "the cache", inside=True)
    assert guard.path == str(tmp_path / "real/b")  # resolved first, then checked
    assert guard.refusal(str(tmp_path / "real/b/x")) == f"is inside the cache '{tmp_path / 'real/b'}'"
    assert guard.refusal(str(tmp_path / "real/bc")) is None  # a sibling sharing a prefix is not inside
    assert guard.refusal(str(tmp_path / "real")) == f"contains the cache '{tmp_path / 'real/b'}'"
    with pytest.raises(UnsafePath, match="is inside the cache"):
        replace_target(tmp_path / "link/b/out", [guard])
    assert replace_target(tmp_path / "link/bc/out", [guard]) == str(tmp_path / "real/bc/out")


@pytest.mark.parametrize(
    ("given", "spelled", "parent", "name"),
    [("a/b", "a/b", "a", "b"), ("a//b/", "a/b", "a", "b"), ("./a/./b/.", "a/b", "a", "b"), ("/", "/", "/", ""),
     ("a", "a", ".", "a"), ("", ".", ".", ""), (".", ".", ".", ""), ("a/../b", "a/../b", "a/..", "b"),
     ("/x/", "/x", "/", "x"), ("a/.", "a", ".", "a"), ("./", ".", ".", ""), ("/.", "/", "/", ""), ("./a", "a", ".", "a"),
     ("a/./b", "a/b", "a", "b"), ("..", "..", ".", ".."), ("/a/b", "/a/b", "/a", "b"), (".a/b.", ".a/b.", ".a", "b.")],
)  # fmt: skip
def test_pure_and_split_spell_paths_as_pathlib_does(given: str, spelled: str, parent: str, name: str) -> None:
    assert pure(given) == spelled == str(Path(given))
    assert split(given) == (parent, name) == (str(Path(given).parent), Path(given).name)


def test_a_leading_double_slash_is_the_root_where_pathlib_keeps_it_apart() -> None:
    """Why `pure` is not `str(PurePosixPath(...))`: on Linux `//cache` is `/cache`, and a guard must see one directory."""
    assert str(Path("//cache")) == "//cache"
    assert pure("//cache") == "/cache"
    assert within("//cache/x", "/cache")
    assert Guard("/cache", "the cache", inside=True).refusal(pure("//cache/x")) == "is inside the cache '/cache'"


@pytest.mark.parametrize(
    "given",
    ["self", "self/self/sub", "up/work/sub", "away", "away/", "sub/../file", "file", "dangling", "missing/x", "", ".",
     "away/new/..", "sub//", "up", "new", "self/new", "up/work/new", "file/x", "dangling/x", "new/", "sub/new/.."],
)  # fmt: skip
def test_resolved_is_realpath(tree: Path, given: str) -> None:
    """The kernel's resolution (where the path exists) and realpath's own walk (elsewhere) give realpath's answer."""
    assert resolved(given) == os.path.realpath(given)
    assert resolved(tree / given) == os.path.realpath(tree / given)


def test_within_answers_as_commonpath_does_for_every_pair() -> None:
    """Containment by whole names, for absolute, relative, `..`, `.`, doubled and trailing slashes alike."""
    import posixpath  # noqa: PLC0415

    cases = ["/", "/a", "/a/b", "/a/bc", "/ab", "a", "a/b", ".", "..", "../a", "a/..", "/a/../b", "//a", "/a/", "a/./b",
             "./a", "", "/a/b/c", "b"]  # fmt: skip
    for inner in cases:
        for outer in cases:
            spelled_inner, spelled_outer = pure(inner), pure(outer)
            try:
                expected = spelled_inner == spelled_outer or posixpath.commonpath((spelled_outer, spelled_inner)) == (
                    spelled_outer
                )
            except ValueError:
                expected = False
            assert within(inner, outer) is expected, (inner, outer)


@pytest.mark.parametrize("given", ["..", "../x", ".", "x"])
def test_a_relative_path_in_a_removed_working_directory_is_an_error_as_for_realpath(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, given: str
) -> None:
    """The kernel still finds `..` of a removed directory; realpath has no working directory to join it to, nor here."""
    gone = tmp_path / "gone"
    gone.mkdir()
    monkeypatch.chdir(gone)
    gone.rmdir()
    with pytest.raises(FileNotFoundError):
        os.path.realpath(given)
    with pytest.raises(FileNotFoundError):
        resolved(given)


def test_a_parent_given_as_the_within_guard_was_made_is_resolved_once(
    tree: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """kapp-controller's `path: "0"` in its working directory: the directory is resolved for its guard, not again."""
    asked: list[str] = []
    real = os.path.realpath

    def counting(path: str, *args: object, **kwargs: object) -> str:
        asked.append(os.fspath(path))
        return real(path, *args, **kwargs)  # type: ignore[arg-type]

    root, expected = Guard.of(str(tree), "the working directory"), f"{os.path.realpath(tree)}/0"
    monkeypatch.setattr(os.path, "realpath", counting)
    target = replace_target(f"{tree}/0", [], within=root)
    assert target == expected
    assert asked == [f"{tree}/0"]  # the full resolution only
    asked.clear()
    assert replace_target(f"{tree}/self/0", [], within=root) == target  # another parent: resolved as before
    assert asked == [f"{tree}/self", f"{tree}/self/0"]
