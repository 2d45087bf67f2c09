"""Owns: whether this caller may be served a manifest that a shared cache already holds.

A cache shared by several Apps or users must not hand private content to a caller who could not fetch it, nor tell
that caller it is there. This sits on top of possession (`engine/content.py` asks only about a manifest its
repository served, and owns a `Grants` for its caller): each cached manifest carries the principals that could read
it in its repository (`cache/index.py`, fingerprints from `cache/grants.py`): a manifest readable anonymously, or one
this caller's credential read before, is served with no request. Any other caller is treated as if the manifest were
not cached: it fetches it from the registry with its own credentials (recorded when that succeeds), and a refusal is
the registry's answer, word for word what an empty cache would show.
"""

from __future__ import annotations

from ocivendir.cache.grants import ANONYMOUS_PRINCIPAL
from ocivendir.cache.unwritable import best_effort

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable

    from ocivendir.cache.index import CacheIndex
    from ocivendir.oci.reference import Digest, Repository

__all__ = ["Grants"]


class Grants:
    """One caller's grants in a cache index: who it is to each repository, asked only when the answer matters."""

    def __init__(self, index: CacheIndex | None, principal: Callable[[Repository], str] | None) -> None:
        """Grants in `index` (None: a cache private to the run) for the caller `principal` names (None: anyone)."""
        self.index = index
        self.principal = principal

    def record(self, repo: Repository, digest: Digest, *, anonymous: bool = False) -> None:
        """This caller just read the manifest from the registry: remember that it may (anyone may, if `anonymous`).

        `anonymous`: the registry gave it without any credential being sent. The caller's credential is then not looked
        up at all (a docker config is read, a helper run, only when a registry asks for credentials).
        """
        if self.index is None or self.principal is None:
            return
        index, principal = self.index, ANONYMOUS_PRINCIPAL if anonymous else self.principal(repo)
        best_effort(lambda: index.grant(digest, str(repo), principal), f"a grant for {repo}@{digest}")

    def granted(self, repo: Repository, digest: Digest) -> bool:
        """True if this caller may be served, with no request, a cached manifest that `repo` possesses.

        That is: it is readable anonymously or this caller's credential read it. A cache private to the run (no
        index) or a run that does not tell callers apart (no principal) serves what `repo` holds.
        """
        if self.index is None or self.principal is None:
            return True
        principals = self.index.grants(digest, str(repo))
        return ANONYMOUS_PRINCIPAL in principals or self.principal(repo) in principals
