"""Owns: `main()` — vendir and imgpkg modes (argv[0] named so), the fast paths, exceptions → messages and exit codes.

The single place where exceptions become `<prog>: Error: …` and exit codes (worded by `commands/ending.py`).
`version`, vendir mode's `sync` (`commands/vendirargs.py`) and `pull` in ocivendir and imgpkg modes
(`commands/pullargs.py`) run without click when their parsers read the command line exactly as click would, and end
as click ends a command; everything else goes through the click tree in `commands/root.py`. This module imports
nothing beyond the standard library's start-up set at import time, and the error types only once `main()` runs: a
call the server takes (`run()`) never loads them.
"""

from __future__ import annotations

import os
import sys

from ocivendir import version_line

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any, NoReturn

    from ocivendir.commands.runtime import Run

__all__ = ["main", "run"]

_VERSION_ARGS = (["version"], ["--version"])


_PROGS = ("vendir", "imgpkg")  # argv[0] names that select a Go tool's mode


def _fail(state: dict[str, Any], exc: BaseException, code: str, message: str, hint: str | None, exit_code: int) -> int:
    from ocivendir.commands.ending import fail  # noqa: PLC0415 - only on failure

    return fail(state, exc, code, message, hint, exit_code)


def _as_click(state: dict[str, Any], body: Callable[[], None]) -> int:
    """A fast path's run, its end framed as click frames a command's: `^C` or EOF is `Aborted`, EPIPE a silent 1."""
    try:
        body()
    except (EOFError, KeyboardInterrupt):
        from ocivendir.output import write_stderr  # noqa: PLC0415

        write_stderr("\n")
        return _fail(state, KeyboardInterrupt(), "aborted", "Aborted", None, 1)
    except OSError as exc:
        import errno  # noqa: PLC0415

        if exc.errno != errno.EPIPE:
            raise
        from ocivendir.output import pacify_streams  # noqa: PLC0415

        pacify_streams()
        return 1
    return 0


def _fast(args: list[str], state: dict[str, Any]) -> Callable[[], None] | None:
    """The run of a command line that a fast path reads exactly as click would (vendir's `sync`, `pull`), or None."""
    if state["vendir_mode"]:
        from ocivendir.commands.vendirargs import parse_sync  # noqa: PLC0415

        sync = parse_sync(args)
        if sync is None:
            return None
        from ocivendir.commands import syncrun  # noqa: PLC0415

        return lambda: syncrun.run_sync(sync[0], lambda: _start(sync[1], state, vendir_quiet=True))
    from ocivendir.commands.pullargs import parse_pull  # noqa: PLC0415

    pull = parse_pull(args)
    if pull is None:
        return None
    from ocivendir.commands import pullrun  # noqa: PLC0415

    return lambda: pullrun.run_pull(pull[0], lambda: _start(pull[1], state))


def _start(given: dict[str, Any], state: dict[str, Any], *, vendir_quiet: bool = False) -> Run:
    """The Run of a fast path: the flags it read, named as click names them."""
    from ocivendir.commands.runtime import Run  # noqa: PLC0415

    return Run.from_flags(given, str(state["prog"]), vendir_quiet=vendir_quiet)


def _run(args: list[str], state: dict[str, Any]) -> int:
    """The fast paths first (no click), else the click tree."""
    if args in _VERSION_ARGS:
        from ocivendir.output import write_stdout  # noqa: PLC0415

        write_stdout(version_line(state["prog"]) + "\n")
        return 0
    if args[:1] in (["sync"], ["pull"]):
        body = _fast(args, state)
        if body is not None:
            return _as_click(state, body)
    from ocivendir.commands.root import run_click  # noqa: PLC0415 - click only when no fast path applies

    return run_click(args, state)


def main(argv: list[str] | None = None, prog: str | None = None) -> NoReturn:
    """Run the CLI and exit with ocivendir's codes (vendir and imgpkg modes: 0 or 1)."""
    from ocivendir.commands.goflags import normalize  # noqa: PLC0415 - avoids an import cycle
    from ocivendir.errors import OcivendirError, os_reason  # noqa: PLC0415 - not on a served call's path

    args = normalize(sys.argv[1:] if argv is None else list(argv))
    name = (prog or sys.argv[0]).rpartition("/")[2]
    program = name if name in _PROGS else "ocivendir"
    state: dict[str, Any] = {
        "prog": program,
        "vendir_mode": program == "vendir",
        "json": "--json" in args,
        "debug": "--debug" in args,
        "args": args,
        "entry": main,  # what a server's workers run for each call (`server start --foreground`)
    }
    try:
        sys.exit(_run(args, state))
    except OcivendirError as exc:
        sys.exit(_fail(state, exc, exc.code, exc.message, exc.hint, exc.exit_code))
    except KeyboardInterrupt as exc:
        sys.exit(_fail(state, exc, "interrupted", "Interrupted", None, 130))
    except OSError as exc:
        sys.exit(_fail(state, exc, "os-error", os_reason(exc), None, 1))
    except Exception as exc:  # noqa: BLE001 - the one place every failure becomes a message and an exit code
        hint = "run again with --debug for a traceback"
        sys.exit(_fail(state, exc, "internal-error", f"{type(exc).__name__}: {exc}", hint, 1))


def run() -> NoReturn:
    """The program: the console script, `python -m ocivendir` and the dist build call this, tests call `main()`."""
    _through_server()
    main()


def _through_server() -> None:
    """Hand the call to the resident server when one should serve it (`server/`); return only to run in-process.

    Once the server has answered, the client ends with `os._exit`: it has flushed nothing of its own (the worker wrote
    to the caller's descriptors) and holds no file, lock or thread, and skipping interpreter teardown is about 5 ms of
    a served call's ~41 ms of CPU (docs/performance.md "What a warm run costs").
    """
    from ocivendir.server.place import wanted  # noqa: PLC0415 - os and stat only

    if wanted(sys.argv):
        from ocivendir.server.client import call_server  # noqa: PLC0415 - socket, only when a server is wanted

        status = call_server(sys.argv)
        if status is not None:
            os._exit(status)


def __getattr__(name: str) -> Any:  # noqa: ANN401 - the click group, loaded on first use
    """`ocivendir.commands.cli` (the click root group) without importing click when only `main` is wanted."""
    if name == "cli":
        from ocivendir.commands.root import cli  # noqa: PLC0415

        return cli
    raise AttributeError(name)
