"""Signature policies: policy-controller's glob table, ClusterImagePolicy parsing and its errors, loading."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from ocivendir.errors import ConfigError
from ocivendir.settings import Flags, load_policies, load_settings
from ocivendir.sign.glob import compile_glob, glob_matches
from ocivendir.sign.policy import Identity, parse_policies, policy_set
from tests.support.cosign import Key, policy
from tests.support.fresh import fresh_python

DIGEST = "sha256:5504f2a95018e3d8a52d80d9e1a128c6ea337581808ff9fe96f5628ce2336350"

# policy-controller's pkg/apis/glob/glob_test.go, case for case
GLOB_CASES = [
    ("foo", "index.docker.io/library/foo:latest", True),
    ("foo", "index.docker.io/library/foo:*", True),
    ("foo", "index.docker.io/library/*", True),
    ("foo", "index.docker.io/library/*:latest", True),
    ("foo", "index.docker.io/*/*", True),
    ("foo", "index.docker.io/**", True),
    ("foo", "index.docker.**", True),
    ("foo", "inde**", True),
    ("foo", "**", True),
    ("foo", "foo", True),
    ("foo", "foo*", True),
    ("foo", "foo**", True),
    ("myuser/myapp", "index.docker.io/myuser/myapp:latest", True),
    ("myuser/myapp", "index.docker.io/myuser/myapp:*", True),
    ("myuser/myapp", "index.docker.io/myuser/*", True),
    ("myuser/myapp", "index.docker.io/myuser/*:latest", True),
    ("myuser/myapp", "index.docker.io/*/*", True),
    ("myuser/myapp", "index.docker.io/**", True),
    ("myuser/myapp", "index.docker.**", True),
    ("myuser/myapp", "inde**", True),
    ("myuser/myapp", "**", True),
    ("myuser/myapp", "myuser/myapp", True),
    ("myuser/myapp", "myuser/myapp*", True),
    ("myuser/myapp", "myuser/myapp**", True),
    ("ghcr.io/foo/bar", "ghcr.io/*/*", True),
    ("ghcr.io/foo/bar", "ghcr.io/**", True),
    ("ghcr.io/foo", "ghcr.io/*/*", False),
    ("ghcr.io/foo", "ghcr.io/**", True),
    ("ghcr.io/foo", "ghc**", True),
    ("ghcr.io/foo", "**", True),
    ("ghcr.io/foo", "*/**", True),
    ("ghcr.io/foo", "ghcr.io/foo*", True),
    ("ghcr.io/foo", "ghcr.io/foo**", True),
    ("prefix-ghcr.io/foo", "ghcr.io/foo", False),
    ("ghcr.io/foo-suffix", "ghcr.io/foo", False),
    ("ghcrxio/foo", "ghcr.io/**", False),
    ("invalid&name", "**", False),
    ("foo", "*", True),
    ("myuser/myapp", "*/*", True),
    (f"ghcr.io/foo@{DIGEST}", f"ghcr.io/foo@{DIGEST}", True),
]


@pytest.mark.parametrize(("image", "glob", "expected"), GLOB_CASES)
def test_globs_match_as_policy_controller_matches_them(image: str, glob: str, expected: bool) -> None:
    assert glob_matches(compile_glob(glob), image) is expected


@pytest.mark.parametrize(
    ("image", "glob"),
    [("LOCALHOST:5000/team/app:v1", "localhost:5000/team/**"), ("localhost:5000/team/app:v1", "LocalHost:5000/team/**"),
     ("Registry.Corp/team/app@sha256:" + "a" * 64, "registry.corp/team/*@*")],
)  # fmt: skip
def test_a_registry_host_in_another_case_is_the_same_registry_to_a_glob(image: str, glob: str) -> None:
    # policy-controller compares the text: an App naming `LOCALHOST:5000/…` stepped around a `localhost:5000/**`
    # enforce policy and pulled unsigned content (adversarial review of signatures)
    assert glob_matches(compile_glob(glob), image)
    assert not glob_matches(compile_glob(glob), image.replace("team", "Team", 1))  # the path stays exact


@pytest.mark.parametrize("glob", [".+", "[a-z]*", "a b", ""])
def test_invalid_globs_are_refused(glob: str) -> None:
    with pytest.raises(ValueError, match="invalid glob"):
        compile_glob(glob)


def doc(spec: str, name: str = "p") -> str:
    return (
        f"apiVersion: policy.sigstore.dev/v1beta1\nkind: ClusterImagePolicy\nmetadata: {{name: {name}}}\nspec: {spec}\n"
    )


def test_a_policy_is_parsed_with_defaults_and_a_digest_that_follows_its_spec() -> None:
    key = Key.make()
    (parsed,) = parse_policies(policy("p", "registry.example/**", key), "f.yaml")
    assert parsed.name == "p"
    assert parsed.mode == "enforce"
    assert parsed.globs == ("registry.example/**",)
    assert [(a.name, a.kind, a.hash_algorithm) for a in parsed.authorities] == [("key-0", "key", "sha256")]
    assert parsed.matches(f"registry.example/team/app@{DIGEST}")
    assert not parsed.matches(f"other.example/app@{DIGEST}")
    (same,) = parse_policies(policy("p", "registry.example/**", key), "g.yaml")
    (warn,) = parse_policies(policy("p", "registry.example/**", key, mode="warn"), "f.yaml")
    assert same.digest == parsed.digest
    assert warn.digest != parsed.digest


def test_documents_several_and_empty_ones_and_static_authorities() -> None:
    text = "---\n" + doc("{images: [{glob: '**'}], authorities: [{static: {action: fail, message: nope}}]}") + "---\n"
    text += doc("{images: [{glob: '**'}], authorities: [{name: ok, static: {action: pass}}]}", "q")
    first, second = parse_policies(text, "f.yaml")
    assert (first.authorities[0].kind, first.authorities[0].action, first.authorities[0].message) == (
        "static",
        "fail",
        "nope",
    )
    assert (second.name, second.authorities[0].name) == ("q", "ok")


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("{images: [{glob: '**'}], authorities: [{static: {action: pass}}], policy: {type: cue}}",
         "spec.policy: this field is not supported by ocivendir"),
        ("{images: [{glob: '**'}], authorities: [{static: {action: pass}}], match: []}",
         "spec.match: this field is not supported"),
        ("{images: [{glob: '**'}], authorities: [{static: {action: pass}, source: [{oci: x}]}]}",
         "spec.authorities[0].source: this field is not supported"),
        ("{images: [{glob: '**'}], authorities: [{static: {action: pass}, attestations: []}]}",
         "spec.authorities[0].attestations: this field is not supported"),
        ("{images: [{glob: '**'}], authorities: [{key: {secretRef: {name: k}}}]}",
         "spec.authorities[0].key.secretRef: this field is not supported"),
        ("{images: [{glob: '**'}], authorities: [{keyless: {url: u, identities: [{issuer: i, subject: s}], trustRootRef: r}}]}",
         "spec.authorities[0].keyless.trustRootRef: this field is not supported"),
        ("{images: [{glob: '**'}], authorities: [{keyless: {identities: [{issuer: i, subject: s}], ca-cert: {}}}]}",
         "spec.authorities[0].keyless.ca-cert: this field is not supported"),
        ("{images: [{glob: '**'}], authorities: [{keyless: {identities: [{issuer: i, subject: s}], "
         "insecureIgnoreSCT: 'yes'}}]}",
         "spec.authorities[0].keyless.insecureIgnoreSCT: expected true or false"),
        ("{images: [{glob: '**'}], authorities: [{keyless: {identities: [{issuer: i}]}}]}",
         "expected exactly one of subject and subjectRegExp"),
        ("{images: [{glob: '**'}], authorities: [{keyless: {identities: [{issuer: i, subjectRegExp: '('}]}}]}",
         "subjectRegExp: invalid regular expression"),
        ("{images: [{glob: '**'}], authorities: [{static: {action: pass}, key: {data: x}}]}",
         "expected exactly one of key, keyless and static"),
        ("{images: [{glob: '**'}], authorities: [{key: {data: not-pem}}]}", "key.data: expected a PEM public key"),
        ("{images: [{glob: '**'}], authorities: [{static: {action: maybe}}]}", "static.action: expected pass or fail"),
        ("{images: [{glob: '**'}], authorities: [{static: {action: pass}, signatureFormat: dsse}]}",
         "spec.authorities[0].signatureFormat: expected legacy or bundle"),
        ("{images: [{glob: '**'}], authorities: [{keyless: {identities: [{issuer: i, subject: s}]}}]}",
         "spec.authorities[0].keyless.url: missing field"),
        ("{images: [{glob: '[a-z]'}], authorities: [{static: {action: pass}}]}", "spec.images: invalid glob"),
        ("{images: [], authorities: [{static: {action: pass}}]}", "spec.images: expected a non-empty list"),
        ("{images: [{glob: '**'}]}", "spec.authorities: missing field"),
        ("{images: [{glob: '**'}], authorities: [{static: {action: pass}}], mode: audit}",
         "spec.mode: expected enforce or warn"),
        ("{images: [{glob: '**', regex: x}], authorities: [{static: {action: pass}}]}",
         "spec.images[0].regex: unknown field"),
    ],
)  # fmt: skip
def test_unsupported_and_malformed_fields_are_errors_naming_the_field(spec: str, message: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_policies(doc(spec), "f.yaml")
    assert caught.value.message.startswith("Reading signature policy 'f.yaml' (policy 'p'): ")
    assert message in caught.value.message
    assert caught.value.exit_code == 2


def test_kind_api_version_and_name_are_required() -> None:
    with pytest.raises(ConfigError, match=r"\(document 1\): kind: expected ClusterImagePolicy"):
        parse_policies("apiVersion: policy.sigstore.dev/v1beta1\nkind: ImagePolicy\n", "f.yaml")
    with pytest.raises(ConfigError, match=r"\(document 2\): metadata.name: missing field"):
        parse_policies(
            doc("{images: [{glob: a}], authorities: [{static: {action: pass}}]}")
            + "---\napiVersion: policy.sigstore.dev/v1beta1\nkind: ClusterImagePolicy\n",
            "f",
        )


def test_identities_match_exactly_or_by_searched_regexp() -> None:
    exact = Identity(issuer="https://issuer", subject="me@example.com")
    assert exact.matches("https://issuer", "me@example.com")
    assert not exact.matches("https://issuer", "me@example.org")
    pattern = Identity(issuer_regexp="^https://token\\.", subject_regexp="@example\\.com$")
    assert pattern.matches("https://token.actions", "ci@example.com")
    assert not pattern.matches("https://other", "ci@example.com")


@pytest.mark.parametrize(
    ("pattern", "subject", "expected"),
    [
        (r"^\d+@x$", "\u0663@x", False),  # \d is ASCII only (Python's re: any Unicode digit)
        (r"^\w+@", "d\u00e9v@x", False),  # so is \w
        (r"^dev@example\.com$", "dev@example.com\n", False),  # $ is the end of the text, not before a newline
        (r"@example\.com\z", "dev@example.com", True),  # Go's end of text (Python's re refuses \z)
        (r"^\pL+@", "d\u00e9v@x", True),  # Unicode classes (Python's re refuses \pL)
        (r"^te{,2}$", "te", False),  # `{,2}` is text in Go (Python's re: {0,2})
        (r"^te{,2}$", "te{,2}", True),
        (r"example\.com", "dev@example.com", True),  # searched, not anchored: Go's MatchString
    ],
)  # fmt: skip
def test_identity_regexps_are_gos_regexp_syntax_and_searched_as_cosign_does(
    pattern: str, subject: str, expected: bool
) -> None:
    """Cosign compiles `subjectRegExp`/`issuerRegExp` with Go's regexp (MatchString): each case as Go 1.27 answers."""
    assert Identity(issuer="i", subject_regexp=pattern).matches("i", subject) is expected
    assert Identity(issuer_regexp=pattern, subject="s").matches(subject, "s") is expected


