"""deploy/kapp-controller rendered by a real ytt over a release-like YAML: the documented commands, the wrong types.

Runs when `ytt` is on PATH (CI has none; docs/deploying.md says how to build one), skipped otherwise.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.packaging.deploy_recipe import (
    DEPLOY,
    RELEASE,
    SIDECAR,
    container,
    given_values,
    readme_commands,
    release,
    rendered,
    sidecar_star,
    values,
    ytt_argv,
)
from tests.packaging.test_deploy import SIZES

YTT = shutil.which("ytt")
pytestmark = pytest.mark.skipif(YTT is None, reason="no ytt on PATH (docs/deploying.md says how to build one)")


@pytest.fixture
def operator_dir(tmp_path: Path) -> Path:
    """Where an operator runs docs/deploying.md's commands: release.yml, and deploy/ from the repository."""
    shutil.copy(RELEASE, tmp_path / "release.yml")
    (tmp_path / "deploy").symlink_to(DEPLOY.parent, target_is_directory=True)
    return tmp_path


def _ytt(cwd: Path, argv: list[str]) -> subprocess.CompletedProcess[str]:
    assert YTT is not None
    return subprocess.run([YTT, *argv[1:]], cwd=cwd, capture_output=True, text=True, timeout=60, check=False)


def _documents(done: subprocess.CompletedProcess[str]) -> list[dict[str, Any]]:
    assert done.returncode == 0, done.stderr
    return list(yaml.safe_load_all(done.stdout))


def test_every_documented_command_renders_what_sidecar_star_adds_and_nothing_else(operator_dir: Path) -> None:
    commands = [ytt_argv(command) for command in readme_commands("ytt ")]
    assert len(commands) == 4  # the default, the shared cache off, a PersistentVolumeClaim, signature ConfigMaps
    outputs = []
    for argv in commands:
        given = given_values(argv)
        documents = _documents(_ytt(operator_dir, argv))
        assert documents == rendered(given)
        assert documents[0] == release()[0]  # the Namespace of the same name
        outputs.append(container(documents[1], SIDECAR))
    default, off, claimed, signed = outputs
    assert [e["name"] for e in default["env"]][-1] == "OCIVENDIR_CACHE_DIR"
    assert "OCIVENDIR_CACHE_DIR" not in {e["name"] for e in off["env"]}
    assert off["volumeMounts"] == container(release()[1], SIDECAR)["volumeMounts"]
    assert {"name": "OCIVENDIR_CACHE_MAX_SIZE", "value": "10GiB"} in claimed["env"]
    assert {"name": "OCIVENDIR_POLICY", "value": "/etc/ocivendir/policies"} in signed["env"]
    assert [m["name"] for m in signed["volumeMounts"]][-2:] == ["ocivendir-policies", "ocivendir-trusted-root"]


def test_a_byte_count_given_as_yaml_is_rendered_as_a_string(operator_dir: Path) -> None:
    done = _ytt(operator_dir, ["ytt", "-f", "release.yml", "-f", "deploy/kapp-controller/",
                               "--data-value-yaml", "cache_max_size=1073741824"])  # fmt: skip
    documents = _documents(done)
    assert documents == rendered(values(cache_max_size=1073741824))
    assert {"name": "OCIVENDIR_CACHE_MAX_SIZE", "value": "1073741824"} in container(documents[1], SIDECAR)["env"]
    assert '\n          value: "1073741824"\n' in done.stdout


@pytest.mark.parametrize(
    ("setting", "message"),
    [
        (["-v", "shared_cache=false"], "= found: string\n    = expected: boolean (by values.yml:"),
        (["--data-value", "shared_cache=true"], "= expected: boolean"),
        (["--data-value-yaml", "shared_cache=1"], "= found: integer\n    = expected: boolean"),
        (["--data-value-yaml", "cache_claim_name=false"], "= expected: string"),
        (["-v", "cache_max_size=2GB/s"], "- must be: a byte count (1073741824) or a size such as 2GiB, 512MB or 1Gi"),
        (["--data-value-yaml", "cache_max_size=true"], "- must be: a byte count (1073741824)"),
        (["--data-value-yaml", "cache_max_size=null"], "- must be: not null"),
        (["-v", "image="], "- must be: length >= 1"),
        (["-v", "shared_cach=false"], "Given data value is not declared in schema"),
    ],
)  # fmt: skip
def test_a_wrong_type_or_value_stops_the_rendering(operator_dir: Path, setting: list[str], message: str) -> None:
    done = _ytt(operator_dir, ["ytt", "-f", "release.yml", "-f", "deploy/kapp-controller/", *setting])
    assert done.returncode == 1
    assert done.stdout == ""
    assert message in done.stderr


def test_ytt_accepts_the_sizes_sidecar_star_accepts_as_python(operator_dir: Path) -> None:
    """The schema's validation runs sidecar.star in ytt's Starlark: the same answers as the Python run."""
    valid_size = sidecar_star()["valid_size"]
    answers = {}
    for size in SIZES:
        text = json.dumps(size)  # JSON is YAML: a string stays a string ("1e3" is no float)
        done = _ytt(operator_dir, ["ytt", "-f", "release.yml", "-f", "deploy/kapp-controller/",
                                   "--data-value-yaml", f"cache_max_size={text}"])  # fmt: skip
        answers[repr(size)] = (done.returncode == 0, valid_size(size))
    assert {size: ytt for size, (ytt, python) in answers.items() if ytt != python} == {}
    assert sum(ytt for ytt, _ in answers.values()) == 16


def test_a_release_without_kapp_controllers_deployment_stops_the_rendering(operator_dir: Path) -> None:
    (operator_dir / "release.yml").write_text(yaml.safe_dump(release()[0]))
    done = _ytt(operator_dir, ["ytt", "-f", "release.yml", "-f", "deploy/kapp-controller/"])
    assert done.returncode == 1
    assert "Expected number of matched nodes to be 1, but was 0" in done.stderr
