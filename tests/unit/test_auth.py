"""Docker config files and credential helpers, and the keyring's lookup order."""

from __future__ import annotations

import base64
import json
import os
import stat
from pathlib import Path

import pytest
from responses import RequestsMock, matchers

from ocivendir.errors import ConfigError, RegistryError
from ocivendir.oci.reference import parse_reference
from ocivendir.registry.auth import DockerConfig, Keyring
from ocivendir.registry.client import ClientOptions, RegistryClient
from ocivendir.registry.credentials import Credential, CredentialRules, rules_from_env


def write_config(path: Path, doc: dict[str, object]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc))
    return path


def helper(bin_dir: Path, name: str, answer: dict[str, str] | None) -> None:
    bin_dir.mkdir(parents=True, exist_ok=True)
    script = bin_dir / f"docker-credential-{name}"
    body = f"echo '{json.dumps(answer)}'" if answer else "echo 'credentials not found in native keychain'; exit 1"
    script.write_text(f"#!/bin/sh\nread server\n{body}\n")
    script.chmod(script.stat().st_mode | stat.S_IXUSR)


def test_auths_entries_decode_auth_and_docker_hub_aliases(tmp_path: Path) -> None:
    auth = base64.b64encode(b"alice:pw").decode()
    config = DockerConfig.load(write_config(tmp_path / "config.json", {"auths": {
        "r.io:5000": {"auth": auth}, "https://index.docker.io/v1/": {"username": "hub", "password": "x"},
    }}))  # fmt: skip
    assert config is not None
    assert config.lookup("r.io:5000") == Credential(username="alice", password="pw")
    assert config.lookup("index.docker.io") == Credential(username="hub", password="x")
    assert config.lookup("other.io") is None
    assert DockerConfig.load(tmp_path / "absent.json") is None
    (tmp_path / "bad.json").write_text("{nope")
    with pytest.raises(ConfigError, match=r"bad\.json"):
        DockerConfig.load(tmp_path / "bad.json")


GOOD = base64.b64encode(b"alice:pw").decode()
GO_WOULD_READ_OTHERWISE = {
    "Auths-beside-auths": ({"auths": {"r.io": {"auth": "bm9ib2R5Ondyb25n"}}, "Auths": {"r.io": {"auth": GOOD}}},
                           "has the key 'Auths', which Go's encoding/json reads as the field 'auths'"),
    "AUTHS-alone": ({"AUTHS": {"r.io": {"auth": GOOD}}}, "has the key 'AUTHS'"),
    "Auth-in-an-entry": ({"auths": {"r.io": {"Auth": GOOD}}}, "auths['r.io'] has the key 'Auth'"),
    "auth-with-junk": ({"auths": {"r.io": {"auth": GOOD[:8] + "!!" + GOOD[8:]}}}, "its auth field is not base64"),
    "auth-without-colon": ({"auths": {"r.io": {"auth": base64.b64encode(b"alice").decode()}}}, "no 'user:password'"),
    "auth-empty-user": ({"auths": {"r.io": {"auth": base64.b64encode(b":pw").decode()}}}, "no 'user:password'"),
    "another-registry-bad": ({"auths": {"r.io": {"auth": GOOD}, "s.io": {"auth": "%%"}}}, "auths['s.io']"),
    "entry-not-an-object": ({"auths": {"r.io": {"auth": GOOD}, "s.io": "x"}}, "'auths.s.io' is a string, not an object"),
    "auths-a-list": ({"auths": []}, "'auths' is an array, not an object"),
    "format-a-number": ({"psFormat": 5}, "'psFormat' is a number, not a string"),
    "auth-a-number": ({"auths": {"r.io": {"auth": 5}}}, "'auths.r.io.auth' is a number, not a string"),
    "password-not-text": ({"auths": {"r.io": {"auth": base64.b64encode(b"u:\xff").decode()}}},
                          "its auth field decodes to bytes that are not UTF-8 text"),
}  # fmt: skip


