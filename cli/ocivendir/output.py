"""Owns: everything ocivendir writes.

Results on stdout (exact blocks, tables, one JSON envelope), progress and warnings on stderr (rich live view on a
TTY, plain lines otherwise), and errors in vendir's MultiLineError layout.
"""

from __future__ import annotations

import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence
    from io import TextIOWrapper
    from typing import IO, Any

    from rich.console import Console
    from rich.progress import Progress, TaskID

    from ocivendir.results import Event, ProgressEvent

__all__ = [
    "Output",
    "OutputMode",
    "flush_streams",
    "multiline_error",
    "pacify_streams",
    "rebind_stdio",
    "release_stdio",
    "stderr_is_tty",
    "stdio_streams",
    "write_stderr",
    "write_stdout",
]

if TYPE_CHECKING:
    Stdio = tuple[TextIOWrapper, TextIOWrapper, TextIOWrapper]  # stdin, stdout, stderr

_OPEN = "([{"
_CLOSE = ")]}"


def write_stdout(text: str) -> None:
    """Text on stdout as is (`version`, before any Output exists)."""
    _write_out(sys.stdout, text)


def _write_out(stdout: IO[str], text: str) -> None:
    """Text on stdout, flushed; a stdout that cannot take it (a full disk) is an OSError naming `/dev/stdout`.

    Go names stdout so. A reader that went away stays a bare EPIPE, which ends the command silently as click ends it.
    """
    try:
        stdout.write(text)
        stdout.flush()
    except OSError as exc:
        import errno  # noqa: PLC0415 - only on failure

        if exc.errno is None or exc.errno == errno.EPIPE or exc.filename is not None:
            raise
        raise OSError(exc.errno, exc.strerror, "/dev/stdout") from None


def write_stderr(text: str) -> None:
    """Text on stderr as is (the blank line after `^C` that closes the terminal's echo, as click writes it)."""
    sys.stderr.write(text)
    sys.stderr.flush()


class _PacifiedStream:
    """A stream whose flush ignores a reader that went away (EPIPE), as click's `_PacifyFlushWrapper`."""

    def __init__(self, wrapped: IO[str]) -> None:
        """Wrap one of the process's streams."""
        self.wrapped = wrapped

    def flush(self) -> None:
        """Flush, saying nothing if the pipe is closed."""
        import errno  # noqa: PLC0415 - only after a broken pipe

        try:
            self.wrapped.flush()
        except OSError as exc:
            if exc.errno != errno.EPIPE:
                raise

    def __getattr__(self, name: str) -> Any:  # noqa: ANN401 - the wrapped stream's attribute
        """Everything else is the wrapped stream's."""
        return getattr(self.wrapped, name)


def pacify_streams() -> None:
    """After EPIPE on stdout: the interpreter's last flush of stdout and stderr stays silent (what click does)."""
    sys.stdout = _PacifiedStream(sys.stdout)
    sys.stderr = _PacifiedStream(sys.stderr)


def stdio_streams(fds: tuple[int, int, int] = (0, 1, 2)) -> Stdio:
    """Streams for stdin, stdout and stderr over `fds`, built as the interpreter builds them at start-up.

    Same encoding and error handlers as the interpreter chose, newline `\n`, stdout line-buffered on a terminal,
    stderr always line-buffered. The descriptors stay open when the streams are closed.
    """
    import io  # noqa: PLC0415 - loaded at start-up already
    import os  # noqa: PLC0415 - loaded at start-up already

    streams = []
    for role, (fd, old) in enumerate(zip(fds, (sys.__stdin__, sys.__stdout__, sys.__stderr__), strict=True)):
        encoding = getattr(old, "encoding", None) or "utf-8"
        errors = getattr(old, "errors", None) or ("backslashreplace" if role == 2 else "strict")  # noqa: PLR2004
        binary = open(fd, "rb" if role == 0 else "wb", closefd=False)  # noqa: SIM115 - the process's own stream
        line_buffering = role == 2 or (role == 1 and os.isatty(fd))  # noqa: PLR2004
        stream = io.TextIOWrapper(binary, encoding=encoding, errors=errors, newline="\n", line_buffering=line_buffering)
        stream.mode = "r" if role == 0 else "w"  # type: ignore[misc] # as the interpreter's own streams say
        streams.append(stream)
    stdin, stdout, stderr = streams
    return stdin, stdout, stderr


