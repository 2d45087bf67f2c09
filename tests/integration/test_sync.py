"""`sync` against a real registry: vendir's trees and lock bytes, `--locked`, lazy, `-d`, failures that lose nothing."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import socket
import sqlite3
import stat
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from ocivendir.cache.index import TOUCH_INTERVAL
from ocivendir.goyaml import emit
from tests.conftest import CliResult, run_cli
from tests.support.builders import Pusher, make_image, publish_bundle, relocate
from tests.support.kapp import placeholder_secret
from tests.support.registry import Registry

HEAD = "apiVersion: vendir.k14s.io/v1alpha1\nkind: Config\n"


def sync(cwd: Path, config: str, *args: str, prog: str = "ocivendir") -> CliResult:
    (cwd / "vendir.yml").write_text(config)
    return run_cli("sync", "--chdir", str(cwd), *args, prog=prog)


def tree(root: Path) -> dict[str, tuple[str, str]]:
    found = {}
    for path in sorted(root.rglob("*")):
        mode = oct(stat.S_IMODE(path.lstat().st_mode))
        found[str(path.relative_to(root))] = (mode, path.read_text() if path.is_file() else "")
    return found


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    directory = tmp_path / "cache"
    monkeypatch.setenv("OCIVENDIR_CACHE_DIR", str(directory))
    return directory


@pytest.fixture
def work(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    directory = tmp_path / "work"
    directory.mkdir()
    monkeypatch.chdir(directory)
    return directory


def test_image_by_digest_tag_and_tag_selection_then_locked_changes_nothing(
    registry: Registry, pusher: Pusher, repo_prefix: str, work: Path, cache: Path
) -> None:
    repo = f"{registry.host}/{repo_prefix}/app"
    for tag in ("1.0.0", "1.2.0", "2.0.0-rc.1", "1.0"):
        pusher.image(f"{repo_prefix}/app", make_image({"version.txt": tag}), tag=tag)
    digest_ref = pusher.image(f"{repo_prefix}/app", make_image({"version.txt": "pinned"}))
    config = HEAD + textwrap.dedent(f"""\
        directories:
        - path: vendor
          contents:
          - path: by-digest
            image: {{url: "{digest_ref}"}}
          - path: by-tag
            image: {{url: "{repo}:1.0"}}
          - path: by-semver
            image:
              url: {repo}
              tagSelection: {{semver: {{constraints: "<2.0.0"}}}}
        """)
    result = sync(work, config)
    assert result.exit_code == 0, result.stderr
    files = tree(work / "vendor")
    assert files["by-digest/version.txt"] == ("0o644", "pinned")
    assert files["by-tag/version.txt"] == ("0o644", "1.0")
    assert files["by-semver/version.txt"] == ("0o644", "1.2.0")
    assert files["by-semver"][0] == "0o755"
    lock = (work / "vendir.lock.yml").read_text()
    assert result.stdout == lock
    assert f"      url: {digest_ref}\n    path: by-digest" in lock
    assert '      tag: "1.0"\n' in lock
    assert "      tag: 1.2.0\n" in lock
    assert "Fetching: vendor + by-semver (image from " in result.stderr
    assert ':tag={"semver":{"constraints":"<2.0.0"}})' in result.stderr
    mtime = (work / "vendir.lock.yml").stat().st_mtime_ns
    mark = registry.mark()
    locked = sync(work, config, "--locked", "--json")
    assert locked.exit_code == 0, locked.stderr
    doc = json.loads(locked.stdout)
    assert doc["result"]["requests"]["total"] == 0
    assert registry.since(mark) == []
    assert (work / "vendir.lock.yml").stat().st_mtime_ns == mtime
    assert tree(work / "vendor") == files


def test_filters_new_root_path_permissions_and_legal_files(
    registry: Registry, pusher: Pusher, repo_prefix: str, work: Path, cache: Path
) -> None:
    ref = pusher.image(f"{repo_prefix}/cfg", make_image({
        "LICENSE": "mit", "config/app.yml": "a", "config/skip.txt": "s", "config/deep/b.yml": "b", "docs/x.md": "x",
    }))  # fmt: skip
    config = HEAD + textwrap.dedent(f"""\
        directories:
        - path: out
          permissions: 0700
          contents:
          - path: filtered
            image: {{url: "{ref}"}}
            includePaths: ["config/**/*.yml"]
            excludePaths: ["config/deep/**"]
            permissions: 0750
          - path: rooted
            image: {{url: "{ref}"}}
            newRootPath: config
        """)
    result = sync(work, config)
    assert result.exit_code == 0, result.stderr
    files = tree(work / "out")
    assert sorted(files) == ["filtered", "filtered/LICENSE", "filtered/config", "filtered/config/app.yml", "rooted",
                             "rooted/app.yml", "rooted/deep", "rooted/deep/b.yml", "rooted/skip.txt"]  # fmt: skip
    assert files["filtered"][0] == "0o750"
    assert oct(stat.S_IMODE((work / "out").stat().st_mode)) == "0o700"
    bad = config.replace("newRootPath: config", "newRootPath: nope")
    failed = sync(work, bad)
    assert failed.exit_code == 1
    assert "Changing to new root path 'rooted': Expected directory 'nope' (subpath) to exist (found other " in (
        " ".join(failed.stderr.split())
    )
    assert tree(work / "out") == files


def test_bundles_original_relocated_and_recursive(
    registry: Registry, pusher: Pusher, repo_prefix: str, work: Path, cache: Path
) -> None:
    published = publish_bundle(pusher, repo_prefix, images=1)
    relocate(pusher, published, f"{repo_prefix}/copy")
    config = HEAD + textwrap.dedent(f"""\
        directories:
        - path: original
          contents:
          - path: .
            imgpkgBundle: {{image: "{published.ref(registry)}"}}
        - path: relocated
          contents:
          - path: .
            imgpkgBundle: {{image: "{published.ref(registry, f"{repo_prefix}/copy")}", recursive: true}}
        """)
    result = sync(work, config)
    assert result.exit_code == 0, result.stderr
    assert f"{repo_prefix}/copy@" not in (work / "original/.imgpkg/images.yml").read_text()
    assert f"{repo_prefix}/copy@" in (work / "relocated/.imgpkg/images.yml").read_text()
    not_bundle = (
        HEAD
        + f'directories:\n- path: x\n  contents:\n  - path: .\n    imgpkgBundle: {{image: "{next(iter(published.images))}"}}\n'
    )
    failed = sync(work, not_bundle, prog="vendir")
    assert failed.exit_code == 1
    assert failed.stderr == (
        "vendir: Error: Syncing directory 'x':\n  Syncing directory '.' with imgpkgBundle contents:\n"
        "    The provided image is not a bundle\n"
    )


def test_inline_directory_manual_and_quoted_paths(work: Path, cache: Path) -> None:
    (work / "local").mkdir()
    (work / "local/file.txt").write_text("local")
    (work / "y/hand").mkdir(parents=True)
    (work / "y/hand/kept.txt").write_text("by hand")
    secret = "apiVersion: v1\nkind: Secret\nmetadata: {name: s}\ndata: {token.txt: c2VjcmV0}\n---\n"
    config_map = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: cm}\ndata: {cm.txt: from-map}\n---\n"
    config = (
        secret
        + config_map
        + HEAD
        + textwrap.dedent("""\
        directories:
        - path: "0"
          contents:
          - path: .
            inline:
              paths:
                values.yml: |
                  replicas: 2
              pathsFrom:
              - secretRef: {name: s, directoryPath: secrets}
              - configMapRef: {name: cm}
        - path: "1.0"
          contents:
          - path: .
            directory: {path: local}
        - path: "y"
          contents:
          - path: hand
            manual: {}
        """)
    )
    result = sync(work, config)
    assert result.exit_code == 0, result.stderr
    assert tree(work / "0") == {"cm.txt": ("0o600", "from-map"), "secrets": ("0o700", ""),
                                "secrets/token.txt": ("0o600", "secret"), "values.yml": ("0o600", "replicas: 2\n")}  # fmt: skip
    assert (work / "1.0/file.txt").read_text() == "local"
    assert (work / "y/hand/kept.txt").read_text() == "by hand"
    assert result.stdout == (
        'apiVersion: vendir.k14s.io/v1alpha1\ndirectories:\n- contents:\n  - inline: {}\n    path: .\n  path: "0"\n'
        '- contents:\n  - directory: {}\n    path: .\n  path: "1.0"\n- contents:\n  - manual: {}\n    path: hand\n'
        '  path: "y"\nkind: LockConfig\n'
    )
    escape = HEAD + "directories:\n- path: e\n  contents:\n  - path: .\n    inline: {paths: {../evil: x}}\n"
    failed = sync(work, escape)
    assert failed.exit_code == 2
    assert "Invalid path: ../evil" in failed.stderr
    assert not (work / "evil").exists()


def test_lazy_contents_are_skipped_while_their_config_is_unchanged(work: Path, cache: Path) -> None:
    config = (
        HEAD + "directories:\n- path: v\n  contents:\n  - path: .\n    lazy: true\n    inline: {paths: {a.txt: one}}\n"
    )
    assert sync(work, config).exit_code == 0
    assert "configDigest: " in (work / "vendir.lock.yml").read_text()
    (work / "v/a.txt").write_text("edited by hand")
    skipped = sync(work, config)
    assert "Skipping fetch: v + . (flagged as lazy, config has not changed since last sync)" in skipped.stderr
    assert (work / "v/a.txt").read_text() == "edited by hand"
    forced = sync(work, config, "--no-lazy")
    assert forced.exit_code == 0
    assert (work / "v/a.txt").read_text() == "one"


def test_partial_sync_with_a_local_override_keeps_the_lock(work: Path, cache: Path) -> None:
    (work / "override").mkdir()
    (work / "override/o.txt").write_text("override")
    config = HEAD + textwrap.dedent("""\
        directories:
        - path: v
          contents:
          - path: a
            inline: {paths: {a.txt: a}}
          - path: b
            inline: {paths: {b.txt: b}}
        """)
    assert sync(work, config).exit_code == 0
    lock = (work / "vendir.lock.yml").read_text()
    result = sync(work, config, "-d", "v/b=override")
    assert result.exit_code == 0, result.stderr
    assert result.stdout.startswith("apiVersion: vendir.k14s.io/v1alpha1\ndirectories:\n- contents:\n  - directory:")
    assert "Lock config is not saved to 'vendir.lock.yml' due to command line overrides" in result.stderr
    assert (work / "v/b/o.txt").read_text() == "override"
    assert (work / "v/a/a.txt").read_text() == "a"
    assert (work / "vendir.lock.yml").read_text() == lock
    missing = sync(work, config, "-d", "v/zzz")
    assert missing.exit_code == 2
    assert "Expected to match path 'v/zzz' once, but did not match any" in missing.stderr


@pytest.mark.parametrize(
    ("config", "message"),
    [
        (HEAD + "directories: [\n", "Unmarshaling doc: error converting YAML to JSON"),
        (HEAD + "---\n" + HEAD, "Expected to find exactly one config, but found multiple"),
        (HEAD + "directories:\n- path: keep\n  contents:\n  - path: .\n    git2: {}\n",
         "Expected directory contents type to be specified"),
        (HEAD + "directories:\n- path: keep\n  contents:\n  - path: .\n    git: {url: x}\n",
         "Unsupported directory contents type 'git' (supported: image, imgpkgBundle, inline, directory, manual; set "
         "OCIVENDIR_DELEGATE_VENDIR to a vendir binary to sync other types)"),
        (HEAD + "directories:\n- path: keep\n  contents: []\n- path: keep/x\n  contents: []\n",
         "Expected to not manage overlapping paths: 'keep/x' and 'keep'"),
        (HEAD + "directories:\n- path: keep\n  contents:\n  - path: .\n    image: {url: r.io/app, secretRef: {name: nope}}\n",
         "Expected to find one secret 'nope', but found none"),
    ],
)  # fmt: skip
def test_input_errors_are_clear_and_keep_the_previous_tree(work: Path, cache: Path, config: str, message: str) -> None:
    (work / "keep").mkdir()
    (work / "keep/old.txt").write_text("old")
    (work / "vendir.lock.yml").write_text("old lock")
    result = sync(work, config)
    assert result.exit_code == 2
    assert message in " ".join(line.strip() for line in result.stderr.splitlines())
    assert vendir_mode_exit(work, config) == 1
    assert (work / "keep/old.txt").read_text() == "old"
    assert (work / "vendir.lock.yml").read_text() == "old lock"
    assert sorted(p.name for p in work.iterdir()) == ["keep", "vendir.lock.yml", "vendir.yml"]


def vendir_mode_exit(work: Path, config: str) -> int:
    return sync(work, config, prog="vendir").exit_code


def test_a_failed_second_directory_changes_nothing_on_disk(
    registry: Registry, pusher: Pusher, repo_prefix: str, work: Path, cache: Path
) -> None:
    ref = pusher.image(f"{repo_prefix}/img", make_image({"new.txt": "new"}))
    good = HEAD + f'directories:\n- path: a\n  contents:\n  - path: .\n    image: {{url: "{ref}"}}\n'
    assert sync(work, good).exit_code == 0
    (work / "a/new.txt").write_text("changed locally")
    missing = f"{registry.host}/{repo_prefix}/img@sha256:{'0' * 64}"
    two = good + f'- path: b\n  contents:\n  - path: .\n    image: {{url: "{missing}"}}\n'
    two = two.replace("directories:\n", "directories:\n", 1)
    result = sync(work, two)
    assert result.exit_code == 1
    assert "Syncing directory 'b'" in result.stderr
    assert (work / "a/new.txt").read_text() == "changed locally"
    assert not (work / "b").exists()
    assert sorted(p.name for p in work.iterdir()) == ["a", "vendir.lock.yml", "vendir.yml"]


def test_other_source_types_are_synced_by_a_delegate_vendir(
    work: Path, cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake = tmp_path / "fake-vendir"
    fake.write_text(
        "#!/bin/sh\n"
        "# a stand-in for vendir: records its input, writes the content and a lock entry\n"
        'while [ "$#" -gt 0 ]; do case "$1" in --lock-file) lock="$2"; shift;; esac; shift; done\n'
        "cat > input.yml\n"
        "mkdir -p out && echo 'from git' > out/README.md\n"
        'printf "apiVersion: vendir.k14s.io/v1alpha1\\ndirectories:\\n- contents:\\n  - git:\\n'
        '      commitTitle: initial\\n      sha: abc123\\n    path: .\\n  path: out\\nkind: LockConfig\\n" > "$lock"\n'
        'cp input.yml "$OUTPUT_COPY"\n'
    )
    fake.chmod(0o755)
    monkeypatch.setenv("OUTPUT_COPY", str(tmp_path / "delegate-input.yml"))
    secret = "apiVersion: v1\nkind: Secret\nmetadata: {name: git-creds}\ndata: {username: dQ==}\n---\n"
    config = (
        secret
        + HEAD
        + textwrap.dedent("""\
        directories:
        - path: vendor
          contents:
          - path: repo
            git: {url: https://example.com/repo.git, ref: main, secretRef: {name: git-creds}}
          - path: local
            inline: {paths: {a.txt: a}}
        """)
    )
    result = sync(work, config, "--delegate-vendir", str(fake))
    assert result.exit_code == 0, result.stderr
    assert (work / "vendor/repo/README.md").read_text() == "from git\n"
    assert "  - git:\n      commitTitle: initial\n      sha: abc123\n    path: repo\n" in result.stdout
    given = (tmp_path / "delegate-input.yml").read_text()
    assert "name: git-creds" in given
    assert "url: https://example.com/repo.git" in given


# what a warm digest-pinned run must not import: the network stack and rich (cold paths only), and our own modules only
# a cold run, a credential, a filter or `-d` needs. Standard-library modules are no longer counted: a warm call's
# imports are paid once in the resident server (server/preload.py), and in-process the README's budget applies.
WARM_FORBIDDEN = ("requests", "urllib3", "oras", "rich", "ocivendir.registry.auth", "ocivendir.commands.overrides",
                  "ocivendir.engine.stream", "ocivendir.registry.proxy", "ocivendir.vendir.globs")  # fmt: skip
FAST_PATH = ("click",)  # kapp-controller's `vendir sync` and `pull` take the click-free fast paths
# once a run has read the index, the next ones take its answers from the memo (cache/memo.py), not SQLite
MEMO = ("sqlite3", "_sqlite3")
WARM_PULL_FORBIDDEN = (*WARM_FORBIDDEN, *FAST_PATH, *MEMO)


def test_a_warm_digest_pinned_sync_makes_no_request_and_imports_no_network_code(
    registry: Registry, pusher: Pusher, repo_prefix: str, work: Path, cache: Path
) -> None:
    published = publish_bundle(pusher, repo_prefix, images=1)
    relocate(pusher, published, f"{repo_prefix}/copy")
    bundle = published.ref(registry, f"{repo_prefix}/copy")
    image = pusher.image(f"{repo_prefix}/img", make_image({"a.yml": "a"}))
    config = HEAD + textwrap.dedent(f"""\
        directories:
        - path: vendor
          contents:
          - path: bundle
            imgpkgBundle: {{image: "{bundle}"}}
          - path: image
            image: {{url: "{image}"}}
        """)
    assert sync(work, config).exit_code == 0
    assert run_cli("pull", "-b", bundle, "-o", str(work / "pulled")).exit_code == 0
    # the same Config as kapp-controller marshals it (sigs.k8s.io/yaml), after its placeholder Secret
    contents = [{"path": "bundle", "imgpkgBundle": {"image": bundle}}, {"path": "image", "image": {"url": image}}]
    kapp_stdin = placeholder_secret() + emit.dump({"apiVersion": "vendir.k14s.io/v1alpha1", "kind": "Config",
        "minimumRequiredVersion": "", "directories": [{"path": "vendor", "contents": contents}]}).decode()  # fmt: skip
    mark = registry.mark()
    for argv, stdin, forbidden in (
        (["ocivendir", "sync", "--chdir", str(work), "-q"], "", WARM_FORBIDDEN),
        # kapp-controller's command line: the click-free fast path
        (["vendir", "sync", "-f", "-", "--lock-file", "/dev/null", "--chdir", str(work)], kapp_stdin,
         (*WARM_FORBIDDEN, *FAST_PATH, *MEMO)),
        # `pull`'s click-free fast path, in ocivendir and imgpkg modes
        (["ocivendir", "pull", "-b", bundle, "-o", str(work / "pulled")], "", WARM_PULL_FORBIDDEN),
        (["ocivendir", "pull", "-i", image, "-o", str(work / "pulled-image")], "", WARM_PULL_FORBIDDEN),
        (["imgpkg", "pull", "-b", bundle, "-o", str(work / "pulled")], "", WARM_PULL_FORBIDDEN),
    ):  # fmt: skip
        probe = (
            "import sys\nfrom ocivendir.commands import main\n"
            f"sys.argv = {argv!r}\n"
            "try:\n    main()\nexcept SystemExit as exc:\n    code = exc.code\n"
            f"loaded = sorted(m for m in {forbidden!r} if m in sys.modules)\n"
            "sys.stderr.write(f'{code} {loaded}')\n"
        )
        done = subprocess.run([sys.executable, "-c", probe], input=stdin, capture_output=True, text=True,
                              check=False, env={**os.environ, "OCIVENDIR_CACHE_DIR": str(cache)})  # fmt: skip
        assert done.stderr.strip().endswith("0 []"), (argv, done.stderr)
    assert registry.since(mark) == []


def _index_writes(argv: list[str], stdin: str, cache: Path) -> list[str]:
    """The first word of every write statement a run sends to the cache index (traced in a subprocess)."""
    probe = (
        "import sqlite3, sys\nreal = sqlite3.connect\n"
        "def connect(*args, **kwargs):\n"
        "    db = real(*args, **kwargs)\n"
        "    db.set_trace_callback(lambda sql: sys.stderr.write('SQL ' + sql.split(None, 1)[0].upper() + '\\n'))\n"
        "    return db\n"
        "sqlite3.connect = connect\nfrom ocivendir.commands import main\n"
        f"sys.argv = {argv!r}\n"
        "try:\n    main()\nexcept SystemExit as exc:\n    sys.stderr.write(f'EXIT {exc.code}\\n')\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], input=stdin, capture_output=True, text=True, check=False,
                          env={**os.environ, "OCIVENDIR_CACHE_DIR": str(cache)})  # fmt: skip
    assert "EXIT 0" in done.stderr.splitlines(), done.stderr
    reads = {"SQL SELECT", "SQL PRAGMA", "SQL CREATE"}
    return [line[4:] for line in done.stderr.splitlines() if line.startswith("SQL ") and line not in reads]


def test_a_warm_sync_writes_nothing_to_the_index_until_last_used_is_due(
    pusher: Pusher, repo_prefix: str, work: Path, cache: Path
) -> None:
    image = pusher.image(f"{repo_prefix}/img", make_image({"a.yml": "a"}))
    config = HEAD + f"directories:\n- path: vendor\n  contents:\n  - path: image\n    image: {{url: '{image}'}}\n"
    assert sync(work, config).exit_code == 0
    argv = ["vendir", "sync", "-f", "-", "--lock-file", "/dev/null", "--chdir", str(work)]
    assert _index_writes(argv, config, cache) == []
    shutil.rmtree(cache / "memo")  # the row is aged behind ocivendir's back: the read memo holding it goes too
    with contextlib.closing(sqlite3.connect(cache / "index.db")) as db, db:
        db.execute("UPDATE refs SET last_used = last_used - ?", (TOUCH_INTERVAL + 1,))
    # manifest, config and layer: three blobs, three edges and the ref, in one transaction
    assert _index_writes(argv, config, cache) == ["BEGIN", *["INSERT"] * 7, "COMMIT"]
    assert _index_writes(argv, config, cache) == []


def test_locked_needs_an_entry_for_every_content(work: Path, cache: Path) -> None:
    config = HEAD + "directories:\n- path: v\n  contents:\n  - path: a\n    inline: {paths: {a: a}}\n"
    (work / "vendir.lock.yml").write_text(
        "apiVersion: vendir.k14s.io/v1alpha1\ndirectories:\n- contents: []\n  path: v\nkind: LockConfig\n"
    )
    result = sync(work, config, "--locked")
    assert result.exit_code == 2
    assert "Expected to find contents 'a' within directory 'v' in lock config, but did not" in result.stderr
    assert sync(work, config).exit_code == 0
    assert sync(work, config, "--locked").exit_code == 0


def test_links_are_checked_wherever_they_may_be_and_only_there(
    registry: Registry, pusher: Pusher, repo_prefix: str, work: Path, cache: Path, tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    """A tree laid down only from layers holds no link (the extractor makes none): no walk for links.

    A directory content beside it, or a lazy content copied from the old tree (where a link may be planted), is walked.
    """
    from ocivendir.engine import sync as engine_sync  # noqa: PLC0415

    walked: list[str] = []
    real_check = engine_sync._check_symlinks
    monkeypatch.setattr(engine_sync, "_check_symlinks", lambda root: walked.append(root) or real_check(root))
    ref = pusher.image(f"{repo_prefix}/links", make_image({"app.yml": "a"}))
    image_only = (
        HEAD + f'directories:\n- path: v\n  contents:\n  - path: img\n    lazy: true\n    image: {{url: "{ref}"}}\n'
    )
    assert sync(work, image_only).exit_code == 0
    assert walked == []
    (work / "v/img/escape").symlink_to(tmp_path)  # planted in the synced tree; the lazy content is copied from it
    lazy = sync(work, image_only)
    assert lazy.exit_code == 1
    assert f'Invalid symlink found to outside parent directory: "{tmp_path}"' in lazy.stderr
    assert len(walked) == 1
    (work / "v/img/escape").unlink()
    (work / "local").mkdir()
    (work / "local/escape").symlink_to(tmp_path)
    mixed = image_only + "  - path: dir\n    directory: {path: local}\n"
    refused = sync(work, mixed, "--no-lazy")
    assert refused.exit_code == 1
    assert f'Invalid symlink found to outside parent directory: "{tmp_path}"' in refused.stderr


def test_symlinks_leaving_the_directory_are_refused_before_the_swap(work: Path, cache: Path, tmp_path: Path) -> None:
    (work / "local").mkdir()
    (work / "local/inside.txt").write_text("x")
    (work / "local/ok-link").symlink_to("inside.txt")
    (work / "local/escape").symlink_to(tmp_path)
    (work / "v").mkdir()
    (work / "v/old.txt").write_text("old")
    config = HEAD + "directories:\n- path: v\n  contents:\n  - path: .\n    directory: {path: local}\n"
    result = sync(work, config)
    assert result.exit_code == 1
    assert f'Invalid symlink found to outside parent directory: "{tmp_path}"' in result.stderr
    assert sorted(p.name for p in (work / "v").iterdir()) == ["old.txt"]
    allowed = sync(work, config, "--dangerous-allow-all-symlink-destinations")
    assert allowed.exit_code == 0, allowed.stderr
    assert (work / "v/ok-link").is_symlink()
    (work / "local/escape").unlink()
    (work / "local/dangling").symlink_to("nowhere")
    dangling = sync(work, config)
    assert dangling.exit_code == 1
    assert "Unable to resolve symlink:" in dangling.stderr


def test_a_registry_that_refuses_connections_fails_the_sync_at_once(
    work: Path, cache: Path, no_retry_sleep: list[float]
) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # closed when the block ends: nothing listens there
    ref = f"127.0.0.1:{port}/team/app@sha256:{'ab' * 32}"
    config = HEAD + f"directories:\n- path: v\n  contents:\n  - path: a\n    image: {{url: {ref}}}\n"
    result = sync(work, config, prog="vendir")
    assert result.exit_code == 1
    # one try per allowed scheme (https, then plain HTTP for a loopback host), no retry of a refusal
    assert result.stderr.count("connect: connection refused") == 2, result.stderr
    assert no_retry_sleep == []