@pytest.mark.parametrize(
    "pattern",
    [r"^(?=dev)", r"^(?!x)dev", r"^dev\Z", r"^(d)ev@\1", r"^(?x) dev", r"\Cdev", r"^a++"],
    ids=["lookahead", "negative-lookahead", "Z", "backreference", "verbose", "any-byte", "possessive"],
)
def test_a_pattern_go_refuses_is_a_malformed_policy(pattern: str) -> None:
    """What Go's regexp refuses (and Python's re accepts) is exit 2 when the policy is read, before any request."""
    identity = f"{{issuer: i, subjectRegExp: '{pattern}'}}"  # single-quoted YAML: backslashes are text
    with pytest.raises(ConfigError) as caught:
        parse_policies(
            doc(f"{{images: [{{glob: '**'}}], authorities: [{{keyless: {{url: u, identities: [{identity}]}}}}]}}"),
            "f.yaml",
        )
    assert "spec.authorities[0].keyless.identities[0].subjectRegExp: invalid regular expression: " in str(caught.value)
    assert caught.value.exit_code == 2


def test_a_signer_controlled_subject_cannot_make_matching_backtrack() -> None:
    """RE2 matches in time linear in the subject: a pattern that backtracks exponentially in Python's re returns.

    Python's re took 5.9 s for 27 characters, doubling with each one; 60 here would take centuries. The check runs in
    its own interpreter, killed after a minute (far above RE2's microseconds) so that a regression fails, not hangs.
    """
    code = """if True:
        from ocivendir.sign.policy import Identity
        subject = "a" * 60 + "!"
        for pattern in ("^(a+)+$", "^(a|aa)+$", "^(a*)*b"):
            print(Identity(issuer="i", subject_regexp=pattern).matches("i", subject))
        print(Identity(issuer_regexp="^(a+)+$", subject="s").matches(subject, "s"))
    """
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60)
    assert done.stdout.split() == ["False"] * 4


