"""Owns: refusing a JSON document whose known fields have values Go's encoding/json will not decode (an image config).

imgpkg and vendir decode an image config into go-containerregistry's `v1.ConfigFile`, and fail on a value of the
wrong JSON type (`"Labels": {"a": 5}`, `"history": {}`), a time that is not RFC 3339 (`"created": "yesterday"`), an
integer field holding a fraction, or a layer digest (`rootfs.diff_ids`) that is not `sha256:` and 64 hex digits.
ocivendir reads only the labels, but decides from them whether an image is a bundle: a config Go refuses is refused
here too, so no image is a bundle here and an error there. Field names are exact by then (`gokeys.py`); unknown
fields are ignored, as Go ignores them; null leaves any field empty, as in Go.
"""

from __future__ import annotations

from ocivendir.errors import UnsupportedMediaType

__all__ = ["Type", "check_config_types", "check_go_types"]

_INT64 = 1 << 63
Type = str | tuple[str, "Type"] | dict[str, "Type"]  # a leaf, ("list" | "map", element) or a struct's fields

_STRINGS = ("Domainname", "Hostname", "Image", "User", "WorkingDir", "MacAddress", "StopSignal")
_BOOLS = ("AttachStderr", "AttachStdin", "AttachStdout", "OpenStdin", "StdinOnce", "Tty", "ArgsEscaped",
          "NetworkDisabled")  # fmt: skip
_RUN_CONFIG: dict[str, Type] = {
    **dict.fromkeys(_STRINGS, "string"),
    **dict.fromkeys(_BOOLS, "bool"),
    **dict.fromkeys(("Cmd", "Entrypoint", "Env", "OnBuild", "Shell"), ("list", "string")),
    "Labels": ("map", "string"),
    "Volumes": ("map", {}),
    "ExposedPorts": ("map", {}),
    "Healthcheck": {
        "Test": ("list", "string"),
        **dict.fromkeys(("Interval", "Timeout", "StartPeriod", "Retries"), "int"),
    },
}
_HISTORY: dict[str, Type] = {
    "author": "string", "created": "time", "created_by": "string", "comment": "string", "empty_layer": "bool",
}  # fmt: skip
_CONFIG_STRINGS = ("architecture", "author", "container", "docker_version", "os", "os.version", "variant")
CONFIG_FILE: dict[str, Type] = {
    **dict.fromkeys(_CONFIG_STRINGS, "string"),
    "os.features": ("list", "string"),
    "created": "time",
    "history": ("list", _HISTORY),
    "rootfs": {"type": "string", "diff_ids": ("list", "hash")},
    "config": _RUN_CONFIG,
}
_HEX = frozenset("0123456789abcdef")


def _kind(value: object) -> str:
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    return "an array" if isinstance(value, list) else "an object"


def _two(text: str, start: int, top: int) -> bool:
    part = text[start : start + 2]
    return len(part) == 2 and part.isascii() and part.isdigit() and int(part) <= top  # noqa: PLR2004


def _days_in(year: int, month: int) -> int:
    """Days in a month of the proleptic Gregorian calendar (year 0 too, as Go's time takes it)."""
    if month == 2:  # noqa: PLR2004
        return 29 if year % 4 == 0 and (year % 100 != 0 or year % 400 == 0) else 28
    return 30 if month in (4, 6, 9, 11) else 31


def _fraction_then_zone(rest: str) -> str | None:
    """What follows the seconds, less an optional `.digits` (or `,digits`); None when no digit follows the mark."""
    if rest[:1] not in (".", ","):
        return rest
    digits = len(rest) - 1 - len(rest[1:].lstrip("0123456789"))
    return rest[1 + digits :] if digits else None


def is_rfc3339(text: str) -> bool:
    """Whether Go 1.22's time.Time.UnmarshalJSON takes `text`: `2006-01-02T15:04:05[.frac](Z|±07:00)`.

    As imgpkg 0.43.1 (Go 1.22.5) reads a config's times, through time.Parse(time.RFC3339) when its fast path fails:
    the hour may be one digit, the fraction may follow a comma, and the zone's hours and minutes are any two digits.
    """
    shaped = len(text) >= 19 and [text[i] for i in (4, 7, 10)] == ["-", "-", "T"]  # noqa: PLR2004
    if not (shaped and text[:4].isascii() and text[:4].isdigit() and _two(text, 5, 12) and _two(text, 8, 31)):
        return False
    year, month, day = int(text[:4]), int(text[5:7]), int(text[8:10])
    if month == 0 or day == 0 or day > _days_in(year, month):
        return False
    at = 13 if text[12:13] == ":" else 14
    hour = text[11 : at - 1]
    if not (hour.isascii() and hour.isdigit() and int(hour) <= 23 and text[at - 1] == ":"):  # noqa: PLR2004
        return False
    if not (_two(text, at, 59) and text[at + 2 : at + 3] == ":" and _two(text, at + 3, 59)):
        return False
    zone = _fraction_then_zone(text[at + 5 :])
    numeric = zone is not None and len(zone) == 6 and zone[0] in "+-" and zone[3] == ":"  # noqa: PLR2004
    return zone == "Z" or (numeric and _two(zone or "", 1, 99) and _two(zone or "", 4, 99))  # Go 1.22 takes +99:99