@pytest.mark.parametrize(("doc", "words"), GO_WOULD_READ_OTHERWISE.values(), ids=GO_WOULD_READ_OTHERWISE.keys())
def test_a_config_docker_cli_would_read_otherwise_is_refused(
    tmp_path: Path, doc: dict[str, object], words: str
) -> None:
    # imgpkg 0.43.1 took `Auths` for `auths` (merged with it) and refused an `auth` with junk in it; every entry's
    # `auth` is decoded when the file loads, whichever registry is asked for (adversarial review)
    with pytest.raises(ConfigError) as caught:
        DockerConfig.load(write_config(tmp_path / "config.json", doc))
    assert words in caught.value.message
    assert str(tmp_path / "config.json") in caught.value.message


def test_an_auth_split_by_line_breaks_and_a_password_with_nul_padding_read_as_docker_cli_reads_them(
    tmp_path: Path,
) -> None:
    auth = base64.b64encode(b"alice:pw\0\0").decode()
    config = DockerConfig.load(
        write_config(tmp_path / "c.json", {"auths": {"r.io": {"auth": auth[:4] + "\n" + auth[4:]}}})
    )
    assert config is not None
    assert config.lookup("r.io") == Credential(username="alice", password="pw")


def test_cred_helpers_and_creds_store_are_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    helper(tmp_path / "bin", "pass", {"Username": "bob", "Secret": "s3"})
    helper(tmp_path / "bin", "token", {"Username": "<token>", "Secret": "refresh"})
    helper(tmp_path / "bin", "empty", None)
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}")
    config = DockerConfig.load(write_config(tmp_path / "config.json", {
        "credHelpers": {"ecr.example.com": "token", "none.io": "empty"}, "credsStore": "pass",
    }))  # fmt: skip
    assert config is not None
    assert config.lookup("ecr.example.com") == Credential(identity_token="refresh")
    assert config.lookup("anything.io") == Credential(username="bob", password="s3")
    assert config.lookup("none.io") is None


@pytest.mark.parametrize("body", ["echo '{nope'", "echo '[1, 2]'", "echo '\"text\"'", "echo 'null'"])
def test_a_helper_answer_that_is_not_a_json_object_is_a_config_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, body: str
) -> None:
    script = tmp_path / "bin" / "docker-credential-odd"
    script.parent.mkdir()
    script.write_text(f"#!/bin/sh\nread server\n{body}\n")
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}")
    config = DockerConfig.load(write_config(tmp_path / "config.json", {"credsStore": "odd"}))
    assert config is not None
    with pytest.raises(ConfigError, match=r"docker-credential-odd gave invalid JSON for r\.io"):
        config.lookup("r.io")


def script(path: Path, body: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"#!/bin/sh\n{body}\n")
    path.chmod(0o755)
    return path


@pytest.mark.parametrize("path", ["{abs}:", ":{abs}", ".:{abs}", "bin:{abs}"])
def test_a_helper_found_through_a_relative_path_entry_is_refused_and_never_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, path: str
) -> None:
    """Go's exec.LookPath (ErrDot): a checkout holding docker-credential-desktop must not choose what is run."""
    ran = tmp_path / "ran"
    for where in (tmp_path / "docker-credential-desktop", tmp_path / "bin" / "docker-credential-desktop"):
        script(where, f'touch {ran}; echo \'{{"Username": "u", "Secret": "s"}}\'')
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PATH", path.format(abs="/usr/bin"))
    config = DockerConfig.load(write_config(tmp_path / "home" / "config.json", {"credsStore": "desktop"}))
    assert config is not None
    with pytest.raises(ConfigError) as caught:
        config.lookup("r.io")
    assert caught.value.message == ('Running credential helper docker-credential-desktop: exec: '
                                    '"docker-credential-desktop": cannot run executable found relative to current '
                                    "directory")  # fmt: skip
    assert not ran.exists()


def test_a_helper_name_with_a_slash_is_refused(tmp_path: Path) -> None:
    config = DockerConfig.load(write_config(tmp_path / "config.json", {"credsStore": "../../tmp/x"}))
    assert config is not None
    with pytest.raises(ConfigError, match="a helper's name may not contain '/'"):
        config.lookup("r.io")


