"""Records behave like the dataclasses they replace: same repr, equality, hashing, ordering, errors, replace/fields."""

from __future__ import annotations

import dataclasses

import pytest

from ocivendir.record import FrozenInstanceError, field, fields, is_record, record, replace
from tests.support.fresh import fresh_python


@record
class Point:
    x: int
    y: int = 0
    tags: list[str] = field(default_factory=list)
    secret: str = field(default="", repr=False)
    note: str = field(default="", compare=False)


@dataclasses.dataclass(frozen=True, kw_only=True)
class DataPoint:
    x: int
    y: int = 0
    tags: list[str] = dataclasses.field(default_factory=list)
    secret: str = dataclasses.field(default="", repr=False)
    note: str = dataclasses.field(default="", compare=False)


@record(kw_only=False, order=True)
class Version:
    major: int
    minor: int = 0


@record
class Label:
    text: str
    note: str = field(default="", compare=False)


@record(frozen=False, kw_only=False)
class Counter:
    name: str
    count: int = 0
    started: int = -1

    def __post_init__(self) -> None:
        if self.started < 0:
            self.started = 7


def test_repr_matches_dataclasses_and_hides_repr_false_fields() -> None:
    mine = Point(x=1, tags=["a"], secret="hunter2", note="n")
    theirs = DataPoint(x=1, tags=["a"], secret="hunter2", note="n")
    assert repr(mine).replace("Point", "DataPoint", 1) == repr(theirs)
    assert "hunter2" not in repr(mine)


def test_defaults_and_fresh_factory_values_per_instance() -> None:
    a, b = Point(x=1), Point(x=2)
    assert (a.y, a.secret, a.tags) == (0, "", [])
    a.tags.append("t")
    assert b.tags == []
    assert Point.y == 0


def test_equality_and_hash_skip_compare_false_fields_and_other_classes() -> None:
    assert Point(x=1, note="a") == Point(x=1, note="b")
    assert hash(Label(text="l", note="a")) == hash(Label(text="l", note="b")) == hash(("l",))
    assert Point(x=1) != Point(x=2)
    assert Point(x=1) != DataPoint(x=1)
    assert len({Version(1, 2), Version(1, 2), Version(1, 3)}) == 2


def test_keyword_only_by_default_with_dataclass_errors() -> None:
    with pytest.raises(TypeError, match="positional"):
        Point(1)  # type: ignore[misc]
    with pytest.raises(TypeError, match="missing required argument: 'x'"):
        Point()  # type: ignore[call-arg]
    with pytest.raises(TypeError, match="unexpected keyword argument 'z'"):
        Point(x=1, z=2)  # type: ignore[call-arg]


def test_positional_records_take_arguments_in_field_order() -> None:
    assert Version(1, 2) == Version(major=1, minor=2) == Version(1, minor=2)
    with pytest.raises(TypeError, match="multiple values for argument 'major'"):
        Version(1, major=2)  # type: ignore[misc]
    with pytest.raises(TypeError, match="takes 2 positional arguments, 3 given"):
        Version(1, 2, 3)  # type: ignore[call-arg]


def test_frozen_records_refuse_assignment_and_deletion() -> None:
    point = Point(x=1)
    with pytest.raises(FrozenInstanceError, match="cannot assign to field 'x'"):
        point.x = 2  # type: ignore[misc]
    with pytest.raises(AttributeError):
        del point.y  # type: ignore[misc]
    assert point.x == 1


def test_order_compares_fields_as_a_tuple() -> None:
    assert sorted([Version(2), Version(1, 5), Version(1, 2)]) == [Version(1, 2), Version(1, 5), Version(2)]
    assert Version(1) <= Version(1) < Version(1, 1)
    with pytest.raises(TypeError):
        assert Version(1) < Point(x=1)  # type: ignore[operator]


def test_mutable_records_run_post_init_and_are_not_hashable() -> None:
    counter = Counter("c")
    assert counter.started == 7
    assert Counter("c", started=3).started == 3
    counter.count += 1
    assert counter == Counter("c", 1, 7)
    with pytest.raises(TypeError):
        hash(counter)


def test_replace_and_fields_keep_every_field_and_validate_changes() -> None:
    point = Point(x=1, y=2, tags=["t"], secret="s", note="n")
    moved = replace(point, y=3)
    assert (moved.x, moved.y, moved.tags, moved.secret, moved.note) == (1, 3, ["t"], "s", "n")
    assert point.y == 2
    with pytest.raises(TypeError, match="unexpected keyword argument 'z'"):
        replace(point, z=1)
    assert [f.name for f in fields(Point)] == ["x", "y", "tags", "secret", "note"]
    assert [f.name for f in fields(Version(1))] == ["major", "minor"]
    assert is_record(point)
    assert not is_record(Point)
    assert not is_record(DataPoint(x=1))
    with pytest.raises(TypeError, match="not a record"):
        fields(DataPoint)


def test_importing_every_module_of_the_package_defines_no_dataclass() -> None:
    code = (
        "import importlib, pkgutil, sys, ocivendir\n"
        "for m in pkgutil.walk_packages(ocivendir.__path__, 'ocivendir.'):\n"
        "    if not m.name.endswith('_docgen'):\n"
        "        importlib.import_module(m.name)\n"
        "import dataclasses\n"
        "found = [c.__module__ + '.' + c.__qualname__ for m in list(sys.modules.values())"
        " if getattr(m, '__name__', '').startswith('ocivendir')"
        " for c in vars(m).values() if isinstance(c, type) and dataclasses.is_dataclass(c)]\n"
        "print(sorted(set(found)))\n"
    )
    done = fresh_python(code)
    assert done.stdout.strip() == "[]"


@pytest.mark.parametrize("decorator", [record, dataclasses.dataclass])
@pytest.mark.parametrize("default", [[], {}, set()])
def test_a_mutable_default_shared_by_every_instance_is_refused_as_dataclasses_refuse_it(
    decorator: object, default: object
) -> None:
    namespace = {"__annotations__": {"items": "object"}, "items": default}
    with pytest.raises(ValueError, match=r"mutable default .* is not allowed: use default_factory"):
        decorator(type("Shared", (), namespace))  # type: ignore[operator]
    if decorator is record:
        with pytest.raises(ValueError, match="mutable default"):
            record(type("Shared", (), {"__annotations__": {"items": "object"}, "items": field(default=default)}))