def rebind_stdio(streams: Stdio | None = None) -> None:
    """`streams` (by default new ones over descriptors 0, 1 and 2) become sys.stdin/stdout/stderr and their originals.

    A server's worker calls this once the caller's descriptors are in place, and with its own idle streams after.
    """
    streams = streams or stdio_streams()
    sys.stdin, sys.stdout, sys.stderr = streams
    sys.__stdin__, sys.__stdout__, sys.__stderr__ = streams  # type: ignore[misc] # nothing of the server's stays


def release_stdio(idle: Stdio | None = None) -> None:
    """Close the streams of a served call (their descriptors already point elsewhere) and put `idle` in their place.

    A reused worker calls this after each call: a closed stream never flushes again, so nothing the call left in a
    buffer can reach the next caller's descriptors. `idle` are the worker's own, built once over a descriptor of its
    own (never 0-2, which the next call's are dup'ed onto); without them, new streams over 0, 1 and 2.
    """
    for stream in (sys.stdin, sys.stdout, sys.stderr):
        if idle is not None and stream in idle:
            continue  # one of the worker's own (a call that ran nothing of its own): it stays open
        try:
            stream.close()
        except (OSError, ValueError):
            pass
    rebind_stdio(idle)


def flush_streams() -> bool:
    """Flush stdout and stderr before the process ends without finalization; False if one could not be flushed."""
    try:
        for stream in (sys.stdout, sys.stderr):
            if stream is not None:
                stream.flush()
    except (OSError, ValueError):
        return False
    return True


def stderr_is_tty() -> bool:
    """Whether stderr is a terminal: the only thing that picks the renderer."""
    isatty = getattr(sys.stderr, "isatty", None)
    return bool(isatty and isatty())


def multiline_error(message: str) -> str:
    """go-cli-ui's MultiLineError: split at top-level ': ' before an upper-case letter, each piece indented 2 more."""
    pieces: list[str] = []
    depth = 0
    start = 0
    position = 0
    while position < len(message):
        char = message[position]
        if char in _OPEN:
            depth += 1
        elif char in _CLOSE and depth:
            depth -= 1
        elif (
            depth == 0
            and message.startswith(": ", position)
            and position + 2 < len(message)
            and message[position + 2].isupper()
        ):
            pieces.append(message[start : position + 1])
            start = position + 2
            position += 2
            continue
        position += 1
    pieces.append(message[start:])
    return "\n".join("  " * level + piece for level, piece in enumerate(pieces))


class OutputMode:
    """How to render: chosen once from flags and the streams' TTY state (a plain class: cheap to define)."""

    __slots__ = ("color", "debug", "json", "prog", "progress_lines", "quiet", "stderr_tty")

    def __init__(
        self,
        *,
        prog: str = "ocivendir",
        json: bool = False,
        quiet: bool = False,
        color: bool = True,
        debug: bool = False,
        progress_lines: bool = True,
        stderr_tty: bool = False,
    ) -> None:
        """Hold the choices."""
        self.prog = prog
        self.json = json
        self.quiet = quiet
        self.color = color
        self.debug = debug
        self.progress_lines = progress_lines
        self.stderr_tty = stderr_tty