def _leaf(value: object, kind: str) -> str | None:
    """What is wrong with a non-null `value` for a leaf of `kind`, or None."""
    if kind == "string":
        return None if isinstance(value, str) else f"is {_kind(value)}, not a string"
    if kind == "bool":
        return None if isinstance(value, bool) else f"is {_kind(value)}, not a boolean"
    if kind == "int":
        whole = isinstance(value, int) and not isinstance(value, bool) and -_INT64 <= value < _INT64
        return None if whole else f"is {_kind(value) if not isinstance(value, float) else 'a fraction'}, not an integer"
    if kind == "time":
        return None if isinstance(value, str) and is_rfc3339(value) else "is not an RFC 3339 time"
    algorithm, _, digest = value.partition(":") if isinstance(value, str) else ("", "", "")
    good = algorithm == "sha256" and len(digest) == 64 and set(digest) <= _HEX  # noqa: PLR2004
    return None if good else "is not a sha256 digest"


def _check(value: object, kind: Type, where: str, what: str = "image config") -> None:
    if value is None:
        return
    problem: str | None
    if isinstance(kind, str):
        problem = _leaf(value, kind)
    elif isinstance(kind, tuple):
        problem = _container(value, kind, where, what)
    else:
        problem = None if isinstance(value, dict) else f"is {_kind(value)}, not an object"
        if problem is None:
            assert isinstance(value, dict)  # noqa: S101 - checked just above
            for name, beneath in kind.items():
                _check(value.get(name), beneath, f"{where}.{name}" if where else name, what)
    if problem is not None:
        raise UnsupportedMediaType(f"{what}: '{where}' {problem}: Go tools (imgpkg, vendir) refuse it; refused")


def _container(value: object, kind: tuple[str, Type], where: str, what: str) -> str | None:
    shape, element = kind
    if shape == "list":
        if not isinstance(value, list):
            return f"is {_kind(value)}, not an array"
        for position, item in enumerate(value):
            _check(item, element, f"{where}[{position}]", what)
        return None
    if not isinstance(value, dict):
        return f"is {_kind(value)}, not an object"
    for key, item in value.items():
        _check(item, element, f"{where}.{key}", what)
    return None


def check_go_types(doc: object, shape: dict[str, Type], what: str) -> None:
    """Refuse a decoded JSON object whose fields of `shape` Go's encoding/json would not decode; `what` names it."""
    if doc is not None and not isinstance(doc, dict):
        raise UnsupportedMediaType(f"{what} is {_kind(doc)}, not a JSON object: Go tools refuse it; refused")
    _check(doc, shape, "", what)


def check_config_types(doc: object, raw: bytes) -> None:
    """Refuse a decoded image config (`raw`, its bytes) Go's encoding/json would not decode into v1.ConfigFile."""
    if doc is not None and not isinstance(doc, dict):
        raise UnsupportedMediaType(f"image config is {_kind(doc)}, not a JSON object: Go tools refuse it; refused")
    _check(doc, CONFIG_FILE, "")
    _check_times_unescaped(doc or {}, raw)


def _check_times_unescaped(doc: dict[str, object], raw: bytes) -> None:
    """Refuse a time written with a JSON escape (`\\u005a` for `Z`): time.Time.UnmarshalJSON reads the raw bytes.

    A valid time is printable ASCII, so unescaped it appears in the bytes exactly as decoded, quoted: fewer such
    occurrences than time fields holding that text means one was escaped.
    """
    history = doc.get("history")
    entries = [entry for entry in history if isinstance(entry, dict)] if isinstance(history, list) else []
    times = [doc.get("created"), *(entry.get("created") for entry in entries)]
    counts: dict[str, int] = {}
    for value in times:
        if isinstance(value, str):
            counts[value] = counts.get(value, 0) + 1
    for value, wanted in counts.items():
        if raw.count(f'"{value}"'.encode()) < wanted:
            raise UnsupportedMediaType(f"image config: the time {value!r} is written with a JSON escape, which "
                                       "Go's time decoding does not read: Go tools refuse it; refused")  # fmt: skip
