"""Owns: the variables that act when a program starts, not when a call runs — and the environment a server starts with.

A call's environment travels on the wire and becomes the worker's, but some variables are read only while an
interpreter, the dynamic loader, libc or OpenSSL start up: `PYTHONPATH` (its `sitecustomize` runs), `PYTHONHOME`,
`PYTHONUTF8`, `PYTHONIOENCODING`, `LD_PRELOAD`, `LD_LIBRARY_PATH`, `GLIBC_TUNABLES`, `MALLOC_*`, `OPENSSL_CONF`,
`GCONV_PATH`, `LOCPATH`, the resolver's `RES_OPTIONS`/`LOCALDOMAIN`/`HOSTALIASES`. A server never starts with them
(`server_environment` keeps only what places and configures it, and the locale), and a call that sets one runs
in-process, where it applies as it does for any program (`startup_variable`): a server never runs what one caller
planted, and no call sees another program's start-up. Two change no byte a call writes and are served:
`PYTHONDONTWRITEBYTECODE` and `PYTHONUNBUFFERED` (when output appears, not what; both are common in images). An
empty value counts as unset, as Python and glibc read it.

The locale decides the interpreter's encodings at start-up (filesystem, argv, stdio), so the server keeps the
starter's `LC_ALL`, `LC_CTYPE` and `LANG`, and a call is served only in the locale the server started in
(`locale_key`); the worker checks that (`server/identity.py`). The native client (`client/`) applies the same lists.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping

__all__ = ["HARMLESS", "KEPT", "STARTUP_NAMES", "STARTUP_PREFIXES", "TEST_HOOKS", "locale_key", "server_environment",
           "startup_variable"]  # fmt: skip

STARTUP_PREFIXES = ("PYTHON", "LD_", "MALLOC_", "OPENSSL_")
STARTUP_NAMES = frozenset({"GLIBC_TUNABLES", "GCONV_PATH", "LOCPATH", "NLSPATH", "HOSTALIASES", "RES_OPTIONS",
                           "LOCALDOMAIN"})  # fmt: skip
HARMLESS = frozenset({"PYTHONDONTWRITEBYTECODE", "PYTHONUNBUFFERED"})
KEPT = ("PATH", "HOME", "TMPDIR", "XDG_RUNTIME_DIR", "LC_ALL", "LC_CTYPE", "LANG")
_C_LOCALES = frozenset({"C", "POSIX", "C.UTF-8", "C.utf8", "UTF-8"})  # the C locale and Python's coercion targets
_KEPT_PREFIX = "OCIVENDIR_SERVER_"  # the server's place and settings (OCIVENDIR_SERVER_DIR, _IDLE, _WORKERS, …)
# `1` in the environment of a server started by hand (`server start`): its workers honour the suite's leak hook
# (`server/worker.py`). A server a call starts never has it, so no caller can switch the hook on.
TEST_HOOKS = "OCIVENDIR_SERVER_TEST_HOOKS"


def startup_variable(environ: Mapping[str, str]) -> str | None:
    """The first variable set in `environ` that acts at a program's start-up (a harmless one aside), or None."""
    for name, value in environ.items():
        if value and (name in STARTUP_NAMES or name.startswith(STARTUP_PREFIXES)) and name not in HARMLESS:
            return name
    return None


def server_environment(environ: Mapping[str, str], *, by_hand: bool) -> dict[str, str]:
    """What of `environ` a server starts with: its place, its settings, PATH, HOME and the locale; nothing else.

    A server a call starts (not `by_hand`: said each time) never takes the suite's hook switch (TEST_HOOKS) from it.
    """
    return {
        name: value
        for name, value in environ.items()
        if (name in KEPT or name.startswith(_KEPT_PREFIX)) and (by_hand or name != TEST_HOOKS)
    }


def locale_key(environ: Mapping[str, str]) -> str:
    """The locale an interpreter started with `environ` takes its encodings from (LC_CTYPE as glibc resolves it).

    `LC_ALL` is kept apart: when set, Python neither coerces a C locale nor lets LC_CTYPE or LANG matter. Without
    it, a C or POSIX locale is one with C.UTF-8 (Python coerces it so, setting LC_CTYPE, or takes UTF-8 mode).
    """
    if environ.get("LC_ALL"):
        return f"LC_ALL={environ['LC_ALL']}"
    ctype = environ.get("LC_CTYPE") or environ.get("LANG") or "C"
    return f"LC_CTYPE={'C.UTF-8' if ctype in _C_LOCALES else ctype}"
