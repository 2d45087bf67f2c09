"""Settings parse sizes and durations as documented; credentials follow imgpkg's and Kubernetes' rules."""

from __future__ import annotations

import base64
import json
import math
import os
import sys
from pathlib import Path

import pytest

from ocivendir.errors import ConfigError, UsageError
from ocivendir.registry.credentials import Credential, host_match_score, rules_from_env, secret_rules
from ocivendir.registry.proxy import ProxyConfig
from ocivendir.settings import Flags, load_settings, parse_duration, parse_size, user_dir


@pytest.mark.parametrize(
    ("text", "size"),
    [("1024", 1024), ("1Mi", 1 << 20), ("1.5Gi", 3 << 29), ("500M", 500_000_000), ("2GiB", 2 << 30),
     ("512MB", 512_000_000), ("1m", 1_000_000), ("1.4Ki", 1434), ("1gib", 1 << 30), ("0.001Ki", 2), ("1.0001", 2),
     ("0.0", 0), ("9.5Ei", math.ceil(9.5 * 1024**6))],
)  # fmt: skip
def test_sizes(text: str, size: int) -> None:
    assert parse_size(text, "--x") == size


@pytest.mark.parametrize("text", ["", "lots", "1Xi", "-1", "1 0"])
def test_bad_sizes_name_the_flag(text: str) -> None:
    with pytest.raises(UsageError, match="--x"):
        parse_size(text, "--x")


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("0", 0), ("90s", 90), ("10m", 600), ("1h30m", 5400), ("1.5h", 5400), ("7d", 604800), ("1d12h", 129600),
     ("250ms", 0.25)],
)  # fmt: skip
def test_durations(text: str, seconds: float) -> None:
    assert parse_duration(text, "--x") == seconds


@pytest.mark.parametrize("text", ["5", "1y", "h", "1h 30m", ""])
def test_bad_durations(text: str) -> None:
    with pytest.raises(UsageError):
        parse_duration(text, "--x")


def test_flags_win_over_environment_and_empty_variables_count_as_unset() -> None:
    env = {"OCIVENDIR_CACHE_DIR": "/env/cache", "VENDIR_CACHE_DIR": "/vendir", "OCIVENDIR_TIMEOUT": "",
           "OCIVENDIR_CONCURRENCY": "3", "HOME": "/home/x"}  # fmt: skip
    settings = load_settings(Flags(), env)
    assert str(settings.cache_dir) == "/env/cache"
    assert settings.timeout == 300
    assert settings.concurrency == 3
    assert str(load_settings(Flags(cache_dir="/flag"), env).cache_dir) == "/flag"
    assert str(load_settings(Flags(), {"VENDIR_CACHE_DIR": "/vendir"}).cache_dir) == "/vendir"
    assert load_settings(Flags(no_cache=True), env).cache_dir is None
    with pytest.raises(UsageError, match="OCIVENDIR_CONCURRENCY"):
        load_settings(Flags(), {"OCIVENDIR_CONCURRENCY": "many"})


@pytest.mark.parametrize(
    ("pattern", "repository", "matches"),
    [("r.io", "r.io/a/b", True), ("docker.io", "index.docker.io/x", False), ("*.corp.com", "reg.corp.com/a", True),
     ("*.corp.com", "a.b.corp.com/a", False), ("r.io:5000", "r.io/a", False), ("r.io:5000", "r.io:5000/a", True),
     ("r.io/team", "r.io/team/app", True), ("r.io/team", "r.io/other/app", False),
     ("r.io/team", "r.io/teamx/app", True),  # URLsMatchStr's plain prefix, as imgpkg and vendir match it
     ("[::1]:5000", "[::1]:5000/team/app", True), ("[::1]:5000", "[::1]:5001/team/app", False),  # IPv6 literals
     ("user@r.io", "r.io/a", True),  # Go's URL host has no user info
     ("https://r.io/v2/", "r.io/a", True)],
)  # fmt: skip
def test_kubernetes_host_matching(pattern: str, repository: str, matches: bool) -> None:
    assert (host_match_score(pattern, repository) is not None) is matches


@pytest.mark.parametrize("hostname", ["[127.0.0.1:5000", "[!2]27.0.0.1:5000"])
def test_a_hostname_that_is_no_url_is_imgpkg_s_parse_error_not_a_python_one(hostname: str) -> None:
    with pytest.raises(ConfigError, match=r'^Parsing registry hostname: parse "https://\['):
        host_match_score(hostname, "127.0.0.1:5000/a")


def test_a_variable_with_an_empty_suffix_is_a_set_of_its_own() -> None:
    rules = rules_from_env({"IMGPKG_REGISTRY_HOSTNAME_": "r.io", "IMGPKG_REGISTRY_USERNAME_": "u",
                            "IMGPKG_REGISTRY_PASSWORD_": "p"})  # fmt: skip
    assert rules.lookup("r.io/a") == Credential(username="u", password="p")


