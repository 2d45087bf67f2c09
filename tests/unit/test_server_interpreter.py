"""What a server starts with, and which calls it may not serve because of what they set for a program's start-up."""

from __future__ import annotations

import pytest

from ocivendir.server.interpreter import locale_key, server_environment, startup_variable


@pytest.mark.parametrize("name", ["PYTHONPATH", "PYTHONHOME", "PYTHONIOENCODING", "PYTHONUTF8", "PYTHONSTARTUP",
                                  "PYTHON_COLORS", "LD_PRELOAD", "LD_AUDIT", "MALLOC_ARENA_MAX", "GLIBC_TUNABLES",
                                  "OPENSSL_CONF", "GCONV_PATH", "LOCPATH", "RES_OPTIONS"])  # fmt: skip
def test_a_variable_read_at_start_up_is_named(name: str) -> None:
    assert startup_variable({"PATH": "/bin", name: "x"}) == name


def test_harmless_empty_and_call_level_variables_are_not() -> None:
    environ = {"PYTHONDONTWRITEBYTECODE": "1", "PYTHONUNBUFFERED": "1", "PYTHONPATH": "", "LD_PRELOAD": "",
               "SSL_CERT_FILE": "/ca.pem", "HTTPS_PROXY": "http://p:1", "TZ": "UTC", "LANG": "de_DE.UTF-8"}  # fmt: skip
    assert startup_variable(environ) is None


def test_a_server_keeps_its_place_settings_path_home_and_locale_only() -> None:
    environ = {"PATH": "/bin", "HOME": "/h", "TMPDIR": "/t", "XDG_RUNTIME_DIR": "/r", "LANG": "C.UTF-8", "LC_ALL": "",
               "LC_CTYPE": "C", "OCIVENDIR_SERVER_DIR": "/d", "OCIVENDIR_SERVER_IDLE": "0", "OCIVENDIR_SERVER": "on",
               "IMGPKG_PASSWORD": "pw", "PYTHONPATH": "/p", "LD_PRELOAD": "/x.so", "LC_MESSAGES": "de",
               "HTTPS_PROXY": "http://p:1", "LOCPATH": "/l"}  # fmt: skip
    assert server_environment(environ, by_hand=True) == {
        "PATH": "/bin", "HOME": "/h", "TMPDIR": "/t", "XDG_RUNTIME_DIR": "/r", "LANG": "C.UTF-8", "LC_ALL": "",
        "LC_CTYPE": "C", "OCIVENDIR_SERVER_DIR": "/d", "OCIVENDIR_SERVER_IDLE": "0"}  # fmt: skip


def test_only_a_server_started_by_hand_keeps_the_suites_hook_switch() -> None:
    environ = {"PATH": "/bin", "OCIVENDIR_SERVER_DIR": "/d", "OCIVENDIR_SERVER_TEST_HOOKS": "1"}
    assert server_environment(environ, by_hand=True) == environ
    assert server_environment(environ, by_hand=False) == {"PATH": "/bin", "OCIVENDIR_SERVER_DIR": "/d"}


@pytest.mark.parametrize(("one", "other", "same"), [
    ({}, {"LANG": "C"}, True),  # Python coerces a C locale to C.UTF-8
    ({"LANG": "C.UTF-8"}, {"LC_CTYPE": "POSIX", "LANG": "de_DE.UTF-8"}, True),  # LC_CTYPE wins over LANG
    ({"LANG": "de_DE.UTF-8"}, {"LC_CTYPE": "de_DE.UTF-8", "LANG": "fr_FR.UTF-8"}, True),
    ({"LANG": "C.UTF-8"}, {"LANG": "de_DE.ISO-8859-1"}, False),
    ({"LANG": "C.UTF-8"}, {"LC_ALL": "C"}, False),  # LC_ALL stops the coercion
    ({"LC_ALL": "", "LANG": "C.UTF-8"}, {"LANG": "C.UTF-8"}, True),  # empty is unset
])  # fmt: skip
def test_the_locale_key_is_what_decides_the_interpreters_encodings(one: dict[str, str], other: dict[str, str],
                                                                    same: bool) -> None:  # fmt: skip
    assert (locale_key(one) == locale_key(other)) is same
