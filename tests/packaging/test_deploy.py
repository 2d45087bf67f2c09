"""deploy/kapp-controller: the Dockerfile, sidecar.star (run as Python) and the typed schema in values.yml.

The Dockerfile's paths exist in the build and its base is the release's image by digest; sidecar.star computes what
the overlay adds and accepts exactly the sizes ocivendir reads; values.yml types every value.

No container runtime and no ytt here: the Dockerfile is read, its ADDed archive pattern is matched against dist/, and
the link target is looked up in that archive as ADD would unpack it. test_deploy_render.py renders with a real ytt.
"""

from __future__ import annotations

import fnmatch
import os
import re
import shutil
import subprocess
import tarfile
from pathlib import Path
from typing import Any

import pytest
import yaml

from ocivendir.errors import UsageError
from ocivendir.settings import parse_size
from tests.packaging.deploy_recipe import (
    CONTROLLER,
    DEPLOY,
    RELEASE,
    SIDECAR,
    container,
    defaults,
    readme_commands,
    release,
    sidecar_star,
    values,
)

DIGEST = "sha256:356e412ccf76d72512909ae4623c8417e71ea58bedfe1b9a62fc5135f4d79102"  # the fixture's stand-in


def _instructions() -> list[tuple[str, str]]:
    text = (DEPLOY / "Dockerfile").read_text().replace("\\\n", " ")
    lines = [line.strip() for line in text.splitlines() if line.strip() and not line.lstrip().startswith("#")]
    return [(line.split(None, 1)[0], line.split(None, 1)[1]) for line in lines]


def _args() -> dict[str, str]:
    return dict(value.split("=", 1) for op, value in _instructions() if op == "ARG" and "=" in value)


def _substitute(text: str, args: dict[str, str]) -> str:
    """The Dockerfile's `${NAME}` and `${NAME:?}` (BuildKit stops the build when NAME is unset or empty)."""

    def value(match: re.Match[str]) -> str:
        name, required = match.groups()
        if required and not args.get(name):
            raise ValueError(f"{name}: is not allowed to be unset")
        return args[name]

    return re.sub(r"\$\{(\w+)(:\?)?\}", value, text)


@pytest.mark.dist
def test_the_added_archive_is_the_build_and_vendir_links_to_its_executable(dist_dir: Path) -> None:
    args = {**_args(), "OCIVENDIR_ARCH": os.uname().machine}
    adds = [value.split() for op, value in _instructions() if op == "ADD"]
    assert len(adds) == 1
    source, destination = adds[0]
    matches = [p for p in dist_dir.iterdir() if fnmatch.fnmatch(f"dist/{p.name}", _substitute(source, args))]
    assert [p.name for p in matches] == [p.name for p in dist_dir.glob("ocivendir-*-linux-*.tar.gz")]
    assert len(matches) == 1
    with tarfile.open(matches[0]) as archive:
        members = {f"{destination.rstrip('/')}/{m.name}": m for m in archive.getmembers()}
    run = " ".join(value for op, value in _instructions() if op == "RUN")
    link = re.search(r"ln -s (\S+) /vendir\b", run)
    assert link is not None
    target = members[link.group(1)]
    assert target.isfile()
    assert target.mode & 0o111 == 0o111
    assert "mv /vendir /vendir-real" in run


def test_the_image_derives_from_the_release_image_by_digest_and_keeps_its_user() -> None:
    instructions = _instructions()
    froms = [value for op, value in instructions if op == "FROM"]
    assert froms == ["${KAPP_CONTROLLER_REPOSITORY}@${KAPP_CONTROLLER_DIGEST:?}"]
    before_from = instructions[: instructions.index(("FROM", froms[0]))]
    assert ("ARG", "KAPP_CONTROLLER_DIGEST") in before_from  # no default: no tag that may not exist
    assert _args()["KAPP_CONTROLLER_REPOSITORY"] == "ghcr.io/carvel-dev/kapp-controller"
    with pytest.raises(ValueError, match="KAPP_CONTROLLER_DIGEST: is not allowed to be unset"):
        _substitute(froms[0], _args())
    assert ("ENV", "OCIVENDIR_DELEGATE_VENDIR=/vendir-real") in instructions
    assert [value for op, value in instructions if op == "USER"][-1] == "1000"


