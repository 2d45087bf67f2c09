"""What a layer becomes on disk, against the real registry.

imgpkg's directory rule for `pull`, vendir's directory rule and modes for `sync` (cold, cache hit, --locked, offline),
every link skipped, hostile layers (whiteouts naming `..`, 2,100-deep paths, expansion past the limit) refused with
everything around the target intact, and a tampering man in the middle whose bytes never outlive the mismatch.
The expected trees were measured with imgpkg 0.43.1 and vendir 0.40.0 on the same layers (umask 022).
"""

from __future__ import annotations

import gzip
import json
import os
import stat
import textwrap
from pathlib import Path

import pytest

from ocivendir.fs.limits import Tally
from tests.conftest import CliResult, run_cli
from tests.support.builders import (
    Entry,
    Image,
    Pusher,
    config_bytes,
    deep_directory,
    make_image,
    pax_chain,
    sha,
    tar_bytes,
)
from tests.support.faults import Rule, fault_proxy
from tests.support.registry import Registry

HEAD = "apiVersion: vendir.k14s.io/v1alpha1\nkind: Config\n"
SENTINEL = "must survive\n"
EMPTY_DIRS = [Entry("data/", kind="dir", mode=0o755), Entry("data/empty/", kind="dir", mode=0o755),
              Entry("x/", kind="dir", mode=0o755), Entry("x/y/", kind="dir", mode=0o755),
              Entry("x/y/z/", kind="dir", mode=0o755), Entry("f.txt", b"f", 0o644)]  # fmt: skip
MODES = [Entry("d750", kind="dir", mode=0o750), Entry("d750/f600", b"a", 0o600),
         Entry("d700", kind="dir", mode=0o700), Entry("d700/f640", b"a", 0o640),
         Entry("d755", kind="dir", mode=0o755), Entry("d755/f644", b"a", 0o644), Entry("d755/f755", b"a", 0o755),
         Entry("d711", kind="dir", mode=0o711), Entry("d711/f", b"a", 0o600),
         Entry("late/f", b"a", 0o600), Entry("late", kind="dir", mode=0o750), Entry("noentry/f", b"a", 0o600),
         Entry("empty", kind="dir", mode=0o750)]  # fmt: skip
LINKS = [Entry("a.txt", b"a", 0o644), Entry("abs", kind="symlink", target="/etc/hostname"),
         Entry("rel", kind="symlink", target="a.txt"), Entry("hard", kind="hardlink", target="a.txt"),
         Entry("esc", kind="symlink", target="../../x"), Entry("sub/l", kind="symlink", target="/x"),
         Entry("hard-out", kind="hardlink", target="../../etc/passwd")]  # fmt: skip


def listing(root: Path) -> dict[str, int]:
    """Every path under root with its mode (directories end in '/'); a symlink would show as 'link'."""
    found: dict[str, int] = {}
    for base, dirs, files in os.walk(root):
        for name in dirs + files:
            path = Path(base, name)
            assert not path.is_symlink(), path
            suffix = "/" if path.is_dir() else ""
            found[os.path.relpath(path, root) + suffix] = stat.S_IMODE(path.lstat().st_mode)
    return found


def pull(*args: str, cache: Path | None = None) -> tuple[CliResult, dict[str, object]]:
    extra = ["--cache-dir", str(cache)] if cache else ["--no-cache"]
    result = run_cli("pull", *args, *extra, "--json")
    return result, (json.loads(result.stdout) if result.stdout.strip() else {})


def sync(cwd: Path, config: str, *args: str) -> CliResult:
    (cwd / "vendir.yml").write_text(config)
    return run_cli("sync", "--chdir", str(cwd), *args)


def image_config(ref: str, *, kind: str = "image", extra: str = "") -> str:
    key = "url" if kind == "image" else "image"
    return HEAD + textwrap.dedent(f"""\
        directories:
        - path: vendor
          contents:
          - path: c
            {kind}:
              {key}: {ref}
        """) + extra  # fmt: skip


