"""diag: the run's logging configuration, and records that look and route as logging's do."""

from __future__ import annotations

import logging

import pytest

from ocivendir import diag
from tests.support.fresh import fresh_python


def test_records_below_the_runs_level_are_dropped() -> None:
    done = fresh_python(
        "from ocivendir import diag\n"
        "diag.configure(debug=False, verbose=False)\n"
        "diag.logger('ocivendir.cache').debug('hidden %s', 1)\n"
        "diag.logger('ocivendir.cache').info('hidden too')\n"
    )
    assert (done.stdout, done.stderr) == ("", "")


def test_enabled_says_no_without_debug_and_yes_under_debug() -> None:
    check = "print(diag.logger('ocivendir.http').enabled(diag.DEBUG))\n"
    quiet = fresh_python(f"from ocivendir import diag\ndiag.configure(debug=False, verbose=False)\n{check}")
    loud = fresh_python(f"from ocivendir import diag\ndiag.configure(debug=True, verbose=False)\n{check}")
    assert (quiet.stdout, loud.stdout) == ("False\n", "True\n")


def test_a_warning_is_printed_in_the_runs_format() -> None:
    done = fresh_python(
        "from ocivendir import diag\n"
        "diag.configure(debug=False, verbose=False)\n"
        "diag.logger('ocivendir.content').debug('hidden')\n"
        "diag.logger('ocivendir.content').warning('%s; dropping it', 'bad row')\n"
    )
    assert done.stderr == "ocivendir.content: bad row; dropping it\n"


def test_debug_shows_debug_records() -> None:
    done = fresh_python(
        "from ocivendir import diag\n"
        "diag.configure(debug=True, verbose=False)\n"
        "diag.logger('ocivendir.runtime').debug('keychain %s', 'k')\n"
    )
    assert (done.stdout, done.stderr) == ("", "ocivendir.runtime: keychain k\n")


def test_verbose_shows_the_endpoint_walkers_info_lines_only() -> None:
    done = fresh_python(
        "import logging\nfrom ocivendir import diag\n"
        "diag.configure(debug=False, verbose=True)\n"
        "logging.getLogger('ocivendir.endpoints').info('served by mirror')\n"
        "diag.logger('ocivendir.cache').info('not shown')\n"
    )
    assert done.stderr == "ocivendir.endpoints: served by mirror\n"


def test_logging_levels_decide(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.DEBUG, logger="ocivendir.cache"):
        diag.logger("ocivendir.cache").debug("ignoring the %s row", "ref")
    assert [(r.name, r.levelno, r.getMessage()) for r in caplog.records] == [
        ("ocivendir.cache", logging.DEBUG, "ignoring the ref row")
    ]


def test_a_later_run_in_the_same_process_logs_to_its_own_stderr_at_its_own_level() -> None:
    """A server's worker runs `main()` in the process whose own run configured logging first."""
    done = fresh_python(
        "import io, sys\nfrom ocivendir import diag\n"
        "server = sys.stderr = io.StringIO()\n"
        "diag.configure(debug=False, verbose=False)\n"
        "sys.stderr = sys.__stderr__\n"
        "diag.configure(debug=True, verbose=False)\n"
        "diag.logger('ocivendir.http').debug('--> GET')\n"
        "print(repr(server.getvalue()))\n"
    )
    assert (done.stdout, done.stderr) == ("''\n", "ocivendir.http: --> GET\n")
