"""`bench --pull-cases`: the pull scenario runs only the cases named, and a name it lacks stops the run."""

from __future__ import annotations

import pytest
from bench.__main__ import _arguments
from bench.pull import cases


def test_every_case_runs_unless_some_are_named() -> None:
    assert [case.key for case in cases(smoke=False)] == ["100MiB", "1024MiB", "2000files"]
    assert [case.name for case in cases(smoke=False, only=["100MiB"])] == ["100 MiB single-layer bundle"]
    assert [case.key for case in cases(smoke=True, only=["100files", "2MiB"])] == ["2MiB", "100files"]


def test_a_case_the_mode_lacks_is_refused_with_the_ones_it_has() -> None:
    with pytest.raises(SystemExit, match=r"no case 100MiB \(this mode's: 2MiB, 8MiB, 100files\)"):
        cases(smoke=True, only=["100MiB"])


def test_the_option_is_a_comma_separated_list_empty_by_default() -> None:
    assert _arguments([]).pull_cases == []
    assert _arguments(["--only", "pull", "--pull-cases", "100MiB,1024MiB"]).pull_cases == ["100MiB", "1024MiB"]
