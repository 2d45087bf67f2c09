"""registries.yaml → the endpoint plan: k3s's mirror, wildcard, rewrite and config rules; errors name file and line."""

from __future__ import annotations

from pathlib import Path

import pytest

from ocivendir.errors import ConfigError, UsageError
from ocivendir.oci.reference import Repository, parse_reference
from ocivendir.registry.auth import Keyring
from ocivendir.registry.credentials import Credential, CredentialRules, HostCredential
from ocivendir.registry.mirrors import Endpoint
from ocivendir.registry.registriesyaml import parse_registries
from ocivendir.settings import Flags, Settings, load_registry_plan, load_settings

SOURCE = "/etc/ocivendir/registries.yaml"


def plan_of(text: str) -> list[tuple[str, str]]:
    """Parse and plan `docker.io/rancher/pause` and return (name, request path) per endpoint."""
    plan, _ = parse_registries(text, SOURCE)
    repo = parse_reference("rancher/pause:3.6").repository
    return [(e.name, e.api_path("manifests/3.6")) for e in plan.endpoints(repo)]


def test_no_file_content_means_the_origin_alone() -> None:
    assert plan_of("") == [("index.docker.io", "/v2/rancher/pause/manifests/3.6")]
    plan, _ = parse_registries("", SOURCE)
    (origin,) = plan.endpoints(Repository("127.0.0.1:5000", "app"))
    assert origin.host == "127.0.0.1:5000"


def test_mirrors_come_first_in_file_order_then_the_origin_unrewritten() -> None:
    text = """
mirrors:
  docker.io:
    endpoint: ["https://m1.example.com:5000", "http://m2.example.com", "m1.example.com:5000"]
    rewrite:
      "^rancher/(.*)": "mirrorproject/rancher-images/$1"
"""
    assert plan_of(text) == [
        ("https://m1.example.com:5000", "/v2/mirrorproject/rancher-images/pause/manifests/3.6"),
        ("http://m2.example.com", "/v2/mirrorproject/rancher-images/pause/manifests/3.6"),
        ("index.docker.io", "/v2/rancher/pause/manifests/3.6"),
    ]


def test_the_wildcard_applies_only_where_no_registry_entry_exists() -> None:
    text = """
mirrors:
  "*": {endpoint: ["https://everything.example"]}
  quay.io: {endpoint: ["https://quay-mirror.example"]}
"""
    plan, _ = parse_registries(text, SOURCE)
    hub = plan.endpoints(Repository("index.docker.io", "library/x"))
    quay = plan.endpoints(Repository("quay.io", "a/b"))
    assert [e.name for e in hub] == ["https://everything.example", "index.docker.io"]
    assert [e.name for e in quay] == ["https://quay-mirror.example", "quay.io"]
    assert [e.mirror for e in quay] == [True, False]


@pytest.mark.parametrize(
    ("endpoint", "scheme", "host", "root"),
    [
        ("https://m.example", "https", "m.example", "/v2"),
        ("http://m.example/v2/", "http", "m.example", "/v2"),
        ("m.example", None, "m.example", "/v2"),  # no scheme: https, then http only where allowed
        ("localhost:5000", "http", "localhost:5000", "/v2"),  # containerd: localhost on another port is plain
        ("127.0.0.1:443", None, "127.0.0.1:443", "/v2"),
        ("https://harbor.example/v2/dockerhub-proxy/", "https", "harbor.example", "/v2/dockerhub-proxy"),
    ],
)
def test_endpoint_urls_normalise_as_containerd_does(endpoint: str, scheme: str | None, host: str, root: str) -> None:
    plan, _ = parse_registries(f"mirrors:\n  quay.io:\n    endpoint: ['{endpoint}']\n", SOURCE)
    mirror = plan.endpoints(Repository("quay.io", "team/app"))[0]
    assert (mirror.scheme, mirror.host, mirror.root) == (scheme, host, root)
    assert mirror.api_path("blobs/x") == f"{root}/team/app/blobs/x"


def test_an_endpoint_equal_to_the_default_endpoint_is_not_a_mirror() -> None:
    text = "mirrors:\n  quay.io:\n    endpoint: ['https://quay.io', 'https://quay.io:443']\n"
    plan, _ = parse_registries(text, SOURCE)
    assert [e.name for e in plan.endpoints(Repository("quay.io", "a/b"))] == ["https://quay.io:443", "quay.io"]


