"""Owns: diagnostics from the warm path's modules — `logging` records, without importing `logging` to drop them.

`logger(name)` stands in for `logging.getLogger(name)` with `debug`, `info` and `warning`. While nothing has imported
`logging` (a warm run: no network stack), a record below the run's threshold is dropped on the spot; any other record
imports `logging`, applies the run's configuration once and is handed to the real logger, so handlers, levels and
pytest's caplog see exactly what they would. `logging` costs a warm run ~9 ms (traceback, textwrap, tokenize, string,
threading and five regexes), more than the run's own work. The network stack (registry/*) logs through here too, so a
tag's HEAD or a cold sync without --debug imports `logging` only for a warning; `enabled(level)` lets it skip building
a record (the --debug request dump) that would be dropped.
"""

from __future__ import annotations

import sys

__all__ = ["DEBUG", "INFO", "WARNING", "Logger", "configure", "configure_now", "logger"]

DEBUG, INFO, WARNING = 10, 20, 30
_FORMAT = "%(name)s: %(message)s"


class _Run:
    """The run's choice: the lowest level worth importing logging for, and the (debug, verbose) still to apply."""

    threshold = WARNING
    pending: tuple[bool, bool] | None = None


class Logger:
    """`logging.getLogger(name)`, fetched only when a record is worth emitting."""

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:  # noqa: D107
        self.name = name

    def debug(self, message: str, *args: object) -> None:
        """Log at DEBUG (shown with --debug)."""
        self._emit(DEBUG, message, args)

    def info(self, message: str, *args: object) -> None:
        """Log at INFO."""
        self._emit(INFO, message, args)

    def warning(self, message: str, *args: object) -> None:
        """Log at WARNING (always shown)."""
        self._emit(WARNING, message, args)

    def enabled(self, level: int) -> bool:
        """`isEnabledFor(level)`, answered without importing `logging` when the record would be dropped anyway."""
        if level < _Run.threshold and "logging" not in sys.modules:
            return False
        import logging  # noqa: PLC0415 - only for a record that may be shown

        configure_now()
        return logging.getLogger(self.name).isEnabledFor(level)

    def _emit(self, level: int, message: str, args: tuple[object, ...]) -> None:
        if level < _Run.threshold and "logging" not in sys.modules:
            return
        import logging  # noqa: PLC0415 - only for a record that may be shown

        configure_now()
        logging.getLogger(self.name).log(level, message, *args)


def logger(name: str) -> Logger:
    """The stand-in for `logging.getLogger(name)`."""
    return Logger(name)


def configure(*, debug: bool, verbose: bool) -> None:
    """The run's logging: DEBUG with --debug, else WARNING (and INFO from the endpoint walker with -v).

    With --debug or -v records are expected, so `logging` is configured now; otherwise at the first record.
    """
    _Run.threshold = DEBUG if debug else WARNING
    _Run.pending = (debug, verbose)
    if debug or verbose:
        configure_now()


def configure_now() -> None:
    """Apply the configuration `configure()` chose, once (`logging.basicConfig` as the run would have at start)."""
    if _Run.pending is None:
        return
    debug, verbose = _Run.pending
    _Run.pending = None
    import logging  # noqa: PLC0415

    logging.basicConfig(level=logging.DEBUG if debug else logging.WARNING, format=_FORMAT)
    if verbose and not debug:
        logging.getLogger("ocivendir.endpoints").setLevel(logging.INFO)  # "<object> served by <endpoint>"
