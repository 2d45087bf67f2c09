"""deploy/kapp-controller: the Dockerfile's paths exist in the build, the overlay sets what the sidecar needs.

No container runtime here: the Dockerfile is read, its ADDed archive pattern is matched against dist/, and the link
target is looked up in that archive as ADD would unpack it.
"""

from __future__ import annotations

import fnmatch
import os
import re
import tarfile
from pathlib import Path
from typing import Any

import pytest
import yaml

from ocivendir.settings import parse_size

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy" / "kapp-controller"
SIDECAR = "kapp-controller-sidecarexec"  # the container names of kapp-controller's config/config/deployment.yml
CONTROLLER = "kapp-controller"


def _instructions() -> list[tuple[str, str]]:
    text = (DEPLOY / "Dockerfile").read_text().replace("\\\n", " ")
    lines = [line.strip() for line in text.splitlines() if line.strip() and not line.lstrip().startswith("#")]
    return [(line.split(None, 1)[0], line.split(None, 1)[1]) for line in lines]


def _args() -> dict[str, str]:
    return dict(value.split("=", 1) for op, value in _instructions() if op == "ARG" and "=" in value)


def _substitute(text: str, args: dict[str, str]) -> str:
    return re.sub(r"\$\{(\w+)\}", lambda m: args[m.group(1)], text)


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


def test_the_image_derives_from_kapp_controllers_release_and_keeps_its_user() -> None:
    instructions = _instructions()
    froms = [value for op, value in instructions if op == "FROM"]
    assert froms == ["ghcr.io/carvel-dev/kapp-controller:${KAPP_CONTROLLER_VERSION}"]
    assert "KAPP_CONTROLLER_VERSION" in _args()
    assert ("ENV", "OCIVENDIR_DELEGATE_VENDIR=/vendir-real") in instructions
    assert [value for op, value in instructions if op == "USER"][-1] == "1000"


def _container(document: dict[str, Any], name: str) -> dict[str, Any]:
    containers = document["spec"]["template"]["spec"]["containers"]
    return next(c for c in containers if c["name"] == name)


def test_the_overlay_sets_delegation_the_cache_budget_and_mounts_the_cache_volume() -> None:
    (document,) = yaml.safe_load_all((DEPLOY / "overlay.yml").read_text())  # ytt annotations are comments
    sidecar = _container(document, SIDECAR)
    env = {e["name"]: e["value"] for e in sidecar["env"]}
    assert env["OCIVENDIR_DELEGATE_VENDIR"] == "/vendir-real"
    assert set(env) == {"OCIVENDIR_DELEGATE_VENDIR", "OCIVENDIR_CACHE_MAX_SIZE", "OCIVENDIR_CACHE_DIR"}
    (mount,) = sidecar["volumeMounts"]
    assert mount["mountPath"] == env["OCIVENDIR_CACHE_DIR"]
    (volume,) = document["spec"]["template"]["spec"]["volumes"]
    assert volume["name"] == mount["name"]
    assert _container(document, CONTROLLER)["name"] == CONTROLLER
    (values,) = yaml.safe_load_all((DEPLOY / "values.yml").read_text())
    assert set(values) == {"image", "cache_max_size", "shared_cache", "cache_claim_name"}
    assert parse_size(values["cache_max_size"], "cache_max_size") == 2 << 30