def test_rewrites_use_go_expansion_and_never_produce_an_invalid_name() -> None:
    text = """
mirrors:
  quay.io:
    endpoint: ["https://m.example"]
    rewrite:
      "^nomatch/(.*)": "x/$1"
      "^(?P<org>[a-z]+)/(.*)$": "${org}-mirror/$2$$"
      "^team/(.*)": "mirror/${1}"
"""
    plan, _ = parse_registries(text, SOURCE)
    # the second rule would give "team-mirror/app$" (not a repository name), so the third applies
    assert plan.endpoints(Repository("quay.io", "team/app"))[0].path == "mirror/app"
    assert plan.endpoints(Repository("quay.io", "other/app"))[0].path == "other/app"


def test_configs_apply_per_endpoint_host_with_the_wildcard_as_fallback() -> None:
    text = """
mirrors:
  quay.io: {endpoint: ["http://127.0.0.1:5001"]}
configs:
  "127.0.0.1:5001":
    auth: {username: mirroruser, password: m1rror}
    concurrency: 2
  quay.io:
    auth: {auth: dGVhbTpwYXNz}
    tls: {ca_file: /ca.pem, cert_file: /c.pem, key_file: /k.pem}
  "*":
    tls: {insecure_skip_verify: yes}
"""
    plan, warnings = parse_registries(text, SOURCE)
    assert warnings == []
    mirror, origin = plan.endpoints(Repository("quay.io", "a/b"))
    assert mirror.config.auth == Credential(username="mirroruser", password="m1rror")
    assert mirror.config.concurrency == 2
    assert origin.config.auth == Credential(username="team", password="pass")
    assert origin.config.tls is not None
    assert origin.config.tls.ca_file == "/ca.pem"
    other = plan.config_for("ghcr.io")
    assert other.tls is not None
    assert other.tls.insecure_skip_verify
    assert plan.caps == {"127.0.0.1:5001": 2}


def test_docker_hub_names_share_one_entry() -> None:
    text = "mirrors:\n  docker.io: {endpoint: [m.example]}\nconfigs:\n  registry-1.docker.io: {auth: {identitytoken: tok}}\n"
    plan, _ = parse_registries(text, SOURCE)
    endpoints = plan.endpoints(Repository("index.docker.io", "library/x"))
    assert endpoints[-1].config.auth == Credential(identity_token="tok")
    assert endpoints[0].host == "m.example"