class Output:
    """The single writer of stdout and stderr."""

    def __init__(self, mode: OutputMode, stdout: IO[str] | None = None, stderr: IO[str] | None = None) -> None:
        """Write to the given streams (the process's by default)."""
        self.mode = mode
        self.stdout = sys.stdout if stdout is None else stdout
        self.stderr = sys.stderr if stderr is None else stderr
        self._console: Console | None = None
        self._progress: Progress | None = None
        self._tasks: dict[str, TaskID] = {}

    @property
    def live(self) -> bool:
        """True when the rich view renders progress (stderr is a TTY, and neither --json nor -q)."""
        return self.mode.stderr_tty and not self.mode.json and not self.mode.quiet and self.mode.progress_lines

    def _rich(self) -> Console:
        if self._console is None:
            from rich.console import Console  # noqa: PLC0415 - rich only when a terminal asks for it

            self._console = Console(file=self.stderr, no_color=not self.mode.color, highlight=False)
        return self._console

    def event(self, event: Event) -> None:
        """Render one engine event (the engines' EventSink)."""
        from ocivendir.results import LogEvent, ProgressEvent, WarningEvent  # noqa: PLC0415 - import stays light

        if isinstance(event, WarningEvent):
            self.warning(event.message)
            return
        if self.mode.json or self.mode.quiet or not self.mode.progress_lines:
            return
        if isinstance(event, LogEvent):
            self._line(" " * event.indent + event.message)
        elif isinstance(event, ProgressEvent) and self.live:
            self._advance(event)

    def _line(self, text: str) -> None:
        if self.live:
            self._rich().print(text, markup=False)
        else:
            self.stderr.write(text + "\n")
            self.stderr.flush()

    def _advance(self, event: ProgressEvent) -> None:
        if self._progress is None:
            from rich.progress import (  # noqa: PLC0415 - rich only on a terminal
                BarColumn,
                DownloadColumn,
                Progress,
                TextColumn,
                TransferSpeedColumn,
            )

            self._progress = Progress(
                TextColumn("{task.description}"),
                BarColumn(),
                DownloadColumn(),
                TransferSpeedColumn(),
                console=self._rich(),
                transient=True,
            )
            self._progress.start()
        task = self._tasks.get(event.key)
        if task is None:
            task = self._progress.add_task(event.label, total=event.total)
            self._tasks[event.key] = task
        self._progress.update(task, completed=event.done)

    def finish_progress(self) -> None:
        """Stop the live view, if one is running."""
        if self._progress is not None:
            self._progress.stop()
            self._progress = None
            self._tasks.clear()

    def warning(self, message: str) -> None:
        """`<prog>: Warning: <msg>` on stderr, in every mode."""
        self.finish_progress()
        self.stderr.write(f"{self.mode.prog}: Warning: {message}\n")
        self.stderr.flush()

    def line(self, text: str) -> None:
        """A human line on stderr (plain or rich), none under --json or -q."""
        if not (self.mode.json or self.mode.quiet or not self.mode.progress_lines):
            self.finish_progress()
            self._line(text)

    def block(self, data: str) -> None:
        """A result block on stdout, byte for byte (vendir's blocks; not under --json)."""
        if not self.mode.json:
            _write_out(self.stdout, data)

    def table(self, headers: Sequence[str], rows: Sequence[Sequence[str]]) -> None:
        """A plain aligned table on stdout (not under --json)."""
        if self.mode.json:
            return
        widths = [len(h) for h in headers]
        for row in rows:
            widths = [max(w, len(c)) for w, c in zip(widths, row, strict=True)]
        lines = (
            "  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() + "\n" for row in (headers, *rows)
        )
        _write_out(self.stdout, "".join(lines))

    def envelope(self, command: str, status: str, result: object) -> None:
        """The --json envelope for a result: one line of sorted keys."""
        if not self.mode.json:
            return
        import json  # noqa: PLC0415 - only under --json

        from ocivendir.results import RESULT_SCHEMA_VERSION, to_dict  # noqa: PLC0415

        doc: dict[str, Any] = {
            "command": command,
            "result": to_dict(result),
            "schemaVersion": RESULT_SCHEMA_VERSION,
            "status": status,
        }
        _write_out(self.stdout, json.dumps(doc, sort_keys=True, separators=(",", ":")) + "\n")

    def error(self, command: str, code: str, message: str, hint: str | None, traceback_text: str | None) -> None:
        """An error: the JSON envelope under --json, and always `<prog>: Error: …` on stderr.

        A stdout that cannot take the envelope (full, or closed) loses it: the line on stderr still says what failed.
        """
        self.finish_progress()
        if self.mode.json:
            import contextlib  # noqa: PLC0415 - only under --json
            import json  # noqa: PLC0415

            from ocivendir.results import RESULT_SCHEMA_VERSION  # noqa: PLC0415

            error = {"code": code, "hint": hint, "message": message}
            doc = {"command": command, "error": error, "schemaVersion": RESULT_SCHEMA_VERSION, "status": "error"}
            with contextlib.suppress(OSError):
                _write_out(self.stdout, json.dumps(doc, sort_keys=True, separators=(",", ":")) + "\n")
        text = message if hint is None else f"{message} (hint: {hint})"
        if traceback_text:
            self.stderr.write(traceback_text)
        self.stderr.write(f"{self.mode.prog}: Error: {multiline_error(text)}\n")
        self.stderr.flush()