@pytest.fixture
def fenced(tmp_path: Path) -> Path:
    """A project directory with sentinels: the output goes to <project>/out/inner."""
    project = tmp_path / "project"
    (project / "out").mkdir(parents=True)
    (project / "sentinel.txt").write_text(SENTINEL)
    (project / "out" / "beside.txt").write_text(SENTINEL)
    return project


def sentinels_survive(project: Path) -> None:
    assert (project / "sentinel.txt").read_text() == SENTINEL
    assert (project / "out" / "beside.txt").read_text() == SENTINEL


# --- 14.1 / 14.5 / 14.9: the two tools' rules --------------------------------------------------------------------


def test_pull_makes_only_parent_directories_as_imgpkg_does_cold_and_cached(
    registry: Registry, pusher: Pusher, repo_prefix: str, tmp_path: Path
) -> None:
    ref = pusher.image(f"{repo_prefix}/img", make_image(entries=EMPTY_DIRS))
    cache = tmp_path / "cache"
    for out in ("cold", "warm"):
        result, doc = pull("-i", ref, "-o", str(tmp_path / out), cache=cache)
        assert result.exit_code == 0, result.stderr
        assert listing(tmp_path / out) == {"data/": 0o755, "x/": 0o755, "x/y/": 0o755, "f.txt": 0o644}
    assert doc["result"]["requests"]["total"] == 0  # type: ignore[index]


def test_pull_skips_every_link_absolute_ones_included(
    registry: Registry, pusher: Pusher, repo_prefix: str, tmp_path: Path
) -> None:
    ref = pusher.image(f"{repo_prefix}/img", make_image(entries=LINKS))
    result, doc = pull("-i", ref, "-o", str(tmp_path / "out"))
    assert result.exit_code == 0, result.stderr
    assert listing(tmp_path / "out") == {"a.txt": 0o644, "sub/": 0o755}
    assert doc["result"]["skipped_entries"] == 6  # type: ignore[index]


def test_sync_keeps_a_directory_only_when_a_file_lives_under_it_in_every_mode(
    registry: Registry, pusher: Pusher, repo_prefix: str, tmp_path: Path
) -> None:
    image_ref = pusher.image(f"{repo_prefix}/img", make_image(entries=EMPTY_DIRS))
    bundle_entries = [*EMPTY_DIRS, Entry(".imgpkg/images.yml", b"---\napiVersion: imgpkg.carvel.dev/v1alpha1\n"
                                                                b"kind: ImagesLock\nimages: []\n")]  # fmt: skip
    bundle_ref = pusher.image(f"{repo_prefix}/bundle", make_image(entries=bundle_entries, bundle=True))
    work = tmp_path / "work"
    (work / "local" / "empty" / "deeper").mkdir(parents=True)
    (work / "local" / "keep" / "k.txt").parent.mkdir(parents=True)
    (work / "local" / "keep" / "k.txt").write_text("k")
    (work / "local" / "keep" / "drop.txt").write_text("drop")
    (work / "local" / "gone" / "only.log").parent.mkdir(parents=True)
    (work / "local" / "gone" / "only.log").write_text("log")
    config = HEAD + textwrap.dedent(f"""\
        directories:
        - path: vendor
          contents:
          - path: image
            image: {{url: {image_ref}}}
          - path: bundle
            imgpkgBundle: {{image: {bundle_ref}}}
          - path: dir
            directory: {{path: local}}
            excludePaths: ["**/*.log", "keep/drop.txt"]
        """)  # fmt: skip
    expected = {"image/": 0o755, "image/f.txt": 0o644, "bundle/": 0o755, "bundle/f.txt": 0o644,
                "bundle/.imgpkg/": 0o755, "bundle/.imgpkg/images.yml": 0o644, "dir/": 0o700, "dir/keep/": 0o755,
                "dir/keep/k.txt": 0o644}  # fmt: skip
    cache = tmp_path / "cache"
    runs = [("cold", ()), ("cache hit", ()), ("locked", ("--locked",)), ("offline", ("--offline",))]
    for label, flags in runs:
        result = sync(work, config, "--cache-dir", str(cache), *flags)
        assert result.exit_code == 0, (label, result.stderr)
        assert {k: v for k, v in listing(work / "vendor").items() if not k.startswith("dir/")} == {
            k: v for k, v in expected.items() if not k.startswith("dir/")
        }, label
        assert sorted(k for k in listing(work / "vendor") if k.startswith("dir/")) == sorted(
            k for k in expected if k.startswith("dir/")
        ), label


