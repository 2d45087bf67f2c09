"""deploy/kapp-controller as the tests read it.

sidecar.star run as Python, the schema's defaults, the release-like fixture, what the overlay makes of it, and the
commands docs/deploying.md gives an operator.
"""

from __future__ import annotations

import copy
import functools
import itertools
import re
import shlex
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy" / "kapp-controller"
RELEASE = Path(__file__).resolve().parent / "data" / "kapp-controller-release.yml"
SIDECAR = "kapp-controller-sidecarexec"  # the container names of kapp-controller's config/config/deployment.yml
CONTROLLER = "kapp-controller"


@functools.cache
def sidecar_star() -> dict[str, Any]:
    """sidecar.star's names, run as Python: `end`, which closes ytt's Starlark blocks, is a bare name here."""
    path = DEPLOY / "sidecar.star"
    namespace: dict[str, Any] = {"end": None}
    exec(compile(path.read_text(), str(path), "exec"), namespace)  # noqa: S102 - the repository's own file
    return namespace


def defaults() -> dict[str, Any]:
    """values.yml's defaults (its ytt annotations are comments to YAML)."""
    (document,) = yaml.safe_load_all((DEPLOY / "values.yml").read_text())
    return dict(document)


def values(**overrides: Any) -> SimpleNamespace:
    """The data values ytt gives the overlay (`data.values`): the defaults with the overrides."""
    return SimpleNamespace(**{**defaults(), **overrides})


def release() -> list[dict[str, Any]]:
    return list(yaml.safe_load_all(RELEASE.read_text()))


def container(document: dict[str, Any], name: str) -> dict[str, Any]:
    containers = document["spec"]["template"]["spec"]["containers"]
    return next(c for c in containers if c["name"] == name)


def rendered(given: SimpleNamespace) -> list[dict[str, Any]]:
    """The release fixture as overlay.yml changes it: the Deployment's images, and what sidecar.star adds."""
    star = sidecar_star()
    documents = copy.deepcopy(release())
    deployment = next(d for d in documents if d["kind"] == "Deployment")
    for name in (CONTROLLER, SIDECAR):
        container(deployment, name)["image"] = given.image
    sidecar = container(deployment, SIDECAR)
    sidecar["env"] += star["sidecar_env"](given)
    sidecar["volumeMounts"] += star["sidecar_mounts"](given)
    deployment["spec"]["template"]["spec"]["volumes"] += star["pod_volumes"](given)
    return documents


def readme_deploy_section() -> str:
    """docs/deploying.md up to its first section after the steps (the self-contained build)."""
    text = (ROOT / "docs" / "deploying.md").read_text()
    start = text.index("# Deploying into kapp-controller\n")
    return text[start : text.index("\n## ", start + 1)]


def readme_commands(program: str) -> list[str]:
    """The deploy section's shell commands that start with `program`, continuation lines joined."""
    blocks = re.findall(r"```sh\n(.*?)```", readme_deploy_section(), re.DOTALL)
    joined = [line.strip() for block in blocks for line in block.replace("\\\n", " ").splitlines()]
    return [line for line in joined if line.startswith(program)]


def ytt_argv(command: str) -> list[str]:
    """A documented `ytt ... | kapp deploy ...` as ytt's argv (what kapp would deploy is ytt's output)."""
    argv = shlex.split(command)
    return argv[: argv.index("|")] if "|" in argv else argv


def given_values(argv: list[str]) -> SimpleNamespace:
    """The data values a ytt argv sets: `--data-value` (`-v`) strings, `--data-value-yaml` YAML."""
    overrides: dict[str, Any] = {}
    for flag, setting in itertools.pairwise(argv):
        if flag in {"--data-value", "-v", "--data-value-yaml"}:
            name, text = setting.split("=", 1)
            overrides[name] = yaml.safe_load(text) if flag == "--data-value-yaml" else text
    return values(**overrides)
