"""Owns: `record`, the value-class decorator — the part of `dataclasses` this project uses, without its start-up cost.

A record gets what `@dataclass` would generate — `__init__` (keyword-only by default, defaults and factories, then
`__post_init__`), `__repr__`, `__eq__`, `__hash__` when frozen, ordering on request, frozen `__setattr__` — and
`fields()` / `replace()` work on it. `dataclasses` compiles every generated method with `exec` and imports `inspect`
(with `ast`, `dis`, `tokenize`); the ~60 classes a warm sync defines cost it more than the sync itself. A record's
methods are shared functions that walk the class's field table, so defining one costs a look at its annotations.
mypy checks records as dataclasses (`typing.dataclass_transform`).
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any, TypeVar, dataclass_transform

    T = TypeVar("T")
else:  # the typing module stays off the warm path; at run time the marker is a no-op

    def dataclass_transform(**_options: object) -> object:
        return lambda function: function


__all__ = ["FrozenInstanceError", "RecordField", "field", "fields", "is_record", "record", "replace"]

_MISSING: Any = object()
_CLASSVAR = ("ClassVar", "typing.ClassVar")


class FrozenInstanceError(AttributeError):
    """An attempt to assign to a field of a frozen record (like `dataclasses.FrozenInstanceError`)."""


class RecordField:
    """One field of a record: its name, default or factory, and whether repr and comparisons include it."""

    __slots__ = ("compare", "default", "factory", "name", "repr")

    def __init__(self, default: Any, factory: Callable[[], Any] | None, *, show: bool, compare: bool) -> None:  # noqa: ANN401, D107
        self.name = ""
        self.default = default
        self.factory = factory
        self.repr = show
        self.compare = compare

    def fallback(self, cls: type) -> Any:  # noqa: ANN401 - a field's value is of any type
        """The value of this field when `__init__` was not given one: the factory's, the default, or a TypeError."""
        if self.factory is not None:
            return self.factory()
        if self.default is _MISSING:
            raise TypeError(f"{cls.__qualname__}() missing required argument: {self.name!r}")
        return self.default

    def __repr__(self) -> str:
        """`RecordField('name')`."""
        return f"RecordField({self.name!r})"


def field(
    *,
    default: Any = _MISSING,  # noqa: ANN401
    default_factory: Callable[[], Any] | None = None,
    repr: bool = True,  # noqa: A002
    compare: bool = True,
) -> Any:  # noqa: ANN401
    """A field with options: `default` or `default_factory`, `repr=False` (secrets), `compare=False`."""
    return RecordField(default, default_factory, show=repr, compare=compare)


def fields(value: object) -> tuple[RecordField, ...]:
    """The fields of a record class or instance, in definition order."""
    table: tuple[RecordField, ...] | None = getattr(value, "__record_fields__", None)
    if table is None:
        raise TypeError(f"not a record: {value!r}")
    return table


def is_record(value: object) -> bool:
    """Whether `value` is a record instance (not a record class)."""
    return hasattr(type(value), "__record_fields__")


def replace(value: T, /, **changes: Any) -> T:  # noqa: ANN401
    """A copy of the record `value` with `changes` applied (validated by `__init__` like a new instance)."""
    for spec in fields(value):
        if spec.name not in changes:
            changes[spec.name] = getattr(value, spec.name)
    return type(value)(**changes)


def _table(cls: type) -> tuple[RecordField, ...]:
    """The fields declared by annotations of `cls` (after those of record bases); class attributes become defaults.

    Read from the classes' own `__dict__`s: a `getattr` that misses on a class formats an AttributeError, and a warm
    sync defines some 60 records.
    """
    table = {spec.name: spec for base in cls.__mro__[-2:0:-1] for spec in base.__dict__.get("__record_fields__", ())}
    # the class's own annotations (inspect.get_annotations would import inspect, which records exist to avoid)
    own = cls.__dict__
    for name, annotation in own.get("__annotations__", {}).items():
        if str(annotation).startswith(_CLASSVAR):
            continue
        value = own.get(name, _MISSING)
        if isinstance(value, RecordField):  # field(...): the class attribute becomes its default, or goes
            spec = value
            if spec.default is not _MISSING:
                setattr(cls, name, spec.default)
            else:
                delattr(cls, name)
        else:  # a plain default (already the class attribute) or none
            spec = RecordField(value, None, show=True, compare=True)
        spec.name = name
        if spec.default is not _MISSING and type(spec.default).__hash__ is None:  # dataclasses' rule
            raise ValueError(
                f"mutable default {type(spec.default)} for field {name} is not allowed: use default_factory"
            )
        table[name] = spec
    return tuple(table.values())