def test_sync_writes_modes_as_vendir_does_cold_and_from_the_cache(
    registry: Registry, pusher: Pusher, repo_prefix: str, tmp_path: Path
) -> None:
    ref = pusher.image(f"{repo_prefix}/img", make_image(entries=MODES))
    expected = {  # vendir 0.40.0 on this layer
        "c/": 0o755, "c/d750/": 0o750, "c/d750/f600": 0o644, "c/d700/": 0o755, "c/d700/f640": 0o640,
        "c/d755/": 0o755, "c/d755/f644": 0o644, "c/d755/f755": 0o755, "c/d711/": 0o711, "c/d711/f": 0o644,
        "c/late/": 0o755, "c/late/f": 0o644, "c/noentry/": 0o755, "c/noentry/f": 0o644,
    }  # fmt: skip
    cache = tmp_path / "cache"
    for label in ("cold", "cache hit"):
        work = tmp_path / label.replace(" ", "-")
        work.mkdir()
        result = sync(work, image_config(ref), "--cache-dir", str(cache))
        assert result.exit_code == 0, result.stderr
        assert listing(work / "vendor") == expected, label


def test_sync_skips_every_link_and_fails_as_vendir_when_no_file_is_left(
    registry: Registry, pusher: Pusher, repo_prefix: str, tmp_path: Path
) -> None:
    links_ref = pusher.image(f"{repo_prefix}/links", make_image(entries=LINKS))
    result = sync(tmp_path, image_config(links_ref))
    assert result.exit_code == 0, result.stderr
    assert listing(tmp_path / "vendor") == {"c/": 0o755, "c/a.txt": 0o644}
    whited = make_image(entries=[Entry("a.txt", b"a", 0o644), Entry("d/", kind="dir")],
                        extra_layers=[[Entry(".wh.a.txt"), Entry("l", kind="symlink", target="/etc/hostname")]])  # fmt: skip
    whited_ref = pusher.image(f"{repo_prefix}/whited", whited)
    result = sync(tmp_path, image_config(whited_ref))
    assert result.exit_code == 1
    chain = "Syncing directory 'vendor':\n  Filtering paths in directory 'c':\n    Expected to find at least one file"
    assert f"{chain} within directory" in result.stderr
    assert listing(tmp_path / "vendor") == {"c/": 0o755, "c/a.txt": 0o644}  # the previous tree is kept


# --- 9.1 / 9.5 / 9.6: hostile layers ------------------------------------------------------------------------------


@pytest.mark.parametrize("name", [".wh...", "a/.wh...", ".wh..", "a/b/.wh..."])
def test_a_whiteout_naming_dotdot_deletes_nothing_around_a_pull(
    registry: Registry, pusher: Pusher, repo_prefix: str, fenced: Path, name: str
) -> None:
    hostile = make_image(entries=[Entry("a/b/f.txt", b"f")], extra_layers=[[Entry(name)]])
    ref = pusher.image(f"{repo_prefix}/img", hostile)
    target = fenced / "out" / "inner"
    target.mkdir()
    (target / "previous.txt").write_text(SENTINEL)
    result, doc = pull("-i", ref, "-o", str(target))
    assert result.exit_code == 1
    assert doc["error"]["code"] == "unsafe-archive"  # type: ignore[index]
    assert f"refusing whiteout '{name}'" in doc["error"]["message"]  # type: ignore[index]
    assert sorted(p.name for p in (fenced / "out").iterdir()) == ["beside.txt", "inner"]
    assert (target / "previous.txt").read_text() == SENTINEL
    sentinels_survive(fenced)


