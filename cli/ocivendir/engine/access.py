"""Owns: whether this caller may be served a manifest that a shared cache already holds.

A cache shared by several Apps or users must not hand private content to a caller who could not fetch it, nor tell
that caller it is there. This sits on top of possession (`engine/content.py`): only a repository that served a
manifest is ever asked about it. Each cached manifest carries the principals that could read it in its repository
(`cache/index.py`, fingerprints from `cache/grants.py`): a manifest readable anonymously, or one this caller's
credential read before, is served with no request. Any other caller is treated as if the manifest were not cached:
it fetches it from the registry with its own credentials (recorded when that succeeds), and a refusal is the
registry's answer, word for word what an empty cache would show.
"""

from __future__ import annotations

from ocivendir.cache.grants import ANONYMOUS_PRINCIPAL
from ocivendir.cache.unwritable import best_effort

TYPE_CHECKING = False
if TYPE_CHECKING:
    from ocivendir.engine.content import Content
    from ocivendir.oci.reference import Digest, Repository

__all__ = ["granted", "record"]


def record(content: Content, repo: Repository, digest: Digest) -> None:
    """This caller just read the manifest from the registry: remember that it may."""
    if content.index is None or content.principal is None:
        return
    index, principal = content.index, content.principal_for(repo)
    best_effort(lambda: index.grant(digest, str(repo), principal), f"a grant for {repo}@{digest}")


def granted(content: Content, repo: Repository, digest: Digest) -> bool:
    """True if this caller may be served a cached manifest with no request.

    That is: `repo` possesses it, and it is readable anonymously or this caller's credential read it. A cache
    private to the run (no index) or a run that does not tell callers apart (no principal) serves what `repo` holds.
    """
    index = content.index
    if not content.holds(repo, digest):
        return False
    if index is None or content.principal is None:
        return True
    principals = index.grants(digest, str(repo))
    return ANONYMOUS_PRINCIPAL in principals or content.principal_for(repo) in principals
