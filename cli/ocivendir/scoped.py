"""Owns: context managers without contextlib, for the modules a warm run executes.

`import contextlib` costs every run ~3M instructions (its functools and collections come with _sqlite3 anyway), and
ocivendir uses two of its pieces, so here they are on their own: `contextmanager` (a one-yield generator as a `with`
block, exceptions thrown into it at the yield) and `ExitStack` (entered context managers and callbacks, unwound in
reverse). Cold-only modules may keep contextlib.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Generator, Iterator
    from contextlib import AbstractContextManager
    from types import TracebackType
    from typing import Any, ParamSpec, Self, TypeVar

    P = ParamSpec("P")
    T = TypeVar("T")

__all__ = ["ExitStack", "contextmanager"]


class _Scope:
    """One run of a generator function: up to its yield on enter, the rest (or the exception thrown in) on exit.

    Not generic (typing.Generic would import typing): `contextmanager` gives callers the typed view.
    """

    def __init__(self, generator: Generator[Any, None, None]) -> None:
        self._generator = generator

    def __enter__(self) -> Any:  # noqa: ANN401 - what the generator yields, typed by contextmanager's signature
        return next(self._generator)

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> bool:
        if exc is None:
            try:
                next(self._generator)
            except StopIteration:
                return False
            msg = "generator didn't stop"
            raise RuntimeError(msg)
        try:
            self._generator.throw(exc)
        except StopIteration as stop:
            return stop is not exc  # the generator swallowed the exception
        except BaseException as raised:
            if raised is exc:
                return False  # re-raised as is: let `with` raise it with its own traceback
            raise
        msg = "generator didn't stop after throw()"
        raise RuntimeError(msg)


def contextmanager(func: Callable[P, Iterator[T]]) -> Callable[P, AbstractContextManager[T]]:
    """`@contextmanager` as contextlib has it, for generators that yield once."""

    def scope(*args: P.args, **kwargs: P.kwargs) -> AbstractContextManager[T]:
        return _Scope(func(*args, **kwargs))  # type: ignore[arg-type]

    scope.__name__ = func.__name__
    scope.__qualname__ = func.__qualname__
    scope.__doc__ = func.__doc__
    return scope


class ExitStack:
    """Context managers entered and callbacks pushed, unwound last-first on exit; a failing one does not stop the rest.

    As in contextlib, an exception raised while unwinding replaces the pending one, chained to it as its context.
    """

    def __init__(self) -> None:
        """An empty stack."""
        self._exits: list[Callable[[BaseException | None], bool]] = []

    def enter_context(self, manager: AbstractContextManager[T]) -> T:
        """Enter `manager` and exit it when the stack unwinds."""
        value = manager.__enter__()

        def leave(exc: BaseException | None) -> bool:
            if exc is None:
                return bool(manager.__exit__(None, None, None))
            return bool(manager.__exit__(type(exc), exc, exc.__traceback__))

        self._exits.append(leave)
        return value

    def callback(self, func: Callable[..., object], *args: object) -> None:
        """Call `func(*args)` when the stack unwinds."""

        def call(_exc: BaseException | None) -> bool:
            func(*args)
            return False

        self._exits.append(call)

    def close(self) -> None:
        """Unwind now."""
        self.__exit__(None, None, None)

    def __enter__(self) -> Self:
        """The stack itself."""
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> bool:
        """Unwind; True when an exit swallowed the exception the block raised."""
        pending = exc
        suppressed = False
        while self._exits:
            try:
                if self._exits.pop()(pending):
                    pending, suppressed = None, True
            except BaseException as raised:  # noqa: BLE001 - kept and re-raised after every exit has run
                if pending is not None and raised is not pending:
                    raised.__context__ = pending
                pending, suppressed = raised, False
        if pending is not None and pending is not exc:
            raise pending
        return suppressed and exc is not None
