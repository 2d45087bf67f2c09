"""Owns: the signature policy files as read — their texts and one digest over them, parsed only when needed.

A warm run whose verdicts are remembered never parses a policy: a verdict is also remembered under this digest (of
every file's path and text, in the order read) and the trusted root's, which decide a verdict whole. `parse` reads
them as `sign/policy.py` does, and refuses a keyless authority when no trusted root is given.
"""

from __future__ import annotations

import hashlib

from ocivendir.errors import ConfigError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from ocivendir.sign.policy import PolicySet

__all__ = ["PolicySource"]


class PolicySource:
    """The files of `--policy` (path, text), and the sha256 over them."""

    __slots__ = ("digest", "files")

    def __init__(self, files: tuple[tuple[str, str], ...]) -> None:
        """Keep the files and digest them (paths too: a policy's file is part of what it says)."""
        self.files = files
        digest = hashlib.sha256()
        for path, text in files:
            for part in (path, text):
                data = part.encode("utf-8", "surrogateescape")
                digest.update(b"%d:%b" % (len(data), data))
        self.digest = digest.hexdigest()

    def parse(self, *, trusted_root: bool) -> PolicySet:
        """The policies (ConfigError naming the file and field when one is not valid, or is keyless without a root)."""
        from ocivendir.sign.policy import parse_policies, policy_set  # noqa: PLC0415 - only when a verdict is needed

        chosen = policy_set(policy for path, text in self.files for policy in parse_policies(text, path))
        if chosen.keyless and not trusted_root:
            policy, authority = chosen.keyless[0]
            raise ConfigError(
                f"signature policy '{policy.name}' ({policy.source}), authority '{authority.name}': a keyless "
                "authority needs a Sigstore trusted root: give --trusted-root PATH or OCIVENDIR_TRUSTED_ROOT "
                "(trusted_root.json)"
            )
        return chosen