def _inherited(cls: type, name: str) -> Any:  # noqa: ANN401 - whatever the class defines under that name
    """`getattr(cls, name, None)` for a name most records do not define, without raising and formatting a miss."""
    for klass in cls.__mro__:
        if name in klass.__dict__:
            return getattr(cls, name)
    return None


def _make_init(cls: type, table: tuple[RecordField, ...], positional: int) -> Callable[..., None]:
    names = [spec.name for spec in table[:positional]]
    setter = object.__setattr__
    post_init: Callable[[object], None] | None = _inherited(cls, "__post_init__")

    def __init__(self: object, *args: object, **kwargs: object) -> None:  # noqa: N807
        if args:
            _take_positional(cls, names, args, kwargs)
        for spec in table:
            value = kwargs.pop(spec.name, _MISSING)
            setter(self, spec.name, spec.fallback(cls) if value is _MISSING else value)
        if kwargs:
            raise TypeError(f"{cls.__qualname__}() got an unexpected keyword argument {next(iter(kwargs))!r}")
        if post_init is not None:
            post_init(self)

    return __init__


def _take_positional(cls: type, names: list[str], args: tuple[object, ...], kwargs: dict[str, object]) -> None:
    if len(args) > len(names):
        raise TypeError(f"{cls.__qualname__}() takes {len(names)} positional arguments, {len(args)} given")
    for name, value in zip(names, args, strict=False):
        if name in kwargs:
            raise TypeError(f"{cls.__qualname__}() got multiple values for argument {name!r}")
        kwargs[name] = value


def _repr(self: object) -> str:
    shown = ", ".join(f"{s.name}={getattr(self, s.name)!r}" for s in fields(self) if s.repr)
    return f"{type(self).__qualname__}({shown})"


def _key(self: object) -> tuple[object, ...]:
    return tuple([getattr(self, s.name) for s in fields(self) if s.compare])


def _eq(self: object, other: object) -> bool:
    return _key(self) == _key(other) if other.__class__ is self.__class__ else NotImplemented


def _hash(self: object) -> int:
    return hash(_key(self))


def _frozen_setattr(self: object, name: str, _value: object) -> None:
    raise FrozenInstanceError(f"cannot assign to field {name!r} of frozen {type(self).__qualname__}")


def _frozen_delattr(self: object, name: str) -> None:
    raise FrozenInstanceError(f"cannot delete field {name!r} of frozen {type(self).__qualname__}")


def _lt(self: object, other: object) -> bool:
    return _key(self) < _key(other) if other.__class__ is self.__class__ else NotImplemented


def _le(self: object, other: object) -> bool:
    return _key(self) <= _key(other) if other.__class__ is self.__class__ else NotImplemented


def _gt(self: object, other: object) -> bool:
    return _key(self) > _key(other) if other.__class__ is self.__class__ else NotImplemented


def _ge(self: object, other: object) -> bool:
    return _key(self) >= _key(other) if other.__class__ is self.__class__ else NotImplemented


def _build(cls: type[T], *, frozen: bool, kw_only: bool, order: bool) -> type[T]:
    table = _table(cls)
    methods: dict[str, object] = {
        "__record_fields__": table,
        "__match_args__": () if kw_only else tuple(spec.name for spec in table),
        "__init__": _make_init(cls, table, 0 if kw_only else len(table)),
        "__repr__": _repr,
        "__eq__": _eq,
        "__hash__": _hash if frozen else None,
    }
    if frozen:
        methods |= {"__setattr__": _frozen_setattr, "__delattr__": _frozen_delattr}
    if order:
        methods |= {"__lt__": _lt, "__le__": _le, "__gt__": _gt, "__ge__": _ge}
    for name, method in methods.items():
        if name not in cls.__dict__ or (name == "__hash__" and cls.__dict__[name] is None):
            setattr(cls, name, method)
    return cls


@dataclass_transform(frozen_default=True, kw_only_default=True, field_specifiers=(field,))
def record(cls: type[T] | None = None, /, *, frozen: bool = True, kw_only: bool = True, order: bool = False) -> Any:  # noqa: ANN401 - the class or a decorator; mypy types records through dataclass_transform
    """Make `cls` a record: frozen and keyword-only unless told otherwise (`frozen=False`, `kw_only=False`)."""
    if cls is None:
        return lambda target: _build(target, frozen=frozen, kw_only=kw_only, order=order)
    return _build(cls, frozen=frozen, kw_only=kw_only, order=order)
