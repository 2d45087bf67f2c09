"""No module-level state carries one call's inputs or outcomes into the next (a server's worker serves many calls).

Every module-level binding of `cli/ocivendir` whose value is mutable — a dict, list, set or bytearray display, a
comprehension, or a call other than a known-immutable constructor — and every module-level function or method whose
results are remembered (`functools.lru_cache` or `cache`) must be listed in `STATE` below, saying what keys
it (a memo by the digest of everything it depends on; transport state by what would have made it) or why it holds
nothing of a call (filled once at import, a constant table, a lock). A new one fails this test until it is listed.
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "cli" / "ocivendir"

# calls whose result cannot change after it is made
IMMUTABLE_CALLS = frozenset({
    "frozenset", "tuple", "str", "int", "float", "bytes", "bool", "object", "range", "len", "max", "min", "sorted",
    "re.compile", "re2.compile", "struct.Struct", "logging.getLogger", "getLogger", "namedtuple", "TypeVar", "NewType",
    "os.sysconf", "os.getpid", "types.MappingProxyType", "MappingProxyType", "Path", "frozen", "Struct", "compile",
    "os.fsencode", "decimal.Decimal", "datetime.timedelta", "timedelta", "ParamSpec", "cast", "field", "logger",
    "diag.logger", "sys.intern", "os.path.join", "chr", "ord", "hash",
})  # fmt: skip

# module:name → what keys it, or why it carries nothing of one call into the next. Add a row for a new one.
STATE: dict[str, str] = {
    "cache.store:_LAYOUT_TYPES": "constant table, filled at import, never written",
    "flagscan:GLOBAL_SWITCHES": "constant table, filled at import, never written",
    "flagscan:GLOBAL_VALUES": "constant table, filled at import, never written",
    "flagscan:REGISTRY_SWITCHES": "constant table, filled at import, never written",
    "flagscan:REGISTRY_VALUES": "constant table, filled at import, never written",
    "flagscan:_BOOL_STATES": "constant table, filled at import, never written",
    "commands.pullargs:_CONVERT": "constant table, filled at import, never written",
    "commands.pullargs:_SWITCHES": "constant table, filled at import, never written",
    "commands.pullargs:_VALUES": "constant table, filled at import, never written",
    "commands.runtime:_FLAG_FIELDS": "constant table, filled at import, never written",
    "commands.vendirargs:_SWITCHES": "constant table, filled at import, never written",
    "commands.vendirargs:_VALUES": "constant table, filled at import, never written",
    "cache.memo:_BOOT": "constant: this boot's id, read once at import (it cannot change while a process lives)",
    "cache.opened:_LOCK": "a lock: holds nothing",
    "cache.opened:_closed": "index paths closed before (a connection is kept from the second close on), at most 256: paths only, no content",
    "cache.opened:_kept": "open index connections keyed by the index file's path, reused only while the file's identity (st_dev, st_ino, size, mtime, directory owner) is the one kept with it; at most 8",
    "fs.swap:_renameat2": "libc's renameat2 looked up once (functools.cache): keyed by nothing a call gives",
    "oci.reference:parse_digest": "parsed digests keyed by the whole text (lru_cache: a pure function, frozen values, errors not kept); at most 256",
    "oci.reference:vendir_tag": "tags keyed by the whole reference text (lru_cache: a pure function, str or None answers); at most 256",
    "oci.reference:parse_reference": "parsed references keyed by the whole text (lru_cache: a pure function, frozen values, errors not kept; a text with credentials is refused, never kept); at most 256",
    "vendir.globs:_alternatives": "a glob's brace alternatives keyed by the pattern (lru_cache: a pure function, tuples); at most 256",
    "vendir.globs:_segment": "compiled glob segments keyed by the segment's pattern (lru_cache: a pure function, compiled expressions); at most 1024",
    "cache.verified:_blobs": "verified bytes of small blobs (manifests, configs) keyed by the blob file's path, given again only while the regular file there has the identity (st_dev, st_ino, size, mtime, ctime) of the one read, and only to a caller that checked possession and grants first (as the read from disk is); at most 64 KiB each, 64 blobs",
    "fs.replay:_LOCK": "a lock: holds nothing",
    "fs.replay:_layers": "small layers' tar members keyed by the layer's digest, replayed only while the verified blob file's identity is the one kept, and only for a layer of a manifest this call was served (as the blob on disk would be); at most 1 MiB each, 16 MiB in all",
    "kept:_LOCK": "a lock: holds nothing (it guards the memos handed to kept.recall and kept.remember)",
    "oci.parsed:_manifests": "parsed manifests keyed by sha256 of their bytes and the media type served (frozen, read-only mappings: handed out as they are); only those of at most 64 KiB, LRU of 32",
    "oci.parsed:_configs": "parsed image configs keyed by sha256 of their bytes (frozen, labels read-only); only those of at most 64 KiB, LRU of 32",
    "oci.lockmemo:_parsed": "parsed images.yml keyed by sha256 of its bytes (copies handed out); LRU of 16",
    "oci.lockmemo:_rewritten": "rewritten images.yml bytes keyed by sha256 of the repository and every entry; LRU of 16",
    "registry.authmemo:_KEY": "the credential fingerprints' HMAC key: random per process, never written anywhere",
    "registry.authmemo:_LOCK": "a lock: holds nothing",
    "registry.authmemo:_challenges": "the auth challenge a host answered, keyed by (host, HMAC fingerprint of the credential): another credential never matches; LRU of 64",
    "registry.authmemo:_tokens": "bearer tokens keyed by (host, realm, service, scope, HMAC fingerprint of the credential), until their expires_in (default 60 s); a refused one is forgotten; LRU of 64",
    "registry.ggcrtext:_STATUS_TEXT": "constant table, filled at import, never written",
    "server.schedule:io_priority": "libc's syscall() looked up once for ioprio_get(2) and ioprio_set(2) (functools.cache): keyed by nothing a call gives",
    "server.schedule:_NR_IOPRIO": "constant: ioprio_get's and ioprio_set's syscall numbers by architecture",
    "server.identity:_OWN": "the server's own credentials and limits, read once before its first fork: what every caller is compared with",
    "server.identity:_NO_LABELS": "whether no security module answers attr/current, read once before the first fork: the kernel's, the same for every process",
    "server.identity:_SERVER_LOCALE": "the server's own locale encodings, read once at import before any call adopts an environment",
    "server.identity:_SO_PEERPIDFD": "constant: the platform's socket option number",
    "server.identity:_SO_PEERGROUPS": "constant: the platform's socket option number",
    "vendir.memos:_locks": "rendered lock bytes keyed by sha256 of the lock's fields as typed JSON; LRU of 16",
    "vendir.memos:_streams": "parsed vendir.yml inputs keyed by sha256 of the inputs' names, bytes and type (copies handed out; failures not kept); LRU of 16",
    "engine.sources:FRAME_TYPES": "constant table, filled at import, never written",
    "engine.sources:SOURCES": "constant table, filled at import, never written",
    "engine.sync:SUPPORTED": "constant table, filled at import, never written",
    "engine.sync:_LOCK_REF_KEYS": "constant table, filled at import, never written",
    "fs.dropbehind:_ADVISE": "constant: the platform's fadvise flag, read once at import",
    "fs.dropbehind:_O_DIRECT": "constant: the platform's O_DIRECT flag, read once at import",
    "gofold:_ONTO_ASCII": "constant translation table (str.maketrans)",
    "server.log:_CONTROLS": "constant translation table (control characters to spaces), filled at import, never written",
    "gobase64:_BASE64": "constant table, filled at import, never written",
    "goyaml.scalars:_BASE_DIGITS": "constant table, filled at import, never written",
    "goyaml.scalars:_BOOLS": "constant table, filled at import, never written",
    "goyaml.scalars:_INF": "constant float",
    "goyaml.text:_LINE_CONTROLS": "constant table, filled at import, never written",
    "goyaml.text:_MIN_VALUE": "constant table, filled at import, never written",
    "goyaml.text:_compiled": "a fixed expression compiled once on first use: keyed by nothing a call gives",
    "goyaml.values:_RESOLVED": "constant table, filled at import, never written",
    "goyaml.writer:_ESCAPES": "constant table, filled at import, never written",
    "oci.gokeys:CONFIG_FILE": "constant table, filled at import, never written",
    "oci.gokeys:DESCRIPTOR": "constant table, filled at import, never written",
    "oci.gokeys:MANIFEST_OR_INDEX": "constant table, filled at import, never written",
    "oci.gokeys:PLATFORM": "constant table, filled at import, never written",
    "oci.gokeys:_FOLDED": "constant table, filled at import, never written",
    "oci.gokeys:_RUN_CONFIG": "constant table, filled at import, never written",
    "oci.gokeys:TAG_LIST": "constant table, filled at import, never written",
    "registry.auth:_CONFIG_FILE": "constant table, filled at import, never written",
    "registry.auth:_AUTH_CONFIG": "constant table, filled at import, never written",
    "registry.auth:_CONFIG_TYPES": "constant table, filled at import, never written",
    "sign.fulcio:_EPOCH": "a datetime: immutable",
    "sign.fulcio:_MILLISECOND": "a timedelta: immutable",
    "oci.configtypes:CONFIG_FILE": "constant table, filled at import, never written",
    "oci.configtypes:_HISTORY": "constant table, filled at import, never written",
    "oci.configtypes:_RUN_CONFIG": "constant table, filled at import, never written",
    "oci.manifest:_JSON_TYPES": "constant table, filled at import, never written",
    "oci.manifest:_LAYER_TYPES": "constant table, filled at import, never written",
    "registry.credentials:ANONYMOUS": "the empty credential (a frozen value)",
    "registry.credentials:_HOST_FIELDS": "constant table, filled at import, never written",
    "registry.credentials:_SECRET_HOST_VARIABLES": "constant table, filled at import, never written",
    "registry.credentials:_SECRET_VARIABLES": "constant table, filled at import, never written",
    "registry.pools:EXCHANGE": "per request: thread-local, and every request sets all of it (begin) before reading it",
    "registry.pools:_POOLS": "constant: scheme → pool class",
    "registry.registriesyaml:_BOOLS": "constant table, filled at import, never written",
    "registry.rewrite:_COMPILED": "a fixed expression compiled once on first use: keyed by nothing a call gives",
    "registry.tlscontexts:_KEPT": "TLS contexts keyed by what a call asks of TLS (verification, SSL_CERT_FILE, SSL_CERT_DIR, named CA, certificate and key files), each used again only while every file its making consulted keeps its settled identity; LRU of 8",
    "registry.tlscontexts:_LOCK": "a lock: holds nothing",
    "registry.keptpools:_LOCK": "a lock: holds nothing",
    "registry.keptpools:_serving": "whether this process is a server worker: set once at its birth, the same for every call",
    "registry.keptpools:_kept": "idle registry connections keyed by the trust a call asks of TLS (its TLS context key: verify, SSL_CERT_FILE, SSL_CERT_DIR, named CA files, registries.yaml TLS files) and the pool size, each pool by origin and proxy URL, an https one reused only with the very TLS context the call's own agent gets (keyed by its inputs and file identities); at most 4 profiles, 2 per origin, 16 in all, 90 s idle",
    "registry.tlsprobe:_SUITES": "constant table, filled at import, never written",
    "registry.transport:_ERRNO_TEXT": "constant table, filled at import, never written",
    "registry.truststore:_ERRNO_GO": "constant table, filled at import, never written",
    "registry.watchdog:WATCHDOG": "alarms keyed by the socket they guard, cancelled with it; its thread is resident (server/leaks.py RESIDENT_THREADS), a socket left open retires the worker",
    "server.world:CALL_SIGNALS": "constant table, filled at import, never written",
    "server.world:_IDLE_SIGNALS": "constant table, filled at import, never written",
    "server.world:_CALL_ONLY": "constant table (where the call's and the idle tables differ), filled at import, never written",
    "server.world:_IDLE_ONLY": "constant table (where the call's and the idle tables differ), filled at import, never written",
    "settings:_loaded": "Settings keyed by the flags, every environment variable, the working directory and the umask (all they are made of; only of os.environ with an absolute HOME); frozen values; at most 8",
    "settings:_DURATION_UNITS": "constant table, filled at import, never written",
    "settings:_POWERS": "constant table, filled at import, never written",
    "sign.glob:_ALIASES": "constant table, filled at import, never written",
    "sign.policy:_FORMATS": "constant table, filled at import, never written",
    "sign.policy:_KNOWN": "constant table, filled at import, never written",
    "sign.policy:_UNSUPPORTED": "constant table, filled at import, never written",
    "sign.trustroot:_EPOCH": "constant datetime",
    "sign.trustroot:_NEVER": "constant datetime",
    "vendir.config:_CONTENT_FIELDS": "constant table, filled at import, never written",
    "vendir.config:_OCI_COMMON": "constant table, filled at import, never written",
    "vendir.config:_SCHEMAS": "constant table, filled at import, never written",
    "vendir.config:_SECRET_REF": "constant table, filled at import, never written",
    "vendir.config:_SELECTION": "constant table, filled at import, never written",
    "vendir.config:_UNMARSHALING": "constant table, filled at import, never written",
}  # fmt: skip


def _name(node: ast.expr) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return f"{_name(node.value)}.{node.attr}"
    return "?"


def _mutable(value: ast.expr | None) -> bool:
    if value is None:
        return False
    if isinstance(value, (ast.Dict, ast.List, ast.Set, ast.ListComp, ast.DictComp, ast.SetComp)):
        return True
    if isinstance(value, ast.Call):
        return _name(value.func) not in IMMUTABLE_CALLS
    return False


_MEMO_DECORATORS = frozenset({"lru_cache", "cache", "functools.lru_cache", "functools.cache"})


def _memoised(node: ast.stmt) -> list[ast.FunctionDef | ast.AsyncFunctionDef]:
    """The functions defined by `node` (a module-level def, or a class's methods) whose results are remembered."""
    defs = [node] if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) else []
    if isinstance(node, ast.ClassDef):
        defs = [item for item in node.body if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef))]
    return [
        function
        for function in defs
        if any(_name(d.func if isinstance(d, ast.Call) else d) in _MEMO_DECORATORS for d in function.decorator_list)
    ]