def test_unknown_keys_are_warnings_naming_file_and_line() -> None:
    text = "mirrors:\n  quay.io:\n    endpoint: [m.example]\n    endpoints: [typo.example]\nextra: 1\n"
    _, warnings = parse_registries(text, SOURCE)
    assert warnings == [
        f"{SOURCE}:4: unknown key 'endpoints' in mirror 'quay.io' ignored",
        f"{SOURCE}:5: unknown key 'extra' in registries.yaml ignored",
    ]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("mirrors:\n  quay.io:\n    endpoint: [a\n", f"{SOURCE}:4: invalid YAML"),
        ("mirrors:\n  quay.io:\n    endpoint: m.example\n", f"{SOURCE}:3: endpoint of mirror 'quay.io' must be a list"),
        ("mirrors:\n  quay.io:\n    endpoint: ['ftp://m']\n", f"{SOURCE}:3: invalid endpoint 'ftp://m'"),
        ("configs:\n  h:\n    tls:\n      cert_file: /c\n", f"{SOURCE}:4: tls of 'h': cert_file and key_file"),
        ("configs:\n  h:\n    auth: {auth: '!!!'}\n", f"{SOURCE}:3: auth of 'h': 'auth' is not base64"),
        ("configs:\n  h:\n    concurrency: 0\n", f"{SOURCE}:3: concurrency of 'h' must be a whole number"),
        ("configs:\n  h: {tls: {insecure_skip_verify: maybe}}\n", f"{SOURCE}:2: tls of 'h': insecure_skip_verify"),
        ("mirrors: [a]\n", f"{SOURCE}:1: mirrors must be a mapping"),
        ("configs:\n  h: {}\n  h: {}\n", f"{SOURCE}:3: duplicate key 'h'"),
        ("mirrors:\n  q:\n    rewrite: {'(': x}\n", f"{SOURCE}:3: invalid rewrite pattern '('"),
        ("mirrors: " + "[" * 5000 + "]" * 5000 + "\n", f"{SOURCE}: invalid YAML: nested too deeply"),  # RecursionError
    ],
)
def test_malformed_files_are_config_errors_naming_file_and_line(text: str, message: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_registries(text, SOURCE)
    assert str(caught.value.message).startswith(message)
    assert caught.value.exit_code == 2


def test_secrets_never_show_in_a_repr() -> None:
    plan, _ = parse_registries("configs:\n  h: {auth: {username: u, password: hunter2}}\n", SOURCE)
    endpoint = Endpoint(
        registry="r", host="h", scheme=None, root="/v2", path="a/b", mirror=True, config=plan.config_for("h")
    )
    assert "hunter2" not in repr(plan)
    assert "hunter2" not in repr(endpoint)


# --- where the file comes from (settings.py) ---------------------------------------------------------------------


def _write(path: Path, quay_mirror: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"mirrors:\n  quay.io:\n    endpoint: ['{quay_mirror}']\n")
    return path


def _first_mirror(settings: Settings) -> str:
    plan, _ = load_registry_plan(settings)
    return plan.endpoints(Repository("quay.io", "a/b"))[0].name


def test_the_flag_wins_over_the_variable_which_wins_over_the_user_config_dir(isolated_env: Path) -> None:
    default = _write(isolated_env / ".config" / "ocivendir" / "registries.yaml", "https://from-default")
    from_env = _write(isolated_env / "env.yaml", "https://from-env")
    from_flag = _write(isolated_env / "flag.yaml", "https://from-flag")
    env = {"OCIVENDIR_REGISTRY_CONFIG": str(from_env)}
    assert _first_mirror(load_settings(Flags(registry_config=str(from_flag)), env)) == "https://from-flag"
    assert _first_mirror(load_settings(Flags(), env)) == "https://from-env"
    assert _first_mirror(load_settings(Flags(), {})) == "https://from-default"
    default.unlink()
    assert _first_mirror(load_settings(Flags(), {})) == "quay.io"  # no file: the origin alone


def test_a_named_file_must_exist(isolated_env: Path) -> None:
    settings = load_settings(Flags(registry_config=str(isolated_env / "missing.yaml")), {})
    with pytest.raises(ConfigError, match=r"Reading registry config '.*missing.yaml': No such file"):
        load_registry_plan(settings)


@pytest.mark.parametrize(
    ("flags", "env", "expected"),
    [(Flags(), {}, 4), (Flags(), {"OCIVENDIR_REGISTRY_CONCURRENCY": "2"}, 2),
     (Flags(registry_concurrency=6), {"OCIVENDIR_REGISTRY_CONCURRENCY": "2"}, 6)],
)  # fmt: skip
def test_the_per_endpoint_cap_comes_from_flag_then_variable(flags: Flags, env: dict[str, str], expected: int) -> None:
    assert load_settings(flags, env).registry_concurrency == expected


def test_a_bad_per_endpoint_cap_names_its_source() -> None:
    with pytest.raises(UsageError, match="OCIVENDIR_REGISTRY_CONCURRENCY"):
        load_settings(Flags(), {"OCIVENDIR_REGISTRY_CONCURRENCY": "0"})


# --- where registries.yaml credentials stand in the lookup (registry/auth.py) ------------------------------------


def test_keyring_order_hostname_rules_then_registries_yaml_then_registry_wide_then_docker_config(
    tmp_path: Path,
) -> None:
    docker = tmp_path / "config.json"
    docker.write_text('{"auths": {"m.example": {"username": "docker", "password": "d"}, '
                      '"o.example": {"username": "docker", "password": "d"}}}')  # fmt: skip
    plan, _ = parse_registries("configs:\n  o.example: {auth: {username: file, password: f}}\n", SOURCE)
    hostname = HostCredential(hostname="o.example/team", credential=Credential(username="secret", password="s"))
    everywhere = Credential(username="everyone", password="e")
    keyring = Keyring(CredentialRules(hosts=(hostname,), default=everywhere), (docker,), plan)
    assert keyring("o.example", "team/app") == Credential(username="secret", password="s")  # a Secret with hostname
    assert keyring("o.example", "other/app") == Credential(username="file", password="f")  # registries.yaml
    assert keyring("x.example", "a/b") == everywhere  # registry-wide, for an origin
    assert keyring("m.example", "a/b", mirror=True) == Credential(username="docker", password="d")  # never `everywhere`
    assert keyring("z.example", "a/b", mirror=True) == Credential()
