"""Owns: running a real vendir for one content ocivendir does not implement (git, hg, http, helmChart, githubRelease).

A one-content config with the secrets it references, run in a scratch dir inside the stage.
"""

from __future__ import annotations

import base64
import os
from typing import TYPE_CHECKING, Any

from ocivendir.errors import SyncError, os_reason
from ocivendir.fs.paths import split
from ocivendir.fs.swap import remove_tree
from ocivendir.goyaml import emit
from ocivendir.vendir.lockfile import LockContent, parse_lock

if TYPE_CHECKING:
    from ocivendir.engine.sources import FetchContext
    from ocivendir.vendir.config import Content as ContentConfig

__all__ = ["delegate_content"]

_TIMEOUT = 1800


def _referenced(value: Any, kind: str) -> set[str]:  # noqa: ANN401 - raw source data
    """Names under any `<kind>: {name: …}` key, at any depth of the source."""
    names: set[str] = set()
    if isinstance(value, dict):
        for key, item in value.items():
            if key == kind and isinstance(item, dict) and item.get("name"):
                names.add(str(item["name"]))
            names |= _referenced(item, kind)
    elif isinstance(value, list):
        for item in value:
            names |= _referenced(item, kind)
    return names


def _stream(config: ContentConfig, context: FetchContext) -> bytes:
    documents = []
    for name in sorted(_referenced(config.source, "secretRef")):
        secret = context.stream.secret(name)
        data = {k: base64.b64encode(v.encode()).decode() for k, v in secret.data.items()}
        documents.append(emit.dump({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name},
                                      "type": secret.type or "Opaque", "data": data}))  # fmt: skip
    for name in sorted(_referenced(config.source, "configMapRef")):
        config_map = context.stream.config_map(name)
        documents.append(emit.dump({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name},
                                      "data": config_map.data}))  # fmt: skip
    one = {**config.to_go(), "path": "."}
    one.pop("lazy", None)
    documents.append(emit.dump({"apiVersion": "vendir.k14s.io/v1alpha1", "kind": "Config",
                                  "directories": [{"path": "out", "contents": [one]}]}))  # fmt: skip
    return b"---\n".join(documents)


def delegate_content(vendir: str, config: ContentConfig, context: FetchContext, dest: str) -> LockContent:
    """Sync one content with a real vendir; its files become `dest`, its lock entry is copied verbatim.

    The delegate always resolves afresh (it is not given `--locked`): its own lock entry is what ocivendir records.
    """
    parent, name = split(dest)
    scratch = os.path.join(parent, f".{name}.ocivendir-delegate")
    remove_tree(scratch)
    os.makedirs(scratch, 0o700)
    lock_path = os.path.join(scratch, "vendir.lock.yml")
    import subprocess  # noqa: PLC0415 - only when delegating

    argv = [str(vendir), "sync", "-f", "-", "--lock-file", str(lock_path)]
    try:
        done = subprocess.run(argv, input=_stream(config, context), cwd=scratch, capture_output=True,
                              timeout=_TIMEOUT, check=False)  # fmt: skip
        if done.returncode != 0:
            raise SyncError(done.stderr.decode(errors="replace").strip() or f"{vendir} exited {done.returncode}")
        remove_tree(dest)
        os.rename(os.path.join(scratch, "out"), dest)
        with open(lock_path, "rb") as handle:
            lock = parse_lock(handle.read(), lock_path)
        entry = lock.find("out", ".")
    except OSError as exc:
        raise SyncError(f"Running {vendir}: {os_reason(exc)}") from None
    finally:
        remove_tree(scratch)
    return LockContent(path=config.path, source_type=entry.source_type, data=entry.data,
                       config_digest=entry.config_digest)  # fmt: skip
