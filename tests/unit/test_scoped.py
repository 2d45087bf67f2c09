"""scoped.py behaves as the contextlib pieces it replaces: same order, same exceptions, same suppression."""

from __future__ import annotations

import contextlib

import pytest

from ocivendir.scoped import ExitStack, contextmanager
from tests.support.fresh import fresh_python

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterator


@contextmanager
def _tracked(log: list[str], name: str, *, swallow: bool = False) -> Iterator[str]:
    """Logs enter and exit; with `swallow`, eats a ValueError thrown in at the yield."""
    log.append(f"enter {name}")
    try:
        yield name
    except ValueError:
        log.append(f"caught {name}")
        if not swallow:
            raise
    finally:
        log.append(f"exit {name}")


def test_contextmanager_runs_the_generator_around_the_block_and_keeps_its_name() -> None:
    log: list[str] = []
    with _tracked(log, "a") as value:
        log.append(f"body {value}")
    assert log == ["enter a", "body a", "exit a"]
    assert _tracked.__name__ == "_tracked"
    assert _tracked.__doc__ is not None
    assert "swallow" in _tracked.__doc__


def test_an_exception_is_thrown_in_at_the_yield_and_raised_as_is_or_swallowed() -> None:
    log: list[str] = []
    error = ValueError("boom")
    with pytest.raises(ValueError, match="boom") as caught, _tracked(log, "a"):
        raise error
    assert caught.value is error
    assert log == ["enter a", "caught a", "exit a"]
    with _tracked(log, "b", swallow=True):
        raise ValueError("eaten")
    assert log[-2:] == ["caught b", "exit b"]


def test_an_exception_the_generator_raises_instead_replaces_the_one_thrown_in() -> None:
    @contextmanager
    def translate() -> Iterator[None]:
        try:
            yield
        except KeyError as exc:
            raise LookupError("translated") from exc

    with pytest.raises(LookupError, match="translated") as caught, translate():
        raise KeyError("k")
    assert isinstance(caught.value.__cause__, KeyError)


def test_a_generator_that_yields_twice_is_refused() -> None:
    @contextmanager
    def twice() -> Iterator[None]:
        yield
        yield

    with pytest.raises(RuntimeError, match="didn't stop"), twice():
        pass


@pytest.mark.parametrize("stack_type", [ExitStack, contextlib.ExitStack])
def test_exit_stack_unwinds_last_first_runs_every_exit_and_raises_the_last_failure(stack_type: type) -> None:
    log: list[str] = []

    def fail(message: str) -> None:
        log.append(message)
        raise OSError(message)

    def unwind() -> None:
        with stack_type() as stack:
            stack.enter_context(_tracked(log, "a"))
            stack.callback(fail, "first")
            stack.callback(fail, "second")
            assert stack.enter_context(_tracked(log, "b")) == "b"

    with pytest.raises(OSError, match="first"):
        unwind()
    assert log == ["enter a", "enter b", "exit b", "second", "first", "exit a"]


@pytest.mark.parametrize("stack_type", [ExitStack, contextlib.ExitStack])
def test_exit_stack_passes_the_block_exception_to_its_contexts_which_may_swallow_it(stack_type: type) -> None:
    log: list[str] = []
    with stack_type() as stack:
        stack.enter_context(_tracked(log, "a"))
        stack.enter_context(_tracked(log, "b", swallow=True))
        raise ValueError("eaten by b")
    assert log == ["enter a", "enter b", "caught b", "exit b", "exit a"]
    stack = stack_type()
    stack.enter_context(_tracked(log, "c"))
    stack.close()
    stack.close()  # a second close has nothing left to unwind
    assert log[-2:] == ["enter c", "exit c"]


def test_importing_scoped_imports_neither_contextlib_nor_functools() -> None:
    probe = "import sys\nimport ocivendir.scoped\nprint(sorted({'contextlib', 'functools', 'collections'} & set(sys.modules)))"
    done = fresh_python(probe)
    assert done.stdout.strip() == "[]"