def test_the_readmes_digest_command_finds_the_image_the_release_yaml_names(tmp_path: Path) -> None:
    (command,) = readme_commands("digest=")
    shutil.copy(RELEASE, tmp_path / "release.yml")
    bash = shutil.which("bash") or "/bin/bash"
    done = subprocess.run([bash, "-c", f'{command}\nprintf %s "$digest"'], cwd=tmp_path, capture_output=True,
                          text=True, check=True)  # fmt: skip
    assert done.stdout == DIGEST
    (build,) = readme_commands("docker build")
    assert '--build-arg KAPP_CONTROLLER_DIGEST="$digest"' in build
    (base,) = [value for op, value in _instructions() if op == "FROM"]
    image = _substitute(base, {**_args(), "KAPP_CONTROLLER_DIGEST": done.stdout})
    deployment = release()[1]
    assert {container(deployment, name)["image"] for name in (CONTROLLER, SIDECAR)} == {image}


def test_the_schema_declares_every_value_with_its_type() -> None:
    text = (DEPLOY / "values.yml").read_text()
    assert '\n#@ load("sidecar.star", "valid_size")\n#@data/values-schema\n---\n' in text
    assert text.startswith("#! Owns: ")
    assert defaults() == {
        "image": "registry.example.com/platform/kapp-controller:v0.53.1-ocivendir",
        "cache_max_size": "2GiB",
        "shared_cache": True,  # a boolean: ytt refuses the string "false" for it
        "cache_claim_name": "",
        "signature_policies": "",
        "sigstore_trusted_root": "",
    }
    # a byte count may come as a number (--data-value-yaml) or a string: any type, checked by sidecar.star
    assert re.search(
        r"#@schema/type any=True\n#@schema/validation \(\"[^\"]+\", valid_size\), not_null=True\ncache_max_size:", text
    )
    assert parse_size(defaults()["cache_max_size"], "cache_max_size") == 2 << 30


def _env(given: Any) -> dict[str, str]:
    env = sidecar_star()["sidecar_env"](given)
    assert all(type(item["value"]) is str for item in env)  # Kubernetes takes no number or boolean
    return {item["name"]: item["value"] for item in env}


@pytest.mark.parametrize(("size", "text"), [("2GiB", "2GiB"), (1073741824, "1073741824"), ("512 MB", "512 MB")])
def test_the_sidecars_env_values_are_strings_whatever_type_the_size_has(size: object, text: str) -> None:
    env = _env(values(cache_max_size=size))
    assert env == {
        "OCIVENDIR_DELEGATE_VENDIR": "/vendir-real",
        "OCIVENDIR_CACHE_MAX_SIZE": text,
        "OCIVENDIR_SERVER_IDLE": "0",  # the sidecar's PID 1 reaps no orphan: the server never ends on its own
        "OCIVENDIR_CACHE_DIR": "/var/cache/ocivendir",
    }
    assert list(env)[:2] == ["OCIVENDIR_DELEGATE_VENDIR", "OCIVENDIR_CACHE_MAX_SIZE"]


def test_the_shared_cache_is_one_mounted_volume_and_the_dir_that_names_it() -> None:
    star, given = sidecar_star(), values()
    (mount,) = star["sidecar_mounts"](given)
    (volume,) = star["pod_volumes"](given)
    assert mount == {"name": "ocivendir-cache", "mountPath": _env(given)["OCIVENDIR_CACHE_DIR"]}
    assert volume == {"name": mount["name"], "emptyDir": {}}
    claimed = values(cache_claim_name="ocivendir-cache")
    assert star["pod_volumes"](claimed) == [{"name": "ocivendir-cache",
                                             "persistentVolumeClaim": {"claimName": "ocivendir-cache"}}]  # fmt: skip
    assert star["sidecar_mounts"](claimed) == [mount]


