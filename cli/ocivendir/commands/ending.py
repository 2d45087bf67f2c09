"""Owns: how a command fails in each program's mode — the error's `<prog>: Error: …` and its exit code.

`main()` (`commands/__init__.py`) turns exceptions into these, and so does the click tree (`commands/root.py`) for
click's own; both import this module, which imports neither, so the entry point and the click tree do not name each
other.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

__all__ = ["fail", "go_mode"]


def go_mode(state: dict[str, Any]) -> bool:
    """Whether the program runs as one of the Go tools (vendir or imgpkg): exit codes 0 or 1."""
    return str(state["prog"]) != "ocivendir"


def fail(state: dict[str, Any], exc: BaseException, code: str, message: str, hint: str | None, exit_code: int) -> int:
    """Write the error (`--json`: as JSON; `--debug`: with its traceback) and return the mode's exit code."""
    import traceback  # noqa: PLC0415 - only on failure

    from ocivendir.flagscan import command_of  # noqa: PLC0415
    from ocivendir.output import Output, OutputMode  # noqa: PLC0415

    mode = OutputMode(prog=state["prog"], json=bool(state.get("json")))
    tb = "".join(traceback.format_exception(exc)) if state.get("debug") else None
    Output(mode).error(command_of(state.get("args", [])), code, message, hint, tb)
    return (1 if exit_code else 0) if go_mode(state) else exit_code
