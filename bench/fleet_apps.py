"""Owns: the fleet's Apps: the artifacts they fetch, and each App's stdin exactly as kapp-controller writes it.

stdin is a placeholder dockerconfigjson Secret, then a Config with one directory "0" and `path: .`. Of N Apps: 40 %
digest-pinned relocated bundles, 30 % digest-pinned bundles that are not relocated, 20 % digest-pinned images, 10 % tag
references (half relocated bundles by tag, half images by tag); about one artifact per five Apps.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass

from tests.support.builders import Pusher, make_image, publish_bundle, relocate
from tests.support.kapp import placeholder_secret

CONFIG = """apiVersion: vendir.k14s.io/v1alpha1
directories:
- contents:
  - {kind}:
      {key}: {ref}
      secretRef:
        name: {name}-fetch-0
    path: .
  path: "0"
kind: Config
minimumRequiredVersion: ""
"""
CATEGORIES = ("relocated", "not_relocated", "image", "tag_bundle", "tag_image")
APPS_PER_ARTIFACT = 5


@dataclass(frozen=True)
class App:
    """One App: its name, what it fetches (a bundle or an image, by digest or by tag) and from which repository."""

    name: str
    category: str
    ref: str
    repo: str

    @property
    def pinned(self) -> bool:
        """Whether the App names its content by digest (served offline from the cache)."""
        return not self.category.startswith("tag_")

    @property
    def stdin(self) -> str:
        """The stream kapp-controller writes to `vendir sync -f -`."""
        bundle = self.category in {"relocated", "not_relocated", "tag_bundle"}
        kind, key = ("imgpkgBundle", "image") if bundle else ("image", "url")
        return placeholder_secret(self.name) + CONFIG.format(kind=kind, key=key, ref=self.ref,
                                                                         name=self.name)  # fmt: skip


def shape(apps: int) -> dict[str, int]:
    """How many Apps of each category a fleet of `apps` has (the tags take what the rounding leaves)."""
    relocated, not_relocated, image = round(apps * 0.4), round(apps * 0.3), round(apps * 0.2)
    tags = apps - relocated - not_relocated - image
    tag_bundle = math.ceil(tags / 2)
    return {"relocated": relocated, "not_relocated": not_relocated, "image": image, "tag_bundle": tag_bundle,
            "tag_image": tags - tag_bundle}  # fmt: skip


def _files(label: str, count: int = 12, size: int = 3000) -> dict[str, str]:
    """A small configuration tree (about 36 KiB of YAML) unique to `label`."""
    line = f"# {label}: " + "x" * 60 + "\n"
    body = line * (size // len(line))
    return {f"config/{label}-{number:02}.yml": f"name: {label}-{number}\n{body}" for number in range(count)}


def _artifact(pusher: Pusher, category: str, number: int) -> tuple[str, str]:
    """Push one artifact of `category`; its reference and the repository Apps fetch it from."""
    host = pusher.registry.host
    label = f"{category}{number}"
    if category in {"image", "tag_image"}:
        repo = f"fleet/{label}"
        ref = pusher.image(repo, make_image(_files(label)), tag="v1")
        return (ref if category == "image" else f"{host}/{repo}:v1"), repo
    published = publish_bundle(pusher, f"fleet/{label}", images=2, files=_files(label))
    if category == "not_relocated":
        return published.ref(pusher.registry), published.bundle_repo
    repo = f"fleet/{label}/relocated"
    relocate(pusher, published, repo)
    return (published.ref(pusher.registry, repo) if category == "relocated" else f"{host}/{repo}:v1"), repo


def publish(pusher: Pusher, apps: int) -> tuple[list[App], int]:
    """Push the fleet's artifacts; the Apps (in a fixed shuffled order) and how many distinct artifacts there are."""
    fleet: list[App] = []
    artifacts = 0
    for category, count in shape(apps).items():
        if count == 0:
            continue
        targets = [_artifact(pusher, category, n) for n in range(max(1, math.ceil(count / APPS_PER_ARTIFACT)))]
        artifacts += len(targets)
        for number in range(count):
            ref, repo = targets[number % len(targets)]
            fleet.append(App(f"app-{category}-{number:02}", category, ref, repo))
    random.Random(10).shuffle(fleet)
    return fleet, artifacts
