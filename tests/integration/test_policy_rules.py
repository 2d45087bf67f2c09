"""policy-controller's rules for several policies and authorities, and `signatureFormat`, against the real registry.

As its validator (pkg/webhook/validator.go) decides: every matching policy must pass; a policy passes when any one
of its authorities matches, whatever the others say (a `static: fail` beside a verifying key does not stop it); a
failing `mode: warn` policy is a warning while a failing enforce policy beside it still refuses; `signatureFormat:
legacy` reads only cosign's `.sig` images and `bundle` only Sigstore bundles (unset, ocivendir reads both).
"""

from __future__ import annotations

from pathlib import Path

from cryptography.hazmat.primitives.asymmetric import ec

from tests.integration.test_signatures import pull_image, pushed_image, write_policy
from tests.support.builders import Pusher
from tests.support.cosign import Key, policy, sign
from tests.support.fresh import fresh_python
from tests.support.registry import Registry
from tests.support.sigstore import attach_bundle, bundle

STATIC_FAIL = "  - name: break-glass\n    static: {action: fail, message: frozen}\n"


def with_format(text: str, value: str) -> str:
    return text.replace("  - name: key-0\n", f"  - name: key-0\n    signatureFormat: {value}\n")


def signed(pusher: Pusher, repo: str) -> tuple[str, Key]:
    """An image pushed to `repo` and signed by a new key, as cosign does."""
    key = Key.make()
    ref, digest = pushed_image(pusher, repo)
    sign(pusher, repo, digest, key)
    return ref, key


def test_a_policy_passes_when_any_authority_matches_even_beside_a_static_fail(
    registry: Registry, pusher: Pusher, repo_prefix: str, tmp_path: Path
) -> None:
    repo = f"{repo_prefix}/app"
    ref, key = signed(pusher, repo)
    both = write_policy(tmp_path, policy("p", f"{registry.host}/{repo}@*", key, extra=STATIC_FAIL), "both.yaml")
    assert pull_image(ref, tmp_path / "one", tmp_path / "cache", both).exit_code == 0
    alone = policy("p", f"{registry.host}/{repo}@*", Key.make(), extra=STATIC_FAIL)
    refused = pull_image(ref, tmp_path / "two", tmp_path / "cache", write_policy(tmp_path, alone, "alone.yaml"))
    assert refused.exit_code == 1
    said = " ".join(refused.stderr.split())
    assert "authority 'key-0': no signature verifies with its key (1 checked)" in said
    assert "authority 'break-glass': disallowed by static policy: frozen" in said


def test_a_failing_warn_policy_warns_while_a_failing_enforce_policy_beside_it_refuses(
    registry: Registry, pusher: Pusher, repo_prefix: str, tmp_path: Path
) -> None:
    repo = f"{repo_prefix}/app"
    ref, key = signed(pusher, repo)
    directory = tmp_path / "policies"
    directory.mkdir()
    write_policy(directory, policy("soft", f"{registry.host}/**", Key.make(), mode="warn"), "a.yaml")
    write_policy(directory, policy("signed", f"{registry.host}/{repo}@*", key), "b.yaml")
    served = pull_image(ref, tmp_path / "one", tmp_path / "cache", directory)
    assert served.exit_code == 0, served.stderr
    assert "ocivendir: Warning: image" in served.stderr
    assert "signature policy 'soft'" in served.stderr
    write_policy(directory, policy("hard", f"{registry.host}/{repo_prefix}/**", Key.make()), "c.yaml")
    refused = pull_image(ref, tmp_path / "two", tmp_path / "cache", directory)
    assert refused.exit_code == 1
    said = " ".join(refused.stderr.split())
    assert "signature policy 'hard'" in said
    assert "ocivendir: Warning:" in said  # the warn policy still says so
    assert not (tmp_path / "two").exists()