@pytest.mark.parametrize(
    ("body", "outcome"),
    [
        ("echo 'credentials not found in native keychain'; exit 1", None),
        ("echo '  credentials not found in native keychain  '; exit 3", None),
        (
            "echo 'error: credentials not found for r.io'; exit 1",
            "failed for r.io: error getting credentials - err: exit status 1, out: `error: credentials not found for r.io`",
        ),
        (
            "echo 'credentials not found in native keychain' >&2; exit 1",
            "failed for r.io: error getting credentials - err: exit status 1, out: ``",
        ),
        (
            "echo 'token expired: run aws sso login'; exit 2",
            "error getting credentials - err: exit status 2, out: `token expired: run aws sso login`",
        ),
    ],
)
def test_only_the_exact_not_found_answer_means_no_credential_and_a_failure_shows_the_helper_s_output(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, body: str, outcome: str | None
) -> None:
    """docker-credential-helpers' client: stdout, trimmed, equal to its not-found message; anything else fails."""
    script(tmp_path / "bin" / "docker-credential-t", f"read server\n{body}")
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}")
    config = DockerConfig.load(write_config(tmp_path / "config.json", {"credsStore": "t"}))
    assert config is not None
    if outcome is None:
        assert config.lookup("r.io") is None
        return
    with pytest.raises(ConfigError) as caught:
        config.lookup("r.io")
    assert caught.value.message.startswith("Credential helper docker-credential-t ")
    assert caught.value.message.endswith(outcome)


ALICE = base64.b64encode(b"alice:pw").decode()
BOB = base64.b64encode(b"bob:pw2").decode()


@pytest.mark.parametrize(
    ("auths", "expected"),
    [
        ({"https://r.io/v1/": {"auth": ALICE}}, "alice"),
        ({"http://r.io/v2/": {"auth": ALICE}}, "alice"),
        ({"r.io/anything/else": {"auth": ALICE}}, "alice"),
        ({"r.io/team/app": {"auth": BOB}, "r.io": {"auth": ALICE}}, "bob"),  # the repository's own key first
        ({"r.io/team/other": {"auth": BOB}, "r.io": {"auth": ALICE}}, "alice"),  # the exact host key before any other
        ({"r.io:5000": {"auth": BOB}}, None),  # another port is another host
        ({"https://r.io.evil/v1/": {"auth": BOB}}, None),
    ],
)
def test_auths_keys_are_matched_as_docker_cli_s_file_store_matches_them(
    tmp_path: Path, auths: dict[str, object], expected: str | None
) -> None:
    """go-containerregistry asks `host/repository`, then `host`.

    docker/cli takes the exact key, else any address naming the host (less its scheme and path).
    """
    config = DockerConfig.load(write_config(tmp_path / "config.json", {"auths": auths}))
    assert config is not None
    found = config.lookup("r.io", "team/app")
    assert (found.username if found else None) == expected


def test_helpers_are_chosen_as_docker_cli_chooses_them_and_answer_for_the_key_asked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    asked = tmp_path / "asked"
    for name, user in (("store", "from-store"), ("repo", "from-repo")):
        script(
            tmp_path / "bin" / f"docker-credential-{name}",
            f'read server; echo "{name} $server" >> {asked}; echo \'{{"Username": "{user}", "Secret": "s"}}\'',
        )
    script(tmp_path / "bin" / "docker-credential-none", "echo 'credentials not found in native keychain'; exit 1")
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}")

    def lookup(doc: dict[str, object], registry: str = "r.io") -> str | None:
        config = DockerConfig.load(write_config(tmp_path / "config.json", doc))
        assert config is not None
        found = config.lookup(registry, "team/app")
        return found.username if found else None

    # credsStore's answer replaces the file's entry, even when it has none (docker/cli's native store)
    assert lookup({"credsStore": "store", "auths": {"r.io": {"auth": ALICE}}}) == "from-store"
    assert lookup({"credsStore": "none", "auths": {"r.io": {"auth": ALICE}}}) is None
    # a credHelpers entry for the repository is asked for it; one keyed otherwise than exactly is not used
    assert lookup({"credHelpers": {"r.io/team/app": "repo"}, "credsStore": "store"}) == "from-repo"
    assert lookup({"credHelpers": {"https://r.io": "repo"}, "auths": {"r.io": {"auth": ALICE}}}) == "alice"
    # an empty credHelpers entry means the file itself, even beside a credsStore
    assert lookup({"credHelpers": {"r.io/team/app": "", "r.io": ""}, "credsStore": "store",
                   "auths": {"r.io": {"auth": ALICE}}}) == "alice"  # fmt: skip
    assert asked.read_text().splitlines() == ["store r.io/team/app", "repo r.io/team/app"]
    assert lookup({"credsStore": "store"}, "index.docker.io") == "from-store"
    assert asked.read_text().splitlines()[-1] == "store index.docker.io/team/app"