def test_a_whiteout_naming_dotdot_cannot_delete_the_project_of_a_sync_into_dot(
    registry: Registry, pusher: Pusher, repo_prefix: str, fenced: Path
) -> None:
    ref = pusher.image(f"{repo_prefix}/img", make_image(entries=[Entry("f.txt", b"f"), Entry(".wh...")]))
    config = HEAD + f"directories:\n- path: out/vendor\n  contents:\n  - path: .\n    image: {{url: {ref}}}\n"
    result = sync(fenced, config)
    assert result.exit_code == 1
    assert "refusing whiteout '.wh...'" in result.stderr
    assert (fenced / "vendir.yml").read_text() == config
    assert sorted(p.name for p in (fenced / "out").iterdir()) == ["beside.txt"]
    sentinels_survive(fenced)


def test_a_layer_2100_levels_deep_is_refused_and_a_deep_leftover_stage_is_recovered(
    registry: Registry, pusher: Pusher, repo_prefix: str, fenced: Path
) -> None:
    deep = "/".join(["d"] * 2100)
    ref = pusher.image(f"{repo_prefix}/deep", make_image(entries=[Entry(f"{deep}/f.txt", b"x")]))
    target = fenced / "out" / "inner"
    result, doc = pull("-i", ref, "-o", str(target))
    assert result.exit_code == 1
    assert doc["error"]["code"] == "unsafe-archive"  # type: ignore[index]
    assert "nested 2101 levels deep (at most 256)" in doc["error"]["message"]  # type: ignore[index]
    assert sorted(p.name for p in (fenced / "out").iterdir()) == ["beside.txt"]
    # a stage left by a killed run of an older version, 2,100 levels deep, does not poison the next pull
    leftover = fenced / "out" / ".inner.ocivendir-stage-0123456789ab"
    deep_directory(leftover, 2100)
    good = pusher.image(f"{repo_prefix}/good", make_image({"ok.txt": "ok"}))
    result, _ = pull("-i", good, "-o", str(target))
    assert result.exit_code == 0, result.stderr
    assert sorted(p.name for p in (fenced / "out").iterdir()) == ["beside.txt", "inner"]
    assert listing(target) == {"ok.txt": 0o644}
    sentinels_survive(fenced)
    deep_directory(fenced / ".vendor.ocivendir-stage-0123456789ab", 2100)  # a sync's leftover stage, likewise
    result = sync(fenced, image_config(good))
    assert result.exit_code == 0, result.stderr
    assert sorted(p.name for p in fenced.iterdir()) == [
        "out",
        "sentinel.txt",
        "vendir.lock.yml",
        "vendir.yml",
        "vendor",
    ]


def test_a_layer_of_chained_pax_headers_is_refused_not_a_recursion_error(
    registry: Registry, pusher: Pusher, repo_prefix: str, fenced: Path
) -> None:
    """Pax headers of 1 MB each before one member, refused at the 17th rather than recursed through.

    tarfile recurses through them, holding each (900 of them took 0.6 GB of RSS); 64 show the bound as 900 did.
    """
    layer = gzip.compress(pax_chain(64, b"x" * 1_000_000), compresslevel=1, mtime=0)
    assert len(layer) < 8 << 20
    ref = pusher.image(
        f"{repo_prefix}/paxchain", Image(config=config_bytes(bundle=False, layers=[layer]), layers=[layer])
    )
    target = fenced / "out" / "inner"
    result, doc = pull("-i", ref, "-o", str(target))
    assert result.exit_code == 1, result.stderr
    assert doc["error"]["code"] == "unsafe-archive"  # type: ignore[index]
    assert "more than 16 extended headers in a row" in doc["error"]["message"]  # type: ignore[index]
    assert sorted(p.name for p in (fenced / "out").iterdir()) == ["beside.txt"]
    sentinels_survive(fenced)