def test_signature_format_legacy_reads_only_sig_images_and_bundle_only_sigstore_bundles(
    registry: Registry, pusher: Pusher, repo_prefix: str, tmp_path: Path
) -> None:
    key = Key.make()
    assert isinstance(key.private, ec.EllipticCurvePrivateKey)
    repo = f"{repo_prefix}/app"
    classic_ref, classic = pushed_image(pusher, repo, "classic\n")
    sign(pusher, repo, classic, key)
    bundled_ref, bundled = pushed_image(pusher, repo, "bundled\n")
    attach_bundle(pusher, repo, bundled, bundle(digest=bundled, key=key.private))
    text = policy("p", f"{registry.host}/{repo}@*", key)
    cases = [("", classic_ref, 0), ("", bundled_ref, 0), ("legacy", classic_ref, 0), ("legacy", bundled_ref, 1),
             ("bundle", bundled_ref, 0), ("bundle", classic_ref, 1)]  # fmt: skip
    for number, (value, ref, code) in enumerate(cases):
        path = write_policy(tmp_path, with_format(text, value) if value else text, f"p{number}.yaml")
        mark = registry.mark()
        done = pull_image(ref, tmp_path / f"out{number}", tmp_path / f"cache{number}", path)
        assert done.exit_code == code, (value, ref, done.stderr)
        asked = [r[1] for r in registry.since(mark)]
        if value == "legacy":
            assert not [p for p in asked if "/referrers/" in p]
        if value == "bundle":
            assert not [p for p in asked if p.endswith(".sig")]


def test_a_warm_run_with_the_same_policy_files_parses_no_policy_and_an_edit_verifies_again(
    registry: Registry, pusher: Pusher, repo_prefix: str, tmp_path: Path
) -> None:
    repo = f"{repo_prefix}/app"
    ref, key = signed(pusher, repo)
    path = write_policy(tmp_path, policy("p", f"{registry.host}/{repo}@*", key))
    cache = tmp_path / "cache"
    assert pull_image(ref, tmp_path / "cold", cache, path).exit_code == 0
    argv = ["pull", "-i", ref, "-o", str(tmp_path / "warm"), "--cache-dir", str(cache), "--policy", str(path)]
    code = (
        "import sys; from ocivendir.commands import main\n"
        f"try:\n    main({argv!r})\nexcept SystemExit as exc:\n    assert exc.code == 0, exc.code\n"
        "print(sorted(m for m in ('ocivendir.sign.policy', 'ocivendir.sign.glob', 'ocivendir.engine.verification',"
        " 'cryptography') if m in sys.modules))"
    )
    mark = registry.mark()
    assert fresh_python(code).stdout.strip().splitlines()[-1] == "[]"
    assert registry.since(mark) == []
    # another byte in the files (a comment): the policies are parsed again, the verdict under them is still remembered
    path.write_text(path.read_text() + "# reviewed\n")
    mark = registry.mark()
    again = pull_image(ref, tmp_path / "edited", cache, path)
    assert again.exit_code == 0, again.stderr
    assert registry.since(mark) == []


def test_two_authorities_of_one_name_each_verify_with_their_own_key(
    registry: Registry, pusher: Pusher, repo_prefix: str, tmp_path: Path
) -> None:
    # keys were remembered by (policy, authority name): the second `release` checked signatures with the first's key
    repo = f"{repo_prefix}/app"
    ref, key = signed(pusher, repo)
    other = Key.make()
    text = policy("p", f"{registry.host}/{repo}@*", other, key).replace("name: key-1", "name: key-0")
    assert text.count("name: key-0") == 2
    done = pull_image(ref, tmp_path / "out", tmp_path / "cache", write_policy(tmp_path, text))
    assert done.exit_code == 0, done.stderr  # the second `key-0` holds the signing key
    swapped = policy("p", f"{registry.host}/{repo}@*", other, Key.make()).replace("name: key-1", "name: key-0")
    refused = pull_image(ref, tmp_path / "out2", tmp_path / "cache", write_policy(tmp_path, swapped, "b.yaml"))
    assert refused.exit_code == 1  # neither of the two holds it
