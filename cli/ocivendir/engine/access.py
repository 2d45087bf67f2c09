"""Owns: whether this caller may be served a manifest that a shared cache already holds.

A cache shared by several Apps or users must not hand private content to a caller who could not fetch it. This sits
on top of possession (`engine/content.py`): only a repository that served a manifest is ever asked about it. Each cached
manifest carries the principals that could read it in its repository (`cache/index.py`, fingerprints from
`cache/grants.py`): a manifest readable anonymously, or one this caller's credential read before, is served with no
request; otherwise the caller proves access with one HEAD of the manifest with its own credentials (and is recorded),
or is refused.
"""

from __future__ import annotations

from ocivendir.cache.grants import ANONYMOUS_PRINCIPAL
from ocivendir.errors import Denied, Transient
from ocivendir.results import ImageStatus

TYPE_CHECKING = False
if TYPE_CHECKING:
    from ocivendir.engine.content import Content
    from ocivendir.oci.reference import Digest, Repository

__all__ = ["admit", "granted", "record"]


class OfflineProof(Transient):
    """Access to cached content must be proven, and the network is off."""

    code = "offline"


def record(content: Content, repo: Repository, digest: Digest) -> None:
    """This caller just read the manifest from the registry: remember that it may."""
    if content.index is None or content.principal is None:
        return
    content.index.grant(digest, str(repo), content.principal_for(repo))


def granted(content: Content, repo: Repository, digest: Digest) -> bool:
    """True if this caller may be served a cached manifest with no request.

    That is: `repo` possesses it, and it is readable anonymously or this caller's credential read it.
    """
    index = content.index
    if index is None or content.principal is None:
        return True
    if not content.holds(repo, digest):
        return False
    principals = index.grants(digest, str(repo))
    return ANONYMOUS_PRINCIPAL in principals or content.principal_for(repo) in principals


def admit(content: Content, repo: Repository, digest: Digest) -> None:
    """Let this caller be served a cached manifest, proving access with one HEAD when it is not known to have it."""
    index = content.index
    if index is None or content.principal is None:
        return
    granted = index.grants(digest, str(repo))
    if ANONYMOUS_PRINCIPAL in granted:
        return
    me = content.principal_for(repo)
    if me in granted:
        return
    what = f"'{repo}@{digest}' is in the cache, but this caller has not been seen to read it"
    if content.offline:
        raise OfflineProof(f"{what}; proving access needs the registry and the network is off (--offline)")
    status = content.probe(repo, digest)
    if status is not ImageStatus.PRESENT:
        raise Denied(
            f"{what}, and the registry does not let this caller read it (HEAD: {status})",
            hint="check the credentials for this registry",
        )
    index.grant(digest, str(repo), me)
