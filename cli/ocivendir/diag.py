"""Owns: the run's logging — `logging` configured from --debug and -v, and the package's loggers.

`logger(name)` is `logging.getLogger(name)` with `enabled(level)` (`isEnabledFor`), which lets the HTTP layer skip
building a record (the --debug request dump) that would be dropped. Records go to stderr as `<logger>: <message>`;
WARNING and above are always shown, DEBUG with --debug, and -v adds the endpoint walker's INFO lines.
"""

from __future__ import annotations

import logging

__all__ = ["DEBUG", "INFO", "WARNING", "Logger", "configure", "logger"]

DEBUG, INFO, WARNING = logging.DEBUG, logging.INFO, logging.WARNING
_FORMAT = "%(name)s: %(message)s"
_HANDLER = "ocivendir"  # the name of the handler `configure` installs


class Logger(logging.LoggerAdapter[logging.Logger]):
    """`logging.getLogger(name)`, with `enabled`."""

    def enabled(self, level: int) -> bool:
        """`isEnabledFor(level)`."""
        return self.isEnabledFor(level)


def logger(name: str) -> Logger:
    """`logging.getLogger(name)` as a `Logger`."""
    return Logger(logging.getLogger(name))


def configure(*, debug: bool, verbose: bool) -> None:
    """The run's logging: DEBUG with --debug, else WARNING (and INFO from the endpoint walker with -v).

    As `logging.basicConfig` does, with one difference: the handler an earlier run in this process installed (the
    server's own, in a worker it forked) is replaced, so records go to this run's stderr at this run's level.
    """
    root = logging.getLogger()
    for earlier in [h for h in root.handlers if h.get_name() == _HANDLER]:
        root.removeHandler(earlier)
    if not root.handlers:  # else someone else (pytest's caplog) configured logging: it decides
        handler = logging.StreamHandler()  # sys.stderr as this run has it
        handler.set_name(_HANDLER)
        handler.setFormatter(logging.Formatter(_FORMAT))
        root.addHandler(handler)
        root.setLevel(DEBUG if debug else WARNING)
    if verbose and not debug:
        logging.getLogger("ocivendir.endpoints").setLevel(INFO)  # "<object> served by <endpoint>"