def test_expansion_past_max_extract_size_is_refused_by_flag_and_by_environment(
    registry: Registry, pusher: Pusher, repo_prefix: str, fenced: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(fenced)
    bomb = make_image(entries=[Entry(f"zeros-{n}.bin", bytes(1 << 20)) for n in range(8)])
    assert len(bomb.layers[0]) < 64 << 10  # 8 MiB of zeros in a few KiB of gzip
    ref = pusher.image(f"{repo_prefix}/bomb", bomb)
    target = fenced / "out" / "inner"
    result, doc = pull("-i", ref, "-o", str(target), "--max-extract-size", "3Mi")
    assert result.exit_code == 1
    assert doc["error"]["code"] == "unsafe-archive"  # type: ignore[index]
    assert "entry 'zeros-3.bin' (1 MiB) would expand the image past the limit of 3 MiB (3 MiB written so far)" \
        in doc["error"]["message"]  # type: ignore[index]  # fmt: skip
    assert "--max-extract-size" in doc["error"]["hint"]  # type: ignore[index]
    assert sorted(p.name for p in (fenced / "out").iterdir()) == ["beside.txt"]
    monkeypatch.setenv("OCIVENDIR_MAX_EXTRACT_SIZE", "2Mi")
    assert pull("-i", ref, "-o", str(target))[0].exit_code == 1
    assert sync(fenced, image_config(ref)).exit_code == 1
    vendir_mode = run_cli("sync", "-f", "-", "--lock-file", "/dev/null", prog="vendir", stdin=image_config(ref))
    assert vendir_mode.exit_code == 1  # kapp-controller's sidecar sets the variable
    assert "would expand the image past the limit of 2 MiB" in vendir_mode.stderr
    assert not (Path.cwd() / "vendor").exists()
    result, _ = pull("-i", ref, "-o", str(target), "--max-extract-size", "8Mi")  # the flag wins
    assert result.exit_code == 0, result.stderr
    assert sum(p.stat().st_size for p in target.iterdir()) == 8 << 20
    monkeypatch.setenv("OCIVENDIR_MAX_EXTRACT_SIZE", "lots")
    result, doc = pull("-i", ref, "-o", str(target))
    assert result.exit_code == 2
    assert "invalid size 'lots' for --max-extract-size" in doc["error"]["message"]  # type: ignore[index]


def test_layers_declaring_more_than_the_limit_are_refused_before_a_byte_is_downloaded(
    registry: Registry, pusher: Pusher, repo_prefix: str, fenced: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A registry could declare (and stream) any layer size: the declared sizes are checked before the download."""
    monkeypatch.chdir(fenced)
    noise = make_image(entries=[Entry("noise.bin", os.urandom(3 << 20))])
    assert len(noise.layers[0]) > 3 << 20  # incompressible: the layer is as large as what it expands to
    ref = pusher.image(f"{repo_prefix}/noise", noise)
    mark = registry.mark()
    result, doc = pull("-i", ref, "-o", str(fenced / "out" / "inner"), "--max-extract-size", "1Mi")
    assert result.exit_code == 1
    assert doc["error"]["code"] == "unsafe-archive"  # type: ignore[index]
    assert "its layers declare 3.0 MiB, more than the extraction limit of 1 MiB allows" in doc["error"]["message"]  # type: ignore[index]
    layer_path = f"/blobs/{sha(noise.layers[0])}"
    assert not [
        path for method, path, _ in registry.settled_requests()[mark:] if method == "GET" and layer_path in path
    ]
    assert sorted(p.name for p in (fenced / "out").iterdir()) == ["beside.txt"]
    result, _ = pull("-i", ref, "-o", str(fenced / "out" / "inner"), "--max-extract-size", "3Mi")
    assert result.exit_code == 0, result.stderr  # the slack admits a layer as large as what it expands to


# --- 9.2: unverified bytes -------------------------------------------------------------------------------------


def test_a_tampered_layer_streamed_on_a_verified_one_leaves_nothing_behind(
    registry: Registry, pusher: Pusher, repo_prefix: str, fenced: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A man in the middle swaps layer 2 for a tar that whites out layer 1 and expands to 40 MiB.

    The bytes are applied while they stream, yet only inside the fresh stage, within the size limit, and are gone
    after the mismatch.
    """
    layer1 = [Entry("keep/one.txt", b"verified layer one"), Entry("keep/two.txt", b"also verified")]
    layer2 = [Entry("extra.bin", os.urandom(200_000))]
    image = make_image(entries=layer1, extra_layers=[layer2])
    ref = pusher.image(f"{repo_prefix}/img", image)
    evil_tar = tar_bytes([Entry(".wh.keep"), Entry("keep/.wh..wh..opq"),
                          *[Entry(f"zeros-{n}.bin", bytes(4 << 20)) for n in range(10)]])  # fmt: skip
    evil = gzip.compress(evil_tar, compresslevel=9, mtime=0)
    assert len(evil) < len(image.layers[1])
    evil += bytes(len(image.layers[1]) - len(evil))  # same length: a full-length mismatch, not a short read
    layer2_digest = json.loads(image.manifest)["layers"][1]["digest"]
    target = fenced / "out" / "inner"
    target.mkdir()
    (target / "previous.txt").write_text(SENTINEL)
    cache = fenced.parent / "cache"
    largest: list[int] = []
    original_reserve = Tally.reserve

    def spy(self: Tally, name: str, size: int, what: str) -> None:
        original_reserve(self, name, size, what)
        largest.append(self.bytes)

    monkeypatch.setattr(Tally, "reserve", spy)
    with fault_proxy(registry.host) as proxy:
        proxy.rules.append(Rule("GET", f"/blobs/{layer2_digest}", body=evil))
        proxied = ref.replace(registry.host, proxy.host)
        result, doc = pull("-i", proxied, "-o", str(target), "--max-extract-size", "10Mi", cache=cache)
    assert result.exit_code == 1
    assert doc["error"]["code"] == "digest-mismatch"  # type: ignore[index]
    assert proxy.rules[0].hits == 2  # streamed once, fetched again once, refused both times
    assert 8 << 20 <= max(largest) <= 10 << 20  # it was applied while streaming, never past the limit
    assert listing(target) == {"previous.txt": 0o644}
    assert sorted(p.name for p in (fenced / "out").iterdir()) == ["beside.txt", "inner"]
    assert not (cache / "blobs" / "sha256" / layer2_digest.split(":")[1]).exists()
    assert list((cache / "tmp").iterdir()) == []
    sentinels_survive(fenced)
    result, _ = pull("-i", ref, "-o", str(target), cache=cache)  # straight to the registry: the real bytes
    assert result.exit_code == 0, result.stderr
    assert sorted(listing(target)) == ["extra.bin", "keep/", "keep/one.txt", "keep/two.txt"]


def test_a_tampered_layer_cannot_touch_the_project_of_a_sync_into_dot(
    registry: Registry, pusher: Pusher, repo_prefix: str, fenced: Path
) -> None:
    """Streamed unverified bytes that white out everything they can name stay inside the content's fresh stage."""
    image = make_image(entries=[Entry("app.yml", b"app: 1\n")], extra_layers=[[Entry("more.bin", os.urandom(100_000))]])
    ref = pusher.image(f"{repo_prefix}/img", image)
    evil = gzip.compress(tar_bytes([Entry(".wh..wh..opq"), Entry(".wh.app.yml"), Entry(".wh.vendir.yml"),
                                    Entry("evil.txt", b"evil")]), mtime=0)  # fmt: skip
    evil += bytes(len(image.layers[1]) - len(evil))
    layer2 = json.loads(image.manifest)["layers"][1]["digest"]
    previous = fenced / "out" / "vendor"
    previous.mkdir()
    (previous / "previous.yml").write_text(SENTINEL)
    with fault_proxy(registry.host) as proxy:
        proxy.rules.append(Rule("GET", f"/blobs/{layer2}", body=evil))
        proxied = ref.replace(registry.host, proxy.host)
        config = HEAD + f"directories:\n- path: out/vendor\n  contents:\n  - path: .\n    image: {{url: {proxied}}}\n"
        result = sync(fenced, config)
    assert result.exit_code == 1
    assert "digest" in result.stderr
    assert proxy.rules[0].hits == 2
    assert (fenced / "vendir.yml").read_text() == config
    assert listing(previous) == {"previous.yml": 0o644}
    assert sorted(p.name for p in (fenced / "out").iterdir()) == ["beside.txt", "vendor"]
    sentinels_survive(fenced)


def test_oci_layer_semantics_hold_where_the_upstream_tools_deviate(
    registry: Registry, pusher: Pusher, repo_prefix: str, tmp_path: Path
) -> None:
    """First to last, whiteouts, opaque whiteouts, a file over an implicit directory and a file below a lower file."""
    layers = [
        [Entry("keep.txt", b"1"), Entry("gone.txt", b"1"), Entry("opq/lower.txt", b"1"), Entry("imp/inner.txt", b"1"),
         Entry("was-file", b"1"), Entry("over.txt", b"lower")],
        [Entry(".wh.gone.txt"), Entry("opq/.wh..wh..opq"), Entry("opq/upper.txt", b"2"), Entry("imp", b"now a file"),
         Entry("was-file/below.txt", b"2"), Entry("over.txt", b"upper")],
    ]  # fmt: skip
    ref = pusher.image(f"{repo_prefix}/img", make_image(entries=layers[0], extra_layers=layers[1:]))
    expected = {"keep.txt": 0o644, "opq/": 0o755, "opq/upper.txt": 0o644, "imp": 0o644, "was-file/": 0o755,
                "was-file/below.txt": 0o644, "over.txt": 0o644}  # fmt: skip
    result, _ = pull("-i", ref, "-o", str(tmp_path / "pulled"))
    assert result.exit_code == 0, result.stderr
    assert listing(tmp_path / "pulled") == expected
    assert (tmp_path / "pulled" / "over.txt").read_bytes() == b"upper"
    result = sync(tmp_path, image_config(ref))
    assert result.exit_code == 0, result.stderr
    assert listing(tmp_path / "vendor") == {"c/": 0o755, **{f"c/{k}": v for k, v in expected.items()}}


# --- a stage is nobody else's while it is filled ---------------------------------------------------------------


@pytest.mark.parametrize("command", ["pull", "sync -d"])
def test_a_stage_is_the_callers_alone_while_it_is_filled_and_gets_its_mode_once_complete(
    registry: Registry, pusher: Pusher, repo_prefix: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    command: str,
) -> None:  # fmt: skip
    """With umask 0 the output directory is 0777 (imgpkg's and vendir's rule), but not before it is complete.

    A stage anyone may write in while layers are applied would let another user swap a directory for a link in it.
    """
    import ocivendir.engine.pull as pull_module  # noqa: PLC0415
    import ocivendir.engine.sources as sources_module  # noqa: PLC0415

    ref = pusher.image(f"{repo_prefix}/img", make_image(entries=[Entry("d/f.txt", b"f", 0o644)]))
    seen: list[int] = []
    for module in (pull_module, sources_module):
        real = module.extract_layers

        def recording(content: object, image: object, dest: str, *args: object, real=real, **kwargs: object):
            seen.append(stat.S_IMODE(os.lstat(dest).st_mode))
            return real(content, image, dest, *args, **kwargs)

        monkeypatch.setattr(module, "extract_layers", recording)
    previous = os.umask(0)
    try:
        if command == "pull":
            result, _ = pull("-i", ref, "-o", str(tmp_path / "out"))
            out = tmp_path / "out"
        else:
            (tmp_path / "w").mkdir()
            assert sync(tmp_path / "w", image_config(ref)).exit_code == 0  # its stage's root is 0700: c inside it
            seen.clear()
            result = sync(tmp_path / "w", image_config(ref), "-d", "vendor/c")  # c's own stage
            out = tmp_path / "w" / "vendor" / "c"
    finally:
        os.umask(previous)
    assert result.exit_code == 0, result.stderr
    assert seen
    assert set(seen) == {0o700}
    assert stat.S_IMODE(out.stat().st_mode) == 0o777
    assert stat.S_IMODE((out / "d").stat().st_mode) == 0o777
