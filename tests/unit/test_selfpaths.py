"""server/selfpaths.py: a call that names its own process's descriptors runs in that process, never in a worker."""

from __future__ import annotations

import pytest

from ocivendir.server.selfpaths import names_own_descriptors


@pytest.mark.parametrize(
    "argv",
    [
        ["vendir", "sync", "-f", "/dev/fd/63"],
        ["vendir", "sync", "--lock-file=/dev/fd/3"],
        ["vendir", "sync", "-f", "/proc/self/fd/5"],
        ["vendir", "sync", "-f", "/proc/thread-self/fd/5"],
        ["vendir", "sync", "-f", "dev/fd/4"],  # relative, from /
        ["vendir", "sync", "-f", "../../dev/fd/4"],
        ["vendir", "sync", "--lock-file", "/dev//fd/3"],  # other spellings of the same path (review)
        ["vendir", "sync", "--lock-file", "/dev/./fd/3"],
        ["vendir", "sync", "--lock-file=//proc/./self/fd/3"],
        ["vendir", "sync", "--lock-file", "/dev/tty"],  # the opener's controlling terminal
    ],
)
def test_an_argument_naming_descriptors_is_refused_by_position(argv: list[str]) -> None:
    reason = names_own_descriptors(argv, {}, "/home/me")
    assert reason is not None
    assert reason.startswith(f"argument {len(argv) - 1} may name")


def test_an_environment_value_is_refused_by_name_and_its_value_is_never_shown() -> None:
    reason = names_own_descriptors(["vendir", "sync"], {"SSL_CERT_FILE": "/dev/fd/4", "HOME": "/root"}, "/")
    assert reason == "$SSL_CERT_FILE may name the calling process's own descriptors, which a worker does not have"


@pytest.mark.parametrize("cwd", ["/dev", "/dev/fd", "/proc", "/proc/self"])
def test_a_working_directory_from_which_fd_3_reaches_them_is_refused(cwd: str) -> None:
    assert names_own_descriptors(["vendir", "sync", "-f", "fd/3"], {}, cwd) is not None


@pytest.mark.parametrize(
    ("argv", "cwd"),
    [
        (["vendir", "sync", "-f", "-", "--lock-file", "/dev/null"], "/var/run/kc/work"),  # kapp-controller's call
        (["vendir", "sync", "-f", "/dev/stdin", "--lock-file", "/dev/stdout"], "/srv"),  # 0-2 are the caller's
        (["ocivendir", "pull", "-b", "r.io/x@sha256:" + "a" * 64, "-o", "/devices/out"], "/developer"),
    ],
)
def test_calls_that_name_only_the_callers_stdio_or_other_files_stay_served(argv: list[str], cwd: str) -> None:
    assert names_own_descriptors(argv, {"PATH": "/usr/bin:/bin", "HOME": "/home/me"}, cwd) is None