def test_an_entry_with_an_identity_token_keeps_its_user_and_password_for_basic(tmp_path: Path) -> None:
    config = DockerConfig.load(write_config(tmp_path / "config.json", {"auths": {
        "r.io": {"auth": ALICE, "identitytoken": "refresh", "registrytoken": "static"}}}))  # fmt: skip
    assert config is not None
    assert config.lookup("r.io") == Credential(username="alice", password="pw", identity_token="refresh",
                                               registry_token="static")  # fmt: skip


def test_keyring_order_rules_then_config_files_then_anonymous(tmp_path: Path) -> None:
    first = write_config(tmp_path / "a/config.json", {"auths": {"r.io": {"username": "from-docker", "password": "p"}}})
    second = write_config(tmp_path / "b/auth.json", {"auths": {"s.io": {"username": "from-podman", "password": "p"}}})
    env_rules = rules_from_env({"IMGPKG_REGISTRY_HOSTNAME": "r.io/team", "IMGPKG_REGISTRY_USERNAME": "env",
                                "IMGPKG_REGISTRY_PASSWORD": "e"})  # fmt: skip
    keyring = Keyring(env_rules, (first, second))
    assert keyring("r.io", "team/app") == Credential(username="env", password="e")
    assert keyring("r.io", "other/app") == Credential(username="from-docker", password="p")
    assert keyring("s.io", "x/y") == Credential(username="from-podman", password="p")
    assert keyring("t.io", "x/y") == Credential()
    anonymous = Keyring(CredentialRules(default=Credential()), (first,))
    assert anonymous("r.io", "team/app") == Credential()


def test_an_identity_token_is_exchanged_with_a_refresh_token_post(rsps: RequestsMock) -> None:
    registry = "id.example.com"
    digest = "sha256:" + "0" * 64
    mock = rsps
    mock.head(
        f"https://{registry}/v2/team/app/manifests/v1",
        status=401,
        headers={"WWW-Authenticate": 'Bearer realm="https://auth.example.com/oauth2/token",service="svc"'},
    )
    mock.post(
        "https://auth.example.com/oauth2/token",
        json={"access_token": "at"},
        match=[
            matchers.urlencoded_params_matcher(
                {
                    "grant_type": "refresh_token",
                    "refresh_token": "rt",
                    "service": "svc",
                    "scope": "repository:team/app:pull",
                    "client_id": "ocivendir",
                }
            )
        ],
    )
    mock.head(f"https://{registry}/v2/team/app/manifests/v1", headers={"Docker-Content-Digest": digest},
              match=[matchers.header_matcher({"Authorization": "Bearer at"})])  # fmt: skip
    client = RegistryClient(ClientOptions(), lambda _r, _p, **_: Credential(identity_token="rt"))
    assert str(client.resolve(parse_reference(f"{registry}/team/app:v1")).digest) == digest
    assert client.stats.auth == 2


@pytest.mark.parametrize("target", ["https://elsewhere.example.com/token", "http://auth.example.com/oauth2/token"])
def test_a_token_form_redirected_off_its_origin_is_not_sent_there(rsps: RequestsMock, target: str) -> None:
    """Credentials never follow a redirect to another host or down to plain HTTP: a refresh token's form neither.

    The refresh token travels in the POST's form, which a 307 keeps: it would reach the other host (imgpkg sends it).
    """
    registry = "id.example.com"
    rsps.head(f"https://{registry}/v2/team/app/manifests/v1", status=401,
              headers={"WWW-Authenticate": 'Bearer realm="https://auth.example.com/oauth2/token",service="svc"'})  # fmt: skip
    rsps.post("https://auth.example.com/oauth2/token", status=307, headers={"Location": target})
    client = RegistryClient(ClientOptions(), lambda _r, _p, **_: Credential(identity_token="rt"))
    with pytest.raises(RegistryError, match=r"redirected its form, which carries the credential, to .*: not sent"):
        client.resolve(parse_reference(f"{registry}/team/app:v1"))
    assert [call.request.url for call in rsps.calls][-1] == "https://auth.example.com/oauth2/token"