def test_load_policies_reads_a_file_or_a_directory_skipping_dot_entries(tmp_path: Path) -> None:
    key = Key.make()
    directory = tmp_path / "cm"
    (directory / "..2026_12_04").mkdir(parents=True)
    (directory / "..2026_12_04" / "a.yaml").write_text(policy("a", "**", key))
    (directory / "a.yaml").write_text(policy("a", "**", key))
    (directory / "b.yaml").write_text(policy("b", "**", key) + "---\n")
    loaded = load_policies(load_settings(Flags(policy=str(directory)), {}))
    assert loaded is not None
    assert [p.name for p in loaded.policies] == ["a", "b"]
    assert load_policies(load_settings(Flags(), {})) is None
    from_env = load_policies(load_settings(Flags(), {"OCIVENDIR_POLICY": str(directory / "b.yaml")}))
    assert from_env is not None
    assert [p.name for p in from_env.policies] == ["b"]
    (directory / "c.yaml").write_text(policy("a", "**", key))
    with pytest.raises(ConfigError, match="policy 'a' is also defined in"):
        load_policies(load_settings(Flags(policy=str(directory)), {}))
    with pytest.raises(ConfigError, match="No such file"):
        load_policies(load_settings(Flags(policy=str(tmp_path / "missing.yaml")), {}))