def test_without_a_shared_cache_no_cache_dir_no_mount_no_volume() -> None:
    star, given = sidecar_star(), values(shared_cache=False, cache_claim_name="ignored")
    assert set(_env(given)) == {"OCIVENDIR_DELEGATE_VENDIR", "OCIVENDIR_CACHE_MAX_SIZE", "OCIVENDIR_SERVER_IDLE"}
    assert star["sidecar_mounts"](given) == []
    assert star["pod_volumes"](given) == []


def test_signature_configmaps_are_mounted_read_only_where_the_variables_name_them() -> None:
    star = sidecar_star()
    given = values(signature_policies="ocivendir-policies", sigstore_trusted_root="sigstore-trusted-root")
    env = _env(given)
    assert env["OCIVENDIR_POLICY"] == "/etc/ocivendir/policies"
    assert env["OCIVENDIR_TRUSTED_ROOT"] == "/etc/ocivendir/sigstore/trusted_root.json"
    assert star["sidecar_mounts"](given)[1:] == [
        {"name": "ocivendir-policies", "mountPath": "/etc/ocivendir/policies", "readOnly": True},
        {"name": "ocivendir-trusted-root", "mountPath": "/etc/ocivendir/sigstore", "readOnly": True},
    ]
    assert star["pod_volumes"](given)[1:] == [
        {"name": "ocivendir-policies", "configMap": {"name": "ocivendir-policies"}},
        {"name": "ocivendir-trusted-root", "configMap": {
            "name": "sigstore-trusted-root", "items": [{"key": "trusted_root.json", "path": "trusted_root.json"}]}},
    ]  # fmt: skip
    policies_only = values(shared_cache=False, signature_policies="p")
    assert set(_env(policies_only)) - set(_env(values(shared_cache=False))) == {"OCIVENDIR_POLICY"}
    assert [m["name"] for m in star["sidecar_mounts"](policies_only)] == ["ocivendir-policies"]
    assert [v["name"] for v in star["pod_volumes"](policies_only)] == ["ocivendir-policies"]


SIZES = [
    "2GiB", "2gib", " 2 GiB ", "512MB", "1Gi", "1g", "1.5g", "1073741824", "0", "10kB", "10 KIB", "7e", "1b",
    "", " ", "1iB", "1i", "1.", ".5", "1.5.2", "2 G iB", "2GB/s", "1e3", "-1", "+1", "1,5G", "1 024", "0x10", "\uff11",
    "GiB", "2Gibi", "2 GiB B", "1zb", "2GiBs",
    1073741824, 0, -5, 1.5, True, False, None, [1], {"size": 1},
]  # fmt: skip


@pytest.mark.parametrize("size", SIZES, ids=repr)
def test_the_schema_accepts_exactly_the_sizes_ocivendir_reads(size: object) -> None:
    try:
        parse_size(str(size), "OCIVENDIR_CACHE_MAX_SIZE")
    except UsageError:
        readable = False
    else:
        readable = True
    assert sidecar_star()["valid_size"](size) is readable


def test_sizes_cover_both_answers() -> None:
    accepted = [size for size in SIZES if sidecar_star()["valid_size"](size)]
    assert len(accepted) == 16
    assert len(SIZES) - len(accepted) == 27


def test_the_overlay_takes_what_it_adds_from_sidecar_star() -> None:
    text = (DEPLOY / "overlay.yml").read_text()
    assert '#@ load("sidecar.star", "pod_volumes", "sidecar_env", "sidecar_mounts")\n' in text
    for function, key in [("sidecar_env", "env"), ("sidecar_mounts", "volumeMounts"), ("pod_volumes", "volumes")]:
        assert re.search(rf"\n( *){key}:\n\1#@ for \w+ in {function}\(data\.values\):\n\1#@overlay/append\n", text)
    (document,) = yaml.safe_load_all(text)  # ytt annotations are comments
    containers = document["spec"]["template"]["spec"]["containers"]
    assert [c["name"] for c in containers] == [CONTROLLER, SIDECAR]
    assert set(containers[1]) == {"name", "image", "env", "volumeMounts"}
    assert set(containers[0]) == {"name", "image"}
