"""Mirrors against real registries: an origin and a second docker-registry in proxy mode in front of it.

Fixtures are pushed to the origin only; the mirror is Distribution's pull-through cache (`proxy.remoteurl`). A mirror is
trusted for availability, never for content: what it serves is verified, and what ends up cached, locked and reported
names the origin.
"""

from __future__ import annotations

import json
import re
import socket
import subprocess
import sys
import textwrap
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.conftest import CliResult, run_cli
from tests.support import registry as registry_support
from tests.support.builders import Pusher, make_image, publish_bundle, relocate, sha
from tests.support.faults import Rule, fault_proxy, silent_server
from tests.support.registry import Registry

HEAD = "apiVersion: vendir.k14s.io/v1alpha1\nkind: Config\n"


@dataclass
class Pair:
    """An origin registry and a proxy-mode mirror of it, and a pusher for the origin."""

    origin: Registry
    mirror: Registry
    pusher: Pusher

    def registries_yaml(self, path: Path, *endpoints: str, configs: str = "") -> Path:
        listed = ", ".join(f'"{e}"' for e in endpoints or (self.mirror.url,))
        path.write_text(f'mirrors:\n  "{self.origin.host}":\n    endpoint: [{listed}]\n{configs}')
        return path

    def stop_origin(self) -> None:
        """Stop the origin once the mirror holds every blob it served.

        Distribution's proxy stores a blob while streaming it; on a loaded machine that can end after the client has.
        """
        served = {p.rsplit("/", 1)[1] for m, p, s in self.mirror.settled_requests()
                  if m == "GET" and "/blobs/sha256:" in p and s == 200}  # fmt: skip
        deadline = time.monotonic() + 30
        while any(not self.mirror.blob_file(d).is_file() for d in served) and time.monotonic() < deadline:
            time.sleep(0.05)
        self.origin.stop()

    def use(self, monkeypatch: pytest.MonkeyPatch, path: Path, *endpoints: str) -> None:
        """Write a registries.yaml naming the mirror (or `endpoints`) and point OCIVENDIR_REGISTRY_CONFIG at it."""
        monkeypatch.setenv("OCIVENDIR_REGISTRY_CONFIG", str(self.registries_yaml(path, *endpoints)))


def _start_pair(workdir: Path, *, auth: bool = False) -> Iterator[Pair]:
    """An origin and a mirror: a proxy-mode pull-through cache, or with `auth` a replica.

    With `auth` both need (different) credentials, and the mirror holds the same content as a replica does (a Zot sync
    or Harbor replication target): Distribution 2.8's proxy cannot log in to a Basic-auth upstream.
    """
    mode = "htpasswd" if auth else "plain"
    origin = Registry(mode=mode, workdir=workdir / "origin").start()
    mirror = Registry(
        mode=mode,
        workdir=workdir / "mirror",
        proxy_remote=None if auth else origin.url,
        htpasswd=registry_support.FIXTURES / "htpasswd-mirror",
        credentials=(registry_support.MIRROR_USERNAME, registry_support.MIRROR_PASSWORD),
    )
    try:
        mirror.start()
        yield Pair(origin, mirror, Pusher(origin))
    finally:
        mirror.stop()
        origin.stop()


@pytest.fixture
def pair(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Pair]:
    if registry_support.binary() is None:
        pytest.skip("docker-registry not installed")
    yield from _start_pair(tmp_path_factory.mktemp("pair"))


def sync_json(work: Path, config: str, *args: str) -> tuple[CliResult, dict[str, object]]:
    (work / "vendir.yml").write_text(config)
    result = run_cli("sync", "--chdir", str(work), "--json", *args)
    return result, json.loads(result.stdout) if result.stdout.strip() else {}


def image_config(ref: str) -> str:
    return HEAD + f"directories:\n- path: vendor\n  contents:\n  - path: app\n    image: {{url: '{ref}'}}\n"


def images_config(**contents: str) -> str:
    """A vendir.yml with one image content per keyword (its path) under `vendor`."""
    listed = "".join(f'  - {{path: {path}, image: {{url: "{url}"}}}}\n' for path, url in contents.items())
    return HEAD + f"directories:\n- path: vendor\n  contents:\n{listed}"