def test_reading_a_policy_does_not_load_cryptography(tmp_path: Path) -> None:
    path = tmp_path / "p.yaml"
    path.write_text(policy("p", "registry.example/**", Key.make()))
    code = (
        "import sys; from ocivendir.settings import Flags, load_policies, load_settings;"
        f"found = load_policies(load_settings(Flags(policy={str(path)!r}), {{}}));"
        f"assert found.matching('registry.example/team/app@{DIGEST}');"
        "print(sorted(m for m in ('cryptography',) if m in sys.modules))"
    )
    assert fresh_python(code).stdout.strip() == "[]"


def test_stars_are_taken_as_policy_controller_replaces_them() -> None:
    assert compile_glob("a***b").tokens == ("a", "**", "*", "b")
    assert glob_matches(compile_glob("r.io/a***b"), "r.io/a/x/yb")
    assert not glob_matches(compile_glob("r.io/a*b"), "r.io/a/b")


def test_a_keyless_authority_is_parsed_with_its_identities_and_sct_choice() -> None:
    text = (
        "apiVersion: policy.sigstore.dev/v1beta1\nkind: ClusterImagePolicy\nmetadata: {name: k}\n"
        "spec:\n  images: [{glob: '**'}]\n  authorities:\n  - keyless:\n      url: https://fulcio.sigstore.dev\n"
        "      insecureIgnoreSCT: true\n      identities: [{issuer: i, subjectRegExp: '^s'}]\n"
    )
    (parsed,) = parse_policies(text, "f")
    (authority,) = parsed.authorities
    assert authority.kind == "keyless"
    assert authority.identities == (Identity(issuer="i", subject_regexp="^s"),)
    assert authority.check_sct is False
    assert policy_set([parsed]).keyless == ((parsed, authority),)


@pytest.mark.parametrize(
    ("given", "formats"),
    [("", {"legacy", "bundle"}), ("legacy", {"legacy"}), ("simplesigning", {"legacy"}), ("bundle", {"bundle"})],
)
def test_signature_format_chooses_cosigns_signature_images_sigstore_bundles_or_both(
    given: str, formats: set[str]
) -> None:
    line = f"    signatureFormat: {given}\n" if given else ""
    text = (
        "apiVersion: policy.sigstore.dev/v1beta1\nkind: ClusterImagePolicy\nmetadata: {name: k}\n"
        f"spec:\n  images: [{{glob: '**'}}]\n  authorities:\n  - key: {{data: '{Key.make().pem.strip()}'}}\n{line}"
    )
    (parsed,) = parse_policies(text.replace("\n-----", "\\n-----"), "f")
    assert parsed.authorities[0].formats == formats