def test_a_helper_that_is_not_installed_gives_no_credential_and_debug_names_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """A missing helper is named with its entry under --debug, which a registry's 401 hint points to.

    imgpkg fails outright; ocivendir goes on (the registry may need nothing). Asked only when a registry asks.
    """
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    path = write_config(tmp_path / "config.json", {"credHelpers": {"r.io": "gone"}, "credsStore": "desktop"})
    config = DockerConfig.load(path)
    assert config is not None
    with caplog.at_level("DEBUG", logger="ocivendir.auth"):
        assert config.lookup("r.io") is None
        assert config.lookup("s.io") is None
    assert [r.getMessage() for r in caplog.records] == [
        f"docker-credential-gone (credHelpers['r.io'] in {path}) is not on PATH: going on without its credential",
        f"docker-credential-desktop (credsStore in {path}) is not on PATH: going on without its credential",
    ]


def test_a_docker_config_that_cannot_be_read_is_named_with_go_s_words(tmp_path: Path) -> None:
    (tmp_path / "config.json").mkdir()
    with pytest.raises(ConfigError) as caught:
        DockerConfig.load(tmp_path / "config.json")
    assert caught.value.message == f"Reading docker config '{tmp_path / 'config.json'}': is a directory"


def test_registry_auth_file_stands_in_for_a_docker_config_file_that_does_not_exist(tmp_path: Path) -> None:
    """go-containerregistry reads $REGISTRY_AUTH_FILE only where the docker config file is absent (review)."""
    auth_file = write_config(tmp_path / "auth.json", {"auths": {"r.io": {"auth": ALICE}}})
    docker = tmp_path / "docker" / "config.json"
    keyring = Keyring(CredentialRules(), (docker,), auth_file=str(auth_file))
    assert keyring("r.io", "a") == Credential(username="alice", password="pw")
    write_config(docker, {"auths": {}})
    assert keyring("r.io", "a") == Credential()
    (tmp_path / "auth.json").write_text("{broken")  # never read beside a docker config file
    assert keyring("r.io", "a") == Credential()


@pytest.mark.parametrize(
    "answer",
    ['{"username": "bob", "secret": "s3"}', '{"Username": "bob", "Secret": "s3"}\\nlogged in via SSO',
     '  {"ServerURL": "r.io", "USERNAME": "bob", "SECRET": "s3"} {"another": 1}'],
)  # fmt: skip
def test_a_helper_answer_is_read_as_docker_credential_helpers_reads_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, answer: str
) -> None:
    """Go's json.Decoder: the first value only, its keys in any case (a lower-case answer was an empty credential)."""
    script(tmp_path / "bin" / "docker-credential-t", f"read server\nprintf '%s' '{answer}'")
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}")
    config = DockerConfig.load(write_config(tmp_path / "config.json", {"credsStore": "t"}))
    assert config is not None
    assert config.lookup("r.io") == Credential(username="bob", password="s3")


def test_a_refresh_token_post_carries_no_basic_header_beside_it(rsps: RequestsMock) -> None:
    """An entry keeps its user and password beside an identity token; go-containerregistry posts the token alone."""
    registry, digest = "id.example.com", "sha256:" + "0" * 64
    rsps.head(f"https://{registry}/v2/team/app/manifests/v1", status=401,
              headers={"WWW-Authenticate": 'Bearer realm="https://auth.example.com/token",service="svc"'})  # fmt: skip
    rsps.post("https://auth.example.com/token", json={"access_token": "at"})
    rsps.head(f"https://{registry}/v2/team/app/manifests/v1", headers={"Docker-Content-Digest": digest})
    found = Credential(username="alice", password="pw", identity_token="rt")
    client = RegistryClient(ClientOptions(), lambda _r, _p, **_: found)
    assert str(client.resolve(parse_reference(f"{registry}/team/app:v1")).digest) == digest
    assert "Authorization" not in rsps.calls[1].request.headers