def served(doc: dict[str, object]) -> dict[str, str]:
    return dict(doc["result"]["requests"]["served_by"])  # type: ignore[index]


def blob_gets(requests: list[tuple[str, str, int]]) -> Counter[str]:
    return Counter(p.rsplit("/", 1)[1] for m, p, s in requests if m == "GET" and "/blobs/" in p and s == 200)


def test_a_sync_goes_through_the_mirror_and_still_works_with_the_origin_stopped(
    pair: Pair, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ref = pair.pusher.image("team/app", make_image({"app.yml": "replicas: 2\n"}), tag="v1")
    pair.use(monkeypatch, tmp_path / "registries.yaml")
    tagged = f"{pair.origin.host}/team/app:v1"
    config = images_config(pinned=ref, tagged=tagged)
    work = tmp_path / "work"
    work.mkdir()
    first, doc = sync_json(work, config, "--cache-dir", str(tmp_path / "cache1"))
    assert first.exit_code == 0, first.stderr
    assert set(served(doc).values()) == {pair.mirror.url}
    assert served(doc)[tagged] == pair.mirror.url
    assert doc["result"]["requests"]["by_endpoint"] == {pair.mirror.url: doc["result"]["requests"]["total"]}  # type: ignore[index]
    lock = (work / "vendir.lock.yml").read_text()
    assert f"url: {ref}" in lock
    assert f"url: {pair.origin.host}/team/app@" in lock.split("path: tagged")[0]  # the origin's name, by digest
    listed = run_cli("cache", "ls", "--cache-dir", str(tmp_path / "cache1"), "--json")
    refs = {e["ref"] for e in json.loads(listed.stdout)["result"]["entries"]}
    assert refs == {ref}  # cached under the origin's name, never the mirror's
    pair.stop_origin()
    second, doc = sync_json(work, config, "--cache-dir", str(tmp_path / "cache2"))
    assert second.exit_code == 0, second.stderr
    assert set(served(doc).values()) == {pair.mirror.url}
    assert (work / "vendor/pinned/app.yml").read_text() == "replicas: 2\n"


def test_a_dead_mirror_falls_back_to_the_origin_with_one_warning(
    pair: Pair, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ref = pair.pusher.image("team/app", make_image({"a.txt": "a"}))
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{closed.getsockname()[1]}"
    pair.use(monkeypatch, tmp_path / "r.yaml", dead)
    result = run_cli("pull", "-i", ref, "-o", str(tmp_path / "out"), "--no-cache", "--json")
    assert result.exit_code == 0, result.stderr
    doc = json.loads(result.stdout)
    assert set(served(doc).values()) == {pair.origin.host}
    # the first object's one try at the mirror (a refusal is not retried), then the origin's https try before plain
    # http; later objects skip the dead mirror
    assert doc["result"]["requests"]["connect_errors"] == 1 + 1
    assert result.stderr.count(f"mirror {dead} is unreachable") == 1
    assert doc["result"]["warnings"] == [f"mirror {dead} is unreachable; not asked again this run"]


def test_a_mirror_that_never_answers_is_left_after_the_response_timeout_and_the_origin_serves(
    pair: Pair, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    image = make_image({"a.txt": "from the origin\n"})
    ref = pair.pusher.image("team/app", image)
    with silent_server() as hung:
        pair.use(monkeypatch, tmp_path / "r.yaml", hung.url)
        mark = pair.origin.mark()
        result = run_cli("pull", "-i", ref, "-o", str(tmp_path / "out"), "--no-cache", "--json",
                         "--registry-response-header-timeout", "1s")  # fmt: skip
        asked = hung.accepted
    assert result.exit_code == 0, result.stderr
    doc = json.loads(result.stdout)
    assert (tmp_path / "out/a.txt").read_text() == "from the origin\n"
    assert set(served(doc).values()) == {pair.origin.host}
    # the manifest's one try timed out; the config and layer never waited on the hung mirror again
    assert asked == 1
    warning = f"mirror {hung.url} did not answer within 1s; not asked again this run"
    assert result.stderr.count(warning) == 1
    assert doc["result"]["warnings"] == [warning]
    origin = pair.origin.since(mark)
    assert sorted((m, p.rsplit("/", 2)[1]) for m, p, _ in origin) == [("GET", "blobs")] * 2 + [("GET", "manifests")]
    assert doc["result"]["requests"]["by_endpoint"] == {pair.origin.host: 3}


def _through_faulty_mirror(pair: Pair, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, *rules: Rule,
                           ) -> tuple[CliResult, list[tuple[str, str, int]], list[tuple[str, str, int]], str]:  # fmt: skip
    """Pull a fresh image through a fault proxy in front of the mirror (3 attempts per request).

    Returns the result, what the proxy answered, what the origin served, and the proxy's URL.
    """
    ref = pair.pusher.image("team/app", make_image({"a.txt": f"{tmp_path.name}\n"}))
    with fault_proxy(pair.mirror.host) as faulty:
        faulty.rules.extend(rules)
        pair.use(monkeypatch, tmp_path / "r.yaml", faulty.url)
        mark = pair.origin.mark()
        result = run_cli("pull", "-i", ref, "-o", str(tmp_path / "out"), "--no-cache", "--json",
                         "--registry-retry-count", "3")  # fmt: skip
        answered = list(faulty.log)
    assert result.exit_code == 0, result.stderr
    assert (tmp_path / "out/a.txt").read_text() == f"{tmp_path.name}\n"
    return result, answered, pair.origin.since(mark), faulty.url


def test_a_mirror_answering_5xx_is_retried_then_passed_over_for_the_origin_each_object(
    pair: Pair, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, no_retry_sleep: list[float]
) -> None:
    rule = Rule("*", "/v2/", status=503)
    result, answered, origin, faulty = _through_faulty_mirror(pair, tmp_path, monkeypatch, rule)
    doc = json.loads(result.stdout)
    assert set(served(doc).values()) == {pair.origin.host}
    # manifest, config, layer: 3 attempts each at the mirror (2 backoff pauses each), then one GET each at the origin
    assert Counter(status for _, _, status in answered) == {503: 9}
    assert len({path for _, path, _ in answered}) == 3
    assert len(no_retry_sleep) == 6
    assert [m for m, _, _ in origin] == ["GET"] * 3
    assert doc["result"]["requests"]["by_endpoint"] == {faulty: 9, pair.origin.host: 3}
    assert doc["result"]["warnings"] == []  # a 5xx is the mirror's trouble, not the user's


def test_a_mirror_answering_429_is_asked_again_after_its_retry_after_and_serves(
    pair: Pair, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, no_retry_sleep: list[float]
) -> None:
    rule = Rule("GET", "/manifests/", status=429, headers={"Retry-After": "20"}, times=1)
    result, answered, _, faulty = _through_faulty_mirror(pair, tmp_path, monkeypatch, rule)
    doc = json.loads(result.stdout)
    assert set(served(doc).values()) == {faulty}
    assert [status for _, _, status in answered] == [429, 200, 200, 200]
    assert doc["result"]["requests"]["by_endpoint"] == {faulty: 4}  # ocivendir never asked the origin
    # the retry waited the 20 s asked for (not a backoff), and the 2 blob requests waited out what was left of it
    assert no_retry_sleep[0] == 20.0
    assert len(no_retry_sleep) == 3
    assert all(0 < pause <= 20.0 for pause in no_retry_sleep[1:])


def test_a_mirror_that_keeps_answering_429_is_passed_over_after_its_retries_and_a_wait_over_the_cap_at_once(
    pair: Pair, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, no_retry_sleep: list[float]
) -> None:
    rule = Rule("*", "/v2/", status=429, headers={"Retry-After": "20"})
    result, answered, origin, _ = _through_faulty_mirror(pair, tmp_path, monkeypatch, rule)
    assert set(served(json.loads(result.stdout)).values()) == {pair.origin.host}
    assert Counter(status for _, _, status in answered) == {429: 9}  # 3 attempts for each of 3 objects
    assert no_retry_sleep.count(20.0) == 6  # each retry waited the Retry-After
    assert [m for m, _, _ in origin] == ["GET"] * 3
    # a Retry-After past the 30 s ocivendir honours: one attempt per object, no wait, the origin at once
    no_retry_sleep.clear()
    rule = Rule("*", "/v2/", status=429, headers={"Retry-After": "3600"})
    (tmp_path / "over").mkdir()
    result, answered, origin, _ = _through_faulty_mirror(pair, tmp_path / "over", monkeypatch, rule)
    assert set(served(json.loads(result.stdout)).values()) == {pair.origin.host}
    assert Counter(status for _, _, status in answered) == {429: 3}
    assert no_retry_sleep == []


def test_a_mirror_serving_altered_bytes_is_rejected_the_origin_used_and_nothing_unverified_cached(
    pair: Pair, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    image = make_image({"payload.bin": "x" * 4096})
    ref = pair.pusher.image("team/app", image)
    layer = image.layers[0]
    cache = tmp_path / "cache"
    with fault_proxy(pair.mirror.host) as liar:
        liar.rules.append(Rule("GET", f"/blobs/{sha(layer)}", tamper=True))
        pair.use(monkeypatch, tmp_path / "r.yaml", liar.url)
        result = run_cli("pull", "-i", ref, "-o", str(tmp_path / "out"), "--cache-dir", str(cache), "--json")
        assert liar.rules[0].hits == 1
    assert result.exit_code == 0, result.stderr
    doc = json.loads(result.stdout)
    layer_ref = f"{pair.origin.host}/team/app@{sha(layer)}"
    assert served(doc)[layer_ref] == pair.origin.host
    assert served(doc)[ref] == liar.url
    assert f"mirror {liar.url} served content that does not match {layer_ref}" in result.stderr
    assert (tmp_path / "out/payload.bin").read_text() == "x" * 4096
    for blob in (cache / "blobs/sha256").iterdir():
        assert sha(blob.read_bytes()) == f"sha256:{blob.name}"  # every cached byte is the one asked for
    assert not list((cache / "tmp").iterdir())
    verified = run_cli("cache", "verify", "--cache-dir", str(cache))  # reports only, changes nothing
    assert verified.exit_code == 0, verified.stdout


def test_tag_resolution_and_tag_selection_go_through_the_mirror_also_with_the_origin_stopped(
    pair: Pair, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for tag in ("1.0.0", "1.2.0", "2.0.0"):
        pair.pusher.image("team/app", make_image({"version.txt": tag}), tag=tag)
    pair.use(monkeypatch, tmp_path / "r.yaml")
    repo = f"{pair.origin.host}/team/app"
    config = HEAD + textwrap.dedent(f"""\
        directories:
        - path: vendor
          contents:
          - path: app
            image:
              url: {repo}
              tagSelection: {{semver: {{constraints: "<2.0.0"}}}}
        """)
    work = tmp_path / "work"
    work.mkdir()
    mark = pair.origin.mark()
    result, doc = sync_json(work, config, "--no-cache")
    assert result.exit_code == 0, result.stderr
    assert (work / "vendor/app/version.txt").read_text() == "1.2.0"
    assert served(doc)[f"{repo}:tags"] == pair.mirror.url
    assert served(doc)[f"{repo}:1.2.0"] == pair.mirror.url
    assert [p for _, p, _ in pair.origin.since(mark) if "/tags/list" in p] == ["/v2/team/app/tags/list"]
    pair.stop_origin()
    (work / "vendor").rename(tmp_path / "first")
    again, doc = sync_json(work, config, "--no-cache")  # the proxy answers from the tags it has seen
    assert again.exit_code == 0, again.stderr
    assert (work / "vendor/app/version.txt").read_text() == "1.2.0"


def test_a_rewrite_renames_the_repository_at_the_mirror_only_and_everything_else_names_the_origin(
    pair: Pair, own_registry: Registry, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A Harbor-like replica holds the origin's `team/*` under `mirror-project/team/*` (k3s `rewrite`, a Go regexp)."""
    replica = own_registry
    image, only_origin = make_image({"app.yml": "from either\n"}), make_image({"solo.yml": "origin only\n"})
    ref = pair.pusher.image("team/app", image, tag="v1")
    solo = pair.pusher.image("team/solo", only_origin)
    Pusher(replica).image("mirror-project/team/app", image, tag="v1")
    path = tmp_path / "registries.yaml"
    path.write_text(f'mirrors:\n  "{pair.origin.host}":\n    endpoint: ["{replica.url}"]\n'
                    '    rewrite:\n      "^team/(.*)$": "mirror-project/team/$1"\n')  # fmt: skip
    monkeypatch.setenv("OCIVENDIR_REGISTRY_CONFIG", str(path))
    tagged = f"{pair.origin.host}/team/app:v1"
    config = images_config(pinned=ref, tagged=tagged, solo=solo)
    work, cache = tmp_path / "work", tmp_path / "cache"
    work.mkdir()
    origin_mark, replica_mark = pair.origin.mark(), replica.mark()
    result, doc = sync_json(work, config, "--cache-dir", str(cache))
    assert result.exit_code == 0, result.stderr
    assert (work / "vendor/tagged/app.yml").read_text() == "from either\n"
    assert (work / "vendor/solo/solo.yml").read_text() == "origin only\n"
    # the replica was asked only under the rewritten name; the origin only under its own, and only for team/solo
    asked = {p.split("/manifests/")[0].split("/blobs/")[0] for _, p, _ in replica.since(replica_mark)}
    assert asked == {"/v2/mirror-project/team/app", "/v2/mirror-project/team/solo"}
    at_origin = pair.origin.since(origin_mark)
    assert {p.split("/manifests/")[0].split("/blobs/")[0] for _, p, _ in at_origin} == {"/v2/team/solo"}
    assert len(at_origin) == 3  # team/solo's manifest, config and layer; the replica's 404 moved it on
    by = served(doc)
    assert (by[ref], by[tagged], by[solo]) == (replica.url, replica.url, pair.origin.host)
    lock = (work / "vendir.lock.yml").read_text()
    assert "mirror-project" not in lock
    assert f"url: {pair.origin.host}/team/app@{image.digest}" in lock  # the tag locked under the origin's name
    listed = run_cli("cache", "ls", "--cache-dir", str(cache), "--json")
    assert {e["ref"] for e in json.loads(listed.stdout)["result"]["entries"]} == {ref, solo}


def verdicts(ref: str, *args: str) -> dict[str, object]:
    result = run_cli("verify-relocation", "-b", ref, "--each-image", "--json", *args)
    bundle = json.loads(result.stdout)["result"]["bundles"][0]
    return {"exit": result.exit_code, "verdict": bundle["verdict"],
            "images": sorted((i["image"], i["status"]) for i in bundle["images"])}  # fmt: skip


def test_relocation_verdicts_are_the_same_with_and_without_the_mirror(
    pair: Pair, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    published = publish_bundle(pair.pusher, "team", images=3)
    relocate(pair.pusher, published, "mirror/full")
    relocate(pair.pusher, published, "mirror/partial", with_locations=False, skip=[next(iter(published.images))])
    refs = [published.ref(pair.origin, repo) for repo in ("mirror/full", "mirror/partial")]
    direct = [verdicts(ref, "--no-cache") for ref in refs]
    pair.use(monkeypatch, tmp_path / "r.yaml")
    mark = pair.mirror.mark()
    through = [verdicts(ref, "--no-cache") for ref in refs]
    assert through == direct
    assert [d["exit"] for d in direct] == [0, 3]
    assert any("/manifests/" in p for _, p, _ in pair.mirror.since(mark))  # the probes did go to the mirror
    pulled = run_cli("pull", "-b", refs[1], "-o", str(tmp_path / "out"), "--no-cache", "--json")
    assert json.loads(pulled.stdout)["result"]["relocation"]["relocated"] is False


def test_a_probe_for_an_image_the_origin_lacks_asks_a_distribution_mirror_once(
    pair: Pair, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, no_retry_sleep: list[float]
) -> None:
    published = publish_bundle(pair.pusher, "team", images=2)
    missing = next(iter(published.images))
    relocate(pair.pusher, published, "mirror/partial", with_locations=False, skip=[missing])
    ref = published.ref(pair.origin, "mirror/partial")
    pair.use(monkeypatch, tmp_path / "r.yaml")
    mark = pair.mirror.mark()
    assert verdicts(ref, "--no-cache")["exit"] == 3  # not relocated: one image is missing
    digest = published.images[missing].digest
    probes = [(m, s) for m, p, s in pair.mirror.since(mark) if p == f"/v2/mirror/partial/manifests/{digest}"]
    # Distribution's proxy answers 500 (not 404) for a manifest its upstream lacks: no retries there, the origin
    # is asked next and says 404 (it was asked 5 times, with 4 backoff pauses)
    assert probes == [("HEAD", 500)]
    assert no_retry_sleep == []


@pytest.fixture
def auth_pair(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Pair]:
    if registry_support.binary() is None:
        pytest.skip("docker-registry not installed")
    yield from _start_pair(tmp_path_factory.mktemp("auth-pair"), auth=True)


def test_each_endpoint_gets_its_own_credentials_and_registry_wide_ones_stay_with_the_origin(
    auth_pair: Pair, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pair = auth_pair
    image = make_image({"a.txt": "secret stuff"})
    ref = pair.pusher.image("team/app", image)
    Pusher(pair.mirror).image("team/app", image)
    origin_auth = f"  {pair.origin.host}:\n    auth: {{username: tester, password: s3cret-pass}}\n"
    mirror_auth = f"  {pair.mirror.host}:\n    auth: {{username: mirroruser, password: m1rror-pass}}\n"
    both = pair.registries_yaml(tmp_path / "both.yaml", configs=f"configs:\n{origin_auth}{mirror_auth}")
    monkeypatch.setenv("OCIVENDIR_REGISTRY_CONFIG", str(both))
    result = run_cli("pull", "-i", ref, "-o", str(tmp_path / "a"), "--no-cache", "--json")
    assert result.exit_code == 0, result.stderr
    assert set(served(json.loads(result.stdout)).values()) == {pair.mirror.url}, result.stderr
    assert "m1rror-pass" not in result.stdout + result.stderr
    # registry-wide credentials (here IMGPKG_USERNAME/PASSWORD) are never sent to the mirror: it refuses, the origin
    # serves, with one warning
    pair.use(monkeypatch, tmp_path / "bare.yaml")
    monkeypatch.setenv("IMGPKG_USERNAME", registry_support.USERNAME)
    monkeypatch.setenv("IMGPKG_PASSWORD", registry_support.PASSWORD)
    mark = pair.mirror.mark()
    result = run_cli("pull", "-i", ref, "-o", str(tmp_path / "b"), "--no-cache", "--json")
    assert result.exit_code == 0, result.stderr
    assert set(served(json.loads(result.stdout)).values()) == {pair.origin.host}
    assert result.stderr.count(f"mirror {pair.mirror.url} refused") == 1
    assert {s for _, _, s in pair.mirror.since(mark)} == {401}  # no credentials ever reached it
    # a hostname credential (IMGPKG_REGISTRY_*) wins over registries.yaml for the same host
    monkeypatch.setenv("OCIVENDIR_REGISTRY_CONFIG", str(both))
    monkeypatch.setenv("IMGPKG_REGISTRY_HOSTNAME", pair.mirror.host)
    monkeypatch.setenv("IMGPKG_REGISTRY_USERNAME", "mirroruser")
    monkeypatch.setenv("IMGPKG_REGISTRY_PASSWORD", "wrong")
    result = run_cli("pull", "-i", ref, "-o", str(tmp_path / "c"), "--no-cache", "--json")
    assert result.exit_code == 0, result.stderr
    assert set(served(json.loads(result.stdout)).values()) == {pair.origin.host}
    assert f"mirror {pair.mirror.url} refused" in result.stderr


def test_the_per_endpoint_cap_bounds_concurrent_requests(
    registry: Registry, pusher: Pusher, repo_prefix: str, tmp_path: Path
) -> None:
    refs = [pusher.image(f"{repo_prefix}/app{n}", make_image({"n.txt": f"{n}\n" * (n + 1)})) for n in range(8)]
    with fault_proxy(registry.host) as proxy:
        proxy.rules.append(Rule("*", "/v2/", delay=0.05))
        contents = "".join(
            f"  - {{path: a{n}, image: {{url: '{ref.replace(registry.host, proxy.host)}'}}}}\n"
            for n, ref in enumerate(refs)
        )
        config = HEAD + f"directories:\n- path: vendor\n  contents:\n{contents}"
        for cap, work in ((2, tmp_path / "two"), (8, tmp_path / "eight")):
            work.mkdir()
            proxy.max_in_flight = 0
            result, _ = sync_json(work, config, "--no-cache", "--concurrency", "8", "--registry-concurrency", str(cap))
            assert result.exit_code == 0, result.stderr
            if cap == 2:
                assert proxy.max_in_flight <= 2
            else:
                assert proxy.max_in_flight > 2


# --- the fleet figure --------------------------------------------------------------------------------------------

NODES = 10
APPS = 5


def _fleet_round(pair: Pair, tmp_path: Path, name: str, apps: list[str]) -> list[tuple[str, str, int]]:
    mark = pair.origin.mark()
    for node in range(NODES):
        cache = tmp_path / name / f"node{node}-cache"
        for number, ref in enumerate(apps):
            work = tmp_path / name / f"node{node}-app{number}"
            work.mkdir(parents=True)
            result, _ = sync_json(work, image_config(ref), "--cache-dir", str(cache))
            assert result.exit_code == 0, result.stderr
    return pair.origin.since(mark)


def test_ten_node_caches_behind_one_mirror_fetch_each_blob_from_the_origin_at_most_twice(
    pair: Pair, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    apps = [pair.pusher.image(f"fleet/app{n}", make_image({"app.yml": f"app: {n}\n" * 64})) for n in range(APPS)]
    direct = _fleet_round(pair, tmp_path, "direct", apps)
    assert set(blob_gets(direct).values()) == {NODES}  # without the mirror every node fetches every blob
    pair.use(monkeypatch, tmp_path / "r.yaml")
    through = _fleet_round(pair, tmp_path, "mirrored", apps)
    gets = blob_gets(through)
    assert len(gets) == 2 * APPS  # each App's config and layer
    assert max(gets.values()) <= 2
    manifests = [p for m, p, _ in through if m == "GET" and "/manifests/" in p]
    assert len(manifests) <= 2 * APPS
    print(  # noqa: T201 - the measured figure, shown with -s
        f"\nfleet {NODES} nodes x {APPS} apps: origin requests direct={len(direct)} mirrored={len(through)}; "
        f"blob GETs direct={sum(blob_gets(direct).values())} mirrored={sum(gets.values())}"
    )


def test_json_counts_requests_per_endpoint_and_verbose_names_who_served_each_object(
    pair: Pair, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    image = make_image({"a.txt": "a"})
    ref = pair.pusher.image("team/app", image)
    pair.use(monkeypatch, tmp_path / "r.yaml")
    result = run_cli("pull", "-i", ref, "-o", str(tmp_path / "out"), "--no-cache", "--json")
    requests = json.loads(result.stdout)["result"]["requests"]
    assert requests["by_endpoint"] == {pair.mirror.url: 3}  # manifest, config, layer
    assert all(re.fullmatch(r"127\.0\.0\.1:\d+/team/app@sha256:[0-9a-f]{64}", k) for k in requests["served_by"])
    # -v: one line per object on stderr (a separate process: logging binds the stderr it starts with)
    command = [sys.executable, "-m", "ocivendir", "pull", "-i", ref, "-o", str(tmp_path / "v"), "--no-cache", "-v"]
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    lines = sorted(line for line in done.stderr.splitlines() if " served by " in line)
    objects = [ref, *(f"{pair.origin.host}/team/app@{sha(blob)}" for blob in image.blobs)]
    assert lines == sorted(f"ocivendir.endpoints: {o} served by {pair.mirror.url}" for o in objects)


def test_a_mirror_gets_its_own_tls_trust_from_registries_yaml(
    registry: Registry, tls_registry: Registry, repo_prefix: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    image = make_image({"a.txt": "over tls"})
    ref = Pusher(registry).image(f"{repo_prefix}/app", image)
    Pusher(tls_registry).image(f"{repo_prefix}/app", image)  # the mirror is a replica here, served over https
    mirror = f"https://{tls_registry.host}"
    text = f'mirrors:\n  "{registry.host}":\n    endpoint: ["{mirror}"]\n'
    path = tmp_path / "registries.yaml"
    path.write_text(text)
    monkeypatch.setenv("OCIVENDIR_REGISTRY_CONFIG", str(path))
    refused = run_cli("pull", "-i", ref, "-o", str(tmp_path / "a"), "--no-cache", "--json")
    assert refused.exit_code == 0, refused.stderr
    assert set(served(json.loads(refused.stdout)).values()) == {registry.host}
    assert f"mirror {mirror} refused" in refused.stderr
    assert "x509: certificate signed by unknown authority" in refused.stderr
    path.write_text(text + f'configs:\n  "{tls_registry.host}":\n    tls: {{ca_file: "{tls_registry.ca_cert}"}}\n')
    trusted = run_cli("pull", "-i", ref, "-o", str(tmp_path / "b"), "--no-cache", "--json")
    assert trusted.exit_code == 0, trusted.stderr
    assert set(served(json.loads(trusted.stdout)).values()) == {mirror}


def test_a_malformed_file_is_a_usage_error_naming_file_and_line_and_unknown_keys_are_warnings(
    pair: Pair, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ref = pair.pusher.image("team/app", make_image({"a.txt": "a"}))
    path = tmp_path / "registries.yaml"
    monkeypatch.setenv("OCIVENDIR_REGISTRY_CONFIG", str(path))
    path.write_text(f'mirrors:\n  "{pair.origin.host}":\n    endpoint: "{pair.mirror.url}"\n')
    broken = run_cli("pull", "-i", ref, "-o", str(tmp_path / "a"), "--no-cache")
    assert broken.exit_code == 2
    assert f"{path}:3: endpoint of mirror '{pair.origin.host}' must be a list" in broken.stderr
    assert not (tmp_path / "a").exists()
    secret = "configs:\n  other.example:\n    auth: {username: u, password: hunter2, pasword: typo}\n"
    path.write_text(f'mirrors:\n  "{pair.origin.host}":\n    endpoint: ["{pair.mirror.url}"]\n    mirror: x\n{secret}')
    warned = run_cli("pull", "-i", ref, "-o", str(tmp_path / "b"), "--no-cache")
    assert warned.exit_code == 0, warned.stderr
    assert f"ocivendir: Warning: {path}:4: unknown key 'mirror' in mirror '{pair.origin.host}' ignored" in warned.stderr
    assert f"{path}:7: unknown key 'pasword' in auth of 'other.example' ignored" in warned.stderr
    assert "hunter2" not in warned.stderr + warned.stdout


def test_what_a_mirror_served_is_never_recorded_as_anyones_in_a_shared_cache(
    pair: Pair, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A manifest a mirror served is granted to the caller's credential, not to anyone.

    A pull-through mirror may serve the origin's private content to whoever reaches it; the origin's answer alone can
    say that anyone may read it.
    """
    ref = pair.pusher.image("team/app", make_image({"app.yml": "replicas: 2\n"}))
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.setenv("IMGPKG_USERNAME", "someone")
    monkeypatch.setenv("IMGPKG_PASSWORD", "anything")
    direct, _ = sync_json(work, images_config(app=ref), "--cache-dir", str(tmp_path / "direct"))
    assert direct.exit_code == 0, direct.stderr
    assert not (tmp_path / "direct" / "grants.key").exists()  # the origin gave it to anyone: no fingerprint needed
    pair.use(monkeypatch, tmp_path / "registries.yaml")
    mirrored, doc = sync_json(work, images_config(app=ref), "--cache-dir", str(tmp_path / "mirrored"))
    assert mirrored.exit_code == 0, mirrored.stderr
    assert set(served(doc).values()) == {pair.mirror.url}
    assert (tmp_path / "mirrored" / "grants.key").exists()  # granted to the caller's credential