def test_imgpkg_registry_variable_sets_most_specific_first() -> None:
    rules = rules_from_env({
        "IMGPKG_REGISTRY_HOSTNAME": "r.io", "IMGPKG_REGISTRY_USERNAME": "generic", "IMGPKG_REGISTRY_PASSWORD": "p1",
        "IMGPKG_REGISTRY_HOSTNAME_TEAM": "r.io/team", "IMGPKG_REGISTRY_USERNAME_TEAM": "team",
        "IMGPKG_REGISTRY_PASSWORD_TEAM": "p2",
    })  # fmt: skip
    assert rules.lookup("r.io/team/app") == Credential(username="team", password="p2")
    assert rules.lookup("r.io/other/app") == Credential(username="generic", password="p1")
    assert rules.lookup("s.io/app") is None


def test_unknown_imgpkg_variables_and_keychains_are_refused() -> None:
    with pytest.raises(ConfigError, match=r"Unknown env variable 'IMGPKG_REGISTRY_USERNMAE'"):
        rules_from_env({"IMGPKG_REGISTRY_USERNMAE": "x"})
    with pytest.raises(ConfigError, match=r"Unable to load keychain for azure, available keychains \[aks, ecr"):
        rules_from_env({"IMGPKG_ACTIVE_KEYCHAINS": "gke,azure"})
    assert rules_from_env({"IMGPKG_ACTIVE_KEYCHAINS": "gke,aks,ecr"}).keychains == ("gke", "aks", "ecr")


def test_credential_repr_hides_secrets() -> None:
    shown = repr(Credential(username="alice", password="hunter2"))
    assert "hunter2" not in shown
    assert "alice" not in shown


def test_vendir_secrets() -> None:
    assert secret_rules("s", "Opaque", {"username": "u", "password": "p"}).lookup("any.io/x") == Credential(
        username="u", password="p"
    )
    with pytest.raises(ConfigError, match=r"Unknown secret field 'ca\.crt' in secret 's'"):
        secret_rules("s", "Opaque", {"username": "u", "ca.crt": "x"})
    auth = base64.b64encode(b"bob:pw").decode()
    config = json.dumps({"auths": {"r.io": {"auth": auth}, "s.io": {"username": "", "password": ""}}})
    rules = secret_rules("d", "kubernetes.io/dockerconfigjson", {".dockerconfigjson": config})
    assert rules.lookup("r.io/app") == Credential(username="bob", password="pw")
    assert rules.lookup("s.io/app") == Credential()
    bad = json.dumps({"auths": {"r.io": {"auth": base64.b64encode(b"nocolon").decode()}}})
    with pytest.raises(ConfigError, match="Expected auth field to have 'username:password' format, but did not"):
        secret_rules("d", "kubernetes.io/dockerconfigjson", {".dockerconfigjson": bad})


def test_a_dockerconfigjson_secrets_untagged_fields_match_any_case_once_as_vendir_reads_them() -> None:
    # vendir's secretDockerConfigJSON has no JSON tags: `Auths`/`Username` are its fields in any case, and two keys
    # of one field would be merged by Go (adversarial review)
    config = json.dumps({"AUTHS": {"r.io": {"USERNAME": "bob", "Password": "pw"}}})
    rules = secret_rules("d", "kubernetes.io/dockerconfigjson", {".dockerconfigjson": config})
    assert rules.lookup("r.io/app") == Credential(username="bob", password="pw")
    for twice in ('{"auths": {}, "Auths": {}}', '{"auths": {"r.io": {"auth": "x", "Auth": "y"}}}',
                  '{"auths": {}, "auths": {}}'):  # fmt: skip
        with pytest.raises(ConfigError, match=r"is given more than once .*, which Go would merge; refused"):
            secret_rules("d", "kubernetes.io/dockerconfigjson", {".dockerconfigjson": twice})


def _auth_outcome(auth: str) -> str:
    config = json.dumps({"auths": {"r.io": {"auth": auth}}})
    try:
        credential = secret_rules("d", "kubernetes.io/dockerconfigjson", {".dockerconfigjson": config}).lookup("r.io/a")
    except ConfigError as exc:
        return f"error: {exc.message}"
    assert credential is not None
    return f"{credential.username}:{credential.password}"


