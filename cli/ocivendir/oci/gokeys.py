"""Owns: refusing a manifest, index or image config whose field names Go would read otherwise than ocivendir does.

imgpkg, vendir, crane and containerd read these documents with Go's encoding/json, which gives a struct field every
key that equals its name ignoring case (`gofold.py`), each occurrence overwriting the last, and merges an object
field met twice. ocivendir reads exact names. So `"layers":[A]` with `"Layers":[B]` would extract A here and B in
imgpkg under the same digest. Rather than copy Go's reading (and a reader written in yet another language would
differ again), a document is refused when, in an object Go decodes into a struct, a key matches a known field of
that struct (of go-containerregistry's v1 types, which imgpkg and vendir decode into) without being its exact name,
or an exact name appears more than once. What is accepted then reads the same in every reader. Unknown keys stay
allowed, as the OCI specifications require; map fields (annotations, labels) are exact in Go too and are not checked.
"""

from __future__ import annotations

from ocivendir.errors import UnsupportedMediaType
from ocivendir.gofold import go_fold

__all__ = ["CONFIG_FILE", "MANIFEST_OR_INDEX", "TAG_LIST", "JSONObject", "check", "with_repeats"]

# a struct: its field names, each with the struct (a dict) or list of structs (a one-element tuple) beneath, or None
Shape = dict[str, "Shape | tuple[Shape] | None"]

PLATFORM: Shape = dict.fromkeys(("architecture", "os", "os.version", "os.features", "variant", "features"))
DESCRIPTOR: Shape = {
    **dict.fromkeys(("mediaType", "size", "digest", "data", "urls", "annotations", "artifactType")),
    "platform": PLATFORM,
}
MANIFEST_OR_INDEX: Shape = {  # the top of a manifest and of an index: either may come under either media type
    **dict.fromkeys(("schemaVersion", "mediaType", "annotations", "artifactType")),
    "config": DESCRIPTOR,
    "layers": (DESCRIPTOR,),
    "manifests": (DESCRIPTOR,),
    "subject": DESCRIPTOR,
}
_RUN_CONFIG: Shape = dict.fromkeys((
    "AttachStderr", "AttachStdin", "AttachStdout", "Cmd", "Healthcheck", "Domainname", "Entrypoint", "Env",
    "Hostname", "Image", "Labels", "OnBuild", "OpenStdin", "StdinOnce", "Tty", "User", "Volumes", "WorkingDir",
    "ExposedPorts", "ArgsEscaped", "NetworkDisabled", "MacAddress", "StopSignal", "Shell",
))  # fmt: skip
_CONFIG_FILE_FIELDS = (
    "architecture", "author", "container", "created", "docker_version", "os", "os.version", "variant", "os.features",
)  # fmt: skip
CONFIG_FILE: Shape = {
    **dict.fromkeys(_CONFIG_FILE_FIELDS),
    "history": (dict.fromkeys(("author", "created", "created_by", "comment", "empty_layer")),),
    "rootfs": dict.fromkeys(("type", "diff_ids")),
    "config": _RUN_CONFIG,
}


TAG_LIST: Shape = dict.fromkeys(("name", "tags"))  # a registry's tag list, as go-containerregistry's remote reads it


class JSONObject(dict[str, object]):
    """An object read with `with_repeats`: `repeated` holds the keys it had more than once."""

    __slots__ = ("repeated",)

    repeated: frozenset[str]


def with_repeats(pairs: list[tuple[str, object]]) -> JSONObject:
    """The `object_pairs_hook` `check` needs: a dict as json makes it (the last value wins), its repeats noted."""
    made = JSONObject(pairs)
    if len(made) == len(pairs):
        made.repeated = frozenset()
    else:
        seen: set[str] = set()
        repeated: set[str] = set()
        for key, _ in pairs:
            (repeated if key in seen else seen).add(key)
        made.repeated = frozenset(repeated)
    return made


_FOLDED: dict[int, dict[str, str]] = {}  # per shape (by identity): its field names by their lower-case form


def _folded(shape: Shape) -> dict[str, str]:
    names = _FOLDED.get(id(shape))
    if names is None:
        names = _FOLDED[id(shape)] = {name.lower(): name for name in shape}
    return names


def check(doc: object, shape: Shape, where: str) -> None:
    """Refuse `doc` (read with the `with_repeats` hook) if Go would match one of its keys otherwise."""
    if not isinstance(doc, dict):
        return
    names = _folded(shape)
    repeated: frozenset[str] = getattr(doc, "repeated", frozenset())
    for key, value in doc.items():
        if key in shape:
            name = key
        else:
            name = names.get(go_fold(key) or "")
            if name is None:
                continue  # a key Go ignores too
            _refuse(where, f"has the key {key!r}, which Go's encoding/json reads as the field {name!r}")
        if key in repeated:
            _refuse(where, f"has the field {name!r} more than once")
        beneath = shape[name]
        if beneath is not None:
            _descend(value, beneath, f"{where}: {name}")


def _descend(value: object, beneath: Shape | tuple[Shape], where: str) -> None:
    if isinstance(beneath, dict):
        check(value, beneath, where)
    elif isinstance(beneath, tuple) and isinstance(value, list):
        for position, item in enumerate(value):
            check(item, beneath[0], f"{where}[{position}]")


def _refuse(where: str, problem: str) -> None:
    message = f"{where} {problem}: Go tools (imgpkg, vendir, crane) would read it otherwise; refused"
    raise UnsupportedMediaType(message)