def module_state() -> dict[str, int]:
    """Every module-level mutable binding and memoised function, `module:name` → its line."""
    found: dict[str, int] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        module = ".".join(path.relative_to(PACKAGE).with_suffix("").parts).removesuffix(".__init__")
        for node in ast.parse(path.read_text()).body:
            for function in _memoised(node):
                found[f"{module}:{function.name}"] = function.lineno
            targets: list[ast.expr] = []
            if isinstance(node, ast.Assign) and _mutable(node.value):
                targets = node.targets
            elif isinstance(node, ast.AnnAssign) and _mutable(node.value):
                targets = [node.target]
            for target in targets:
                for name in ast.walk(target):
                    if isinstance(name, ast.Name) and name.id != "__all__":
                        found[f"{module}:{name.id}"] = node.lineno
    return found


def test_every_module_level_mutable_object_says_what_keys_it() -> None:
    found = module_state()
    unlisted = {key: line for key, line in found.items() if key not in STATE}
    assert not unlisted, (
        "module-level mutable state not in tests/unit/test_module_state.py's STATE table: "
        + ", ".join(f"{key} (line {line})" for key, line in sorted(unlisted.items()))
        + ". A worker serves many calls: add a row saying what keys it (a memo by the digest of everything it depends"
        " on; transport state by what would have made it) or why it holds nothing of a call, or make it per call."
    )