# what vendir 0.40.0's decoding gives (Go 1.22's base64.StdEncoding, then SplitN ":"), printed by Go itself
GO_AUTH_OUTCOMES = {
    "Ym9iOnB3": "bob:pw",
    "Ym9iOnB": "error: Decoding auth field: illegal base64 data at input byte 4",
    "Ym9iOnB3=": "error: Decoding auth field: illegal base64 data at input byte 8",
    "Ym9iOnB3==": "error: Decoding auth field: illegal base64 data at input byte 8",
    "Ym9iOnB3dw==": "bob:pww",
    "Ym9iOnB3dw=": "error: Decoding auth field: illegal base64 data at input byte 11",
    "Ym9iOnB3dw": "error: Decoding auth field: illegal base64 data at input byte 8",
    "Ym9iOnB3dw===": "error: Decoding auth field: illegal base64 data at input byte 12",
    "=Ym9iOnB3": "error: Decoding auth field: illegal base64 data at input byte 0",
    "Ym9i OnB3": "error: Decoding auth field: illegal base64 data at input byte 4",
    "Ym9i\nOnB3": "bob:pw",
    "Ym9i\r\nOnB3\n": "bob:pw",
    "Ym9i*OnB3": "error: Decoding auth field: illegal base64 data at input byte 4",
    "Ym9iOnB3dw==Zg==": "error: Decoding auth field: illegal base64 data at input byte 12",
    "Ym9iOnB3d": "error: Decoding auth field: illegal base64 data at input byte 8",
    "====": "error: Decoding auth field: illegal base64 data at input byte 0",
    "_-_-": "error: Decoding auth field: illegal base64 data at input byte 0",
    "bm9jb2xvbg==": "error: Expected auth field to have 'username:password' format, but did not",
    "Ym9iOnB3é": "error: Decoding auth field: illegal base64 data at input byte 8",
}


def test_dockerconfigjson_auth_is_decoded_as_vendir_decodes_it() -> None:
    """A user:password past 57 bytes is wrapped by `base64` (Harbor robot accounts): Go skips the line breaks."""
    assert {auth: _auth_outcome(auth) for auth in GO_AUTH_OUTCOMES} == GO_AUTH_OUTCOMES
    assert _auth_outcome(base64.b64encode(b"u:\xff").decode()) == (
        "error: Decoding auth field: it decodes to bytes that are not UTF-8 text"
    )


def test_a_dockerconfigjson_secret_without_its_key_is_vendir_s_json_error() -> None:
    for data in ({}, {".dockerconfigjson": ""}, {".dockerconfigjson": " \n"}):
        with pytest.raises(ConfigError, match=r"^Unmarshaling dockerconfigjson: unexpected end of JSON input$"):
            secret_rules("d", "kubernetes.io/dockerconfigjson", data)


def test_proxy_variables_are_read_upper_case_first_into_the_proxy_choice() -> None:
    env = {"HTTPS_PROXY": "upper:1", "https_proxy": "lower:2", "http_proxy": "plain:3", "no_proxy": "corp"}
    settings = load_settings(Flags(), env)
    assert settings.proxy_vars == ("plain:3", "upper:1", "corp")
    assert settings.proxy == ProxyConfig(http_proxy="plain:3", https_proxy="upper:1", no_proxy="corp")
    assert settings.proxy.for_url("https", "a.corp", 443) is None
    assert settings.proxy.for_url("https", "r.io", 443) == "http://upper:1"


@pytest.mark.parametrize(
    ("no_proxy", "host", "port", "proxied"),
    [("", "r.io", 443, True), ("r.io", "r.io", 443, False), (".corp", "a.corp", 443, False),
     ("corp", "a.corp", 443, False), ("10.0.0.0/8", "10.1.2.3", 443, False), ("r.io:5000", "r.io", 443, True),
     ("*", "r.io", 443, False), ("", "127.0.0.1", 443, False), ("", "localhost", 443, False)],
)  # fmt: skip
def test_proxy_selection_follows_go(no_proxy: str, host: str, port: int, proxied: bool) -> None:
    config = ProxyConfig(https_proxy="proxy-svc:80", no_proxy=no_proxy)
    chosen = config.for_url("https", host, port)
    assert (chosen == "http://proxy-svc:80") is proxied


