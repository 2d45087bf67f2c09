"""diag: records below the run's level cost no `logging` import; records shown look and route as logging's do."""

from __future__ import annotations

import logging

import pytest

from ocivendir import diag
from tests.support.fresh import fresh_python


def test_a_dropped_record_does_not_import_logging() -> None:
    done = fresh_python(
        "import sys\nfrom ocivendir import diag\n"
        "diag.configure(debug=False, verbose=False)\n"
        "diag.logger('ocivendir.cache').debug('hidden %s', 1)\n"
        "diag.logger('ocivendir.cache').info('hidden too')\n"
        "print('logging' in sys.modules)\n"
    )
    assert (done.stdout, done.stderr) == ("False\n", "")


def test_enabled_says_no_without_importing_logging_and_yes_under_debug() -> None:
    check = "print(diag.logger('ocivendir.http').enabled(diag.DEBUG), 'logging' in sys.modules)\n"
    quiet = fresh_python(f"import sys\nfrom ocivendir import diag\ndiag.configure(debug=False, verbose=False)\n{check}")
    loud = fresh_python(f"import sys\nfrom ocivendir import diag\ndiag.configure(debug=True, verbose=False)\n{check}")
    assert (quiet.stdout, loud.stdout) == ("False False\n", "True True\n")


def test_a_warning_imports_logging_and_is_printed_in_the_runs_format() -> None:
    done = fresh_python(
        "from ocivendir import diag\n"
        "diag.configure(debug=False, verbose=False)\n"
        "diag.logger('ocivendir.content').debug('hidden')\n"
        "diag.logger('ocivendir.content').warning('%s; dropping it', 'bad row')\n"
    )
    assert done.stderr == "ocivendir.content: bad row; dropping it\n"


def test_debug_configures_logging_at_once_and_shows_debug_records() -> None:
    done = fresh_python(
        "import sys\nfrom ocivendir import diag\n"
        "diag.configure(debug=True, verbose=False)\n"
        "print('logging' in sys.modules)\n"
        "diag.logger('ocivendir.runtime').debug('keychain %s', 'k')\n"
    )
    assert (done.stdout, done.stderr) == ("True\n", "ocivendir.runtime: keychain k\n")


def test_verbose_shows_the_endpoint_walkers_info_lines_only() -> None:
    done = fresh_python(
        "import logging\nfrom ocivendir import diag\n"
        "diag.configure(debug=False, verbose=True)\n"
        "logging.getLogger('ocivendir.endpoints').info('served by mirror')\n"
        "diag.logger('ocivendir.cache').info('not shown')\n"
    )
    assert done.stderr == "ocivendir.endpoints: served by mirror\n"


def test_once_logging_is_imported_its_levels_decide(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.DEBUG, logger="ocivendir.cache"):
        diag.logger("ocivendir.cache").debug("ignoring the %s row", "ref")
    assert [(r.name, r.levelno, r.getMessage()) for r in caplog.records] == [
        ("ocivendir.cache", logging.DEBUG, "ignoring the ref row")
    ]