def test_the_table_lists_nothing_that_is_gone() -> None:
    stale = sorted(set(STATE) - set(module_state()))
    assert not stale, f"rows in STATE for state that no longer exists: {', '.join(stale)} (remove them)"


def test_the_audit_sees_a_planted_memo() -> None:
    """The rule catches a dict, a list comprehension and an object made by a call at module level, not a tuple."""
    source = "A = {}\nB: list[int] = [i for i in range(3)]\nC = Cache()\nD = (1, 2)\nE = re.compile('x')\n"
    flagged = []
    for node in ast.parse(source).body:
        assert isinstance(node, (ast.Assign, ast.AnnAssign))
        target = node.targets[0] if isinstance(node, ast.Assign) else node.target
        if _mutable(node.value) and isinstance(target, ast.Name):
            flagged.append(target.id)
    assert flagged == ["A", "B", "C"]


def test_the_audit_sees_a_memoised_function() -> None:
    """A module-level function or a method remembered by lru_cache or cache is state too; a plain one is not."""
    source = (
        "@lru_cache(maxsize=8)\ndef a(x): ...\n@functools.cache\ndef b(x): ...\ndef c(x): ...\n"
        "class D:\n    @functools.lru_cache\n    def e(self): ...\n    def f(self): ...\n"
    )
    flagged = [function.name for node in ast.parse(source).body for function in _memoised(node)]
    assert flagged == ["a", "b", "e"]