@pytest.mark.parametrize(
    "environ",
    [{"HOME": "/home/x"}, {"HOME": "/home/x/", "XDG_CACHE_HOME": "/xdg/cache", "XDG_CONFIG_HOME": "/xdg/config"},
     {"HOME": "/home/x", "XDG_CACHE_HOME": "relative/cache", "XDG_CONFIG_HOME": ""}, {"HOME": "relative"}, {}],
)  # fmt: skip
def test_the_default_cache_and_config_dirs_are_platformdirs_answers_without_platformdirs(
    environ: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    platformdirs = pytest.importorskip("platformdirs")
    for name in ("HOME", "XDG_CACHE_HOME", "XDG_CONFIG_HOME"):
        monkeypatch.delenv(name, raising=False)
    for name, value in environ.items():
        monkeypatch.setenv(name, value)
    assert load_settings(Flags(), {}).cache_dir == str(Path(platformdirs.user_cache_dir("ocivendir")))
    assert f"{user_dir('config', os.environ)}/ocivendir" == platformdirs.user_config_dir("ocivendir")


def test_a_warm_run_reads_its_default_cache_dir_without_importing_platformdirs(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delitem(sys.modules, "platformdirs", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", "/xdg/cache")
    assert load_settings(Flags(), {}).cache_dir == "/xdg/cache/ocivendir"
    assert "platformdirs" not in sys.modules


def test_a_reused_worker_keeps_settings_only_for_the_very_same_inputs(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Settings of os.environ are kept per (flags, environment, working directory, umask).

    Any of them changed, or a HOME that is not absolute (the passwd database decides then), and they are made anew.
    """
    for name in list(os.environ):
        monkeypatch.delenv(name)
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.chdir(tmp_path)
    first = load_settings(Flags())
    assert load_settings(Flags()) is first
    assert load_settings(Flags(timeout="9s")) is not first
    monkeypatch.setenv("OCIVENDIR_TIMEOUT", "7s")
    assert load_settings(Flags()).timeout == 7
    monkeypatch.delenv("OCIVENDIR_TIMEOUT")
    assert load_settings(Flags()) is first
    (tmp_path / "sub").mkdir()
    monkeypatch.chdir(tmp_path / "sub")
    assert load_settings(Flags()) is first  # kapp-controller's working directory is new every time: no path uses it
    assert load_settings(Flags(cache_dir="rel")).cache_dir == str(tmp_path / "sub" / "rel")
    monkeypatch.chdir(tmp_path)
    assert load_settings(Flags(cache_dir="rel")).cache_dir == str(tmp_path / "rel")
    previous = os.umask(0o077)
    try:
        assert load_settings(Flags()).umask == 0o077
    finally:
        os.umask(previous)
    assert load_settings(Flags(cache_dir="~root/c")) is not load_settings(Flags(cache_dir="~root/c"))
    monkeypatch.setenv("HOME", "relative")
    assert load_settings(Flags()) is not load_settings(Flags())
    explicit = {"HOME": str(tmp_path)}
    assert load_settings(Flags(), explicit) is not load_settings(Flags(), explicit)


def test_kept_settings_survive_a_removed_working_directory(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """A caller whose working directory is gone still gets settings (nothing is kept for it)."""
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    gone = tmp_path / "gone"
    gone.mkdir()
    monkeypatch.chdir(gone)
    gone.rmdir()
    assert load_settings(Flags()).cache_dir == str(tmp_path / ".cache" / "ocivendir")


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        ({"IMGPKG_USERNAME": "u", "IMGPKG_PASSWORD": "p", "IMGPKG_TOKEN": "t"}, Credential(username="u", password="p")),
        ({"IMGPKG_TOKEN": "t", "IMGPKG_PASSWORD": "p"}, Credential(registry_token="t")),
        (
            {"IMGPKG_ANON": "true", "IMGPKG_USERNAME": "u", "IMGPKG_PASSWORD": "p"},
            Credential(username="u", password="p"),
        ),
        ({"IMGPKG_ANON": "true"}, Credential()),
        ({"IMGPKG_ANON": "True"}, None),  # only the text `true`
        ({"IMGPKG_PASSWORD": "p"}, None),  # a password alone: the docker config is asked
        ({"IMGPKG_USERNAME": "u"}, Credential(username="u")),
    ],
)
def test_the_every_registry_credential_is_picked_as_imgpkg_s_custom_keychain_picks_it(
    env: dict[str, str], expected: Credential | None
) -> None:
    """A username wins with its password, else a token, else IMGPKG_ANON=true.

    A token beside a username used to be sent to Bearer registries (imgpkg sends the user and password), and
    IMGPKG_ANON beat a username.
    """
    assert rules_from_env(env).default == expected
    assert load_settings(Flags(), env).credentials.default == expected
    if "IMGPKG_ANON" not in env:  # a Secret's username, password and token reach imgpkg as these variables
        secret = {key.removeprefix("IMGPKG_").lower(): value for key, value in env.items()}
        assert secret_rules("s", "Opaque", secret).default == expected


def test_docker_config_files_are_looked_for_where_go_containerregistry_looks() -> None:
    env = {"HOME": "/home/me", "REGISTRY_AUTH_FILE": "/run/podman/auth.json", "XDG_RUNTIME_DIR": "/run/user/1"}
    settings = load_settings(Flags(), env)
    assert settings.docker_configs == ("/home/me/.docker/config.json", "/run/user/1/containers/auth.json")
    assert settings.registry_auth_file == "/run/podman/auth.json"  # only where the docker config file is absent
    assert load_settings(Flags(), {**env, "DOCKER_CONFIG": "/etc/dc"}).docker_configs[0] == "/etc/dc/config.json"
