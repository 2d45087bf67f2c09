"""Owns: the cold-pull scenario: a large single-layer bundle and a bundle of many small files.

Pulled by ocivendir (fetch, verify, extract), `skopeo copy` (fetch and verify into a dir: layout, no extraction) and
`imgpkg pull` when IMGPKG_BIN is set; wall, CPU, peak RSS and the registry's traffic per pull, the tools taking turns
repetition by repetition. ocivendir runs twice:
in-process (a terminal's `ocivendir pull`) and through a resident server started beforehand (`OCIVENDIR_SERVER=on`:
the client's CPU plus the server's and its worker's; the peak RSS is the client's). Then a resumed pull:
the largest single-layer bundle through a proxy that resets the connection half-way through the layer, once; the
registry's log and the proxy's count say how much of the layer was sent again.

The same bundle is also synced cold, as a `vendir.yml` with one `imgpkgBundle` content: by ocivendir, in-process and
through the server, and by vendir when VENDIR_BIN is set (`sync -f vendir.yml --lock-file /dev/null`, in the work
directory), taking turns with the pulls; when dist/ is built, also as kapp-controller's sidecar runs it: the native
client named `vendir`, through a server of the dist build, the cache named by VENDIR_CACHE_DIR.
"""

from __future__ import annotations

import contextlib
import os
import shutil
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.support.cutter import CuttingProxy
from tests.support.registry import Registry

from bench import seed
from bench.accesslog import AccessLog, Traffic, counting
from bench.measure import Run, interleaved, run
from bench.serverstat import PrivateGrowth, server_cpu_s, stop_servers
from bench.tools import Tools, clean_env, named

SERVER_TOOL = "ocivendir (server)"
SYNC_TOOL = "ocivendir sync"
SYNC_SERVER_TOOL = "ocivendir sync (server)"
SIDECAR_SYNC_TOOL = "ocivendir sync (dist build, native client + server)"  # kapp-controller's sidecar, cold
NATIVE_PULL_TOOL = "ocivendir pull (dist build, native client + server)"  # the dist's client linked as `imgpkg`
_SYNC = ["sync", "-f", "vendir.yml", "--lock-file", "/dev/null"]


@dataclass(frozen=True)
class Case:
    """One artifact to pull: a single-layer bundle of `size_mib`, or a bundle of `files` small files."""

    name: str
    size_mib: int = 0
    files: int = 0

    @property
    def key(self) -> str:
        """How `--pull-cases` names it: `100MiB`, `1024MiB`, `2000files`."""
        return f"{self.files}files" if self.files else f"{self.size_mib}MiB"


def cases(smoke: bool, only: Sequence[str] = ()) -> list[Case]:
    """The artifacts of a full run (100 MiB, 1 GiB, 2,000 files) or a smoke run (small ones of each kind).

    `only`: the keys of the cases to run (all when empty); a key that names none is a SystemExit listing them.
    """
    if smoke:
        every = [Case("2 MiB single-layer bundle", size_mib=2), Case("8 MiB single-layer bundle", size_mib=8),
                 Case("100-file bundle", files=100)]  # fmt: skip
    else:
        every = [Case("100 MiB single-layer bundle", size_mib=100), Case("1 GiB single-layer bundle", size_mib=1024),
                 Case("2,000-file bundle", files=2000)]  # fmt: skip
    if unknown := set(only) - {case.key for case in every}:
        raise SystemExit(f"bench: --pull-cases: no case {', '.join(sorted(unknown))} "
                         f"(this mode's: {', '.join(case.key for case in every)})")  # fmt: skip
    return [case for case in every if not only or case.key in only]


def _commands(tools: Tools, ref: str, out: Path, cache: Path) -> dict[str, list[str]]:
    commands = {"ocivendir": [str(tools.ocivendir), "pull", "-b", ref, "-o", str(out), "--cache-dir", str(cache), "-q"]}
    if tools.skopeo:
        commands["skopeo"] = [str(tools.skopeo), "copy", "--quiet", "--src-tls-verify=false", f"docker://{ref}",
                              f"dir:{out}"]  # fmt: skip
    if tools.imgpkg:
        commands["imgpkg"] = [str(tools.imgpkg), "pull", "-b", ref, "-o", str(out)]
    return commands


def _sync_commands(tools: Tools, ref: str, work: Path, cache: Path) -> dict[str, list[str]]:
    """Cold syncs of `ref` into `work/out/bundle`: the config is written to `work/vendir.yml`; run them in `work`."""
    (work / "vendir.yml").write_text(
        "apiVersion: vendir.k14s.io/v1alpha1\nkind: Config\ndirectories:\n- path: out\n  contents:\n"
        f"  - path: bundle\n    imgpkgBundle:\n      image: {ref}\n"
    )
    commands = {SYNC_TOOL: [str(tools.ocivendir), "--cache-dir", str(cache), *_SYNC]}
    if tools.vendir:
        commands["vendir sync"] = [str(tools.vendir), *_SYNC]
    return commands


_Measured = tuple[Callable[[], Run], Callable[[], None], list[Traffic]]  # one pull, what to do before it, its traffic
_Parts = dict[str, int]  # private KiB a call added, by kind (`PrivateGrowth.parts_kib`)


def _cold(registry: Registry, argv: list[str], work: Path, server: Path | None = None, *, cwd: Path | None = None,
          env_extra: dict[str, str] | None = None, memory: list[_Parts] | None = None) -> _Measured:  # fmt: skip
    """One tool's cold pull (or sync, run in `cwd`), ready to repeat: output and cache removed before every repetition.

    With `server`, ocivendir hands the call to the resident server living there; each repetition's CPU adds what the
    server and its worker used to the client's, and with `memory` too, the private memory the call added to the
    server's processes by kind (`PrivateGrowth.parts_kib`, sampled: not for timed repetitions).
    """
    traffic: list[Traffic] = []
    extra = {"OCIVENDIR_SERVER": "on", "OCIVENDIR_SERVER_DIR": str(server)} if server else {"OCIVENDIR_SERVER": "off"}
    ours = argv[0].endswith("ocivendir") or server is not None
    env = clean_env(work / "home", **extra, **(env_extra or {})) if ours else clean_env(work / "home")

    def one() -> Run:
        served = server_cpu_s(server) if server else 0.0
        if server is not None and memory is not None:
            with PrivateGrowth(server) as growth:
                done = run(argv, env=env, cwd=cwd)
            memory.append(growth.parts_kib)
        else:
            done = run(argv, env=env, cwd=cwd)
        if server is None:
            return done
        return Run(done.code, done.wall_s, done.cpu_s + server_cpu_s(server) - served, done.rss_kib, done.stdout,
                   done.stderr)  # fmt: skip

    return counting(AccessLog(registry), one, traffic), lambda: _empty(work), traffic


def _empty(work: Path) -> None:
    """No output, cache or home left from the last repetition, and its writes on disk: no tool pays for another's."""
    for name in ("out", "cache", "home"):
        shutil.rmtree(work / name, ignore_errors=True)
    (work / "home").mkdir(parents=True)
    os.sync()  # the kernel writes a GiB back long after a pull ends, on the cores the next pull is measured on


def scenario(registry: Registry, tools: Tools, work: Path, reps: int, smoke: bool,
             only: Sequence[str] = ()) -> dict[str, Any]:  # fmt: skip
    """Every case (those `only` names, if any), every tool, their repetitions taking turns; each tool's figures.

    The tools' ratios of median wall against ocivendir's are the report's (`bench/report.py`).
    """
    results: list[dict[str, Any]] = []
    largest: tuple[Case, str] | None = None
    for number, case in enumerate(cases(smoke, only)):
        ref = _push(registry, case, number, work)
        commands = _commands(tools, ref, work / "out", work / "cache")
        with contextlib.ExitStack() as servers:
            server = servers.enter_context(_server(tools.ocivendir, work / "server", work))
            pulls = {name: _cold(registry, argv, work) for name, argv in commands.items()}
            syncs = _sync_commands(tools, ref, work, work / "cache")
            pulls |= {name: _cold(registry, argv, work, cwd=work) for name, argv in syncs.items()}
            served: dict[str, tuple[Path, list[str], dict[str, Any]]] = {
                SERVER_TOOL: (tools.ocivendir, commands["ocivendir"], {}),
                SYNC_SERVER_TOOL: (tools.ocivendir, syncs[SYNC_TOOL], {"cwd": work}),
            }
            servers_of = {tools.ocivendir: server}
            if tools.dist and (native := tools.dist.parent / "vendir").exists():
                servers_of[tools.dist] = servers.enter_context(_server(tools.dist, work / "server-dist", work))
                as_imgpkg = [str(named(native, work / "bin", "imgpkg")), "pull", "-b", ref, "-o", str(work / "out")]
                served[SIDECAR_SYNC_TOOL] = (
                    tools.dist,
                    [str(native), *_SYNC],
                    {"cwd": work, "env_extra": {"VENDIR_CACHE_DIR": str(work / "cache")}},
                )
                served[NATIVE_PULL_TOOL] = (tools.dist, as_imgpkg,
                                            {"env_extra": {"OCIVENDIR_CACHE_DIR": str(work / "cache")}})  # fmt: skip
            pulls |= {name: _cold(registry, argv, work, servers_of[program], **kw)
                      for name, (program, argv, kw) in served.items()}  # fmt: skip
            measured = interleaved({name: (once, before) for name, (once, before, _) in pulls.items()}, reps)
            memory = _memory(registry, work, served, servers_of)
        _empty(work)
        results.append({"name": case.name, "ref": ref, "tools": {
            name: {**measured[name].as_dict(), "requests": traffic[-1].requests, "bytes": traffic[-1].bytes,
                   **({"private_growth_kib": memory[name]} if name in memory else {})}
            for name, (_, _, traffic) in pulls.items()}})  # fmt: skip
        if case.size_mib and (largest is None or case.size_mib > largest[0].size_mib):
            largest = (case, ref)
    skipped = {name: why for name, why in tools.skipped.items() if name in {"skopeo", "imgpkg"}}
    resumed = _resumed(registry, tools, work, *largest) if largest is not None else None
    return {"cases": results, "skipped": skipped, "resume": resumed,
            "notes": "skopeo copy to a dir: layout fetches and verifies but does not extract; ocivendir and imgpkg "
                     "extract the bundle into a directory. The tools take turns, repetition by repetition, so drift "
                     "in the machine weighs on each alike, and each starts with the last one's writes on disk. "
                     "ocivendir (server): the same pull handed to a resident "
                     "server started beforehand; CPU is the client's plus the server's and its worker's, peak RSS the "
                     "client's. ocivendir sync and vendir sync: the same bundle as the one imgpkgBundle content of a "
                     "vendir.yml, synced into out/bundle with --lock-file /dev/null (ocivendir sync (server): through "
                     "the same server; dist build, native client + server: as kapp-controller's sidecar runs "
                     "it). ocivendir pull (dist build, native client + server): the pull through the dist's native "
                     "client linked as imgpkg, handed to that server (ocivendir (server) starts the venv's Python "
                     "client, ~20 ms of it). Private memory: what one served call added to the server's processes at "
                     "its peak, sampled in a pass after the timed ones: a fresh worker's first call, then a reused "
                     "worker's; split below each table by where it lies (direct-write buffers, pages copied on write "
                     "from the server, new heap and anonymous memory)"}  # fmt: skip


def _memory(registry: Registry, work: Path, served: dict[str, tuple[Path, list[str], dict[str, Any]]],
            servers_of: dict[Path, Path]) -> dict[str, dict[str, Any]]:  # fmt: skip
    """Each served tool's private-memory growth (`PrivateGrowth`): a fresh worker's first call, then a reused one's.

    The tool's server is restarted first, so the first call is a fresh worker's (its copy-on-write of the
    interpreter's pages and its threads' first allocations included); the second is served by a worker that has
    served before, as nearly every call is.
    """
    found: dict[str, dict[str, Any]] = {}
    for name, (program, argv, kw) in served.items():
        directory = servers_of[program]
        stop_servers(directory)
        _start(program, directory, work)
        growth: list[_Parts] = []
        once, before, _ = _cold(registry, argv, work, directory, memory=growth, **kw)
        for _ in range(2):
            before()
            if (done := once()).code != 0:
                raise RuntimeError(f"{name} failed with exit code {done.code}: {done.stderr[-2000:]}")
        found[name] = {"fresh_worker": sum(growth[0].values()), "reused_worker": sum(growth[1].values()),
                       "fresh_worker_parts": growth[0], "reused_worker_parts": growth[1]}  # fmt: skip
    return found


@contextlib.contextmanager
def _server(program: Path, server: Path, work: Path) -> Iterator[Path]:
    """A resident server of `program` in socket directory `server` for one case's served calls, stopped after them."""
    _start(program, server, work)
    try:
        yield server
    finally:
        stop_servers(server)


def _start(program: Path, server: Path, work: Path) -> None:
    """Start a server of `program` in a new socket directory `server` (`server start`: back once it listens)."""
    shutil.rmtree(server, ignore_errors=True)
    server.mkdir(mode=0o700, parents=True)
    (work / "home").mkdir(parents=True, exist_ok=True)
    env = clean_env(work / "home", OCIVENDIR_SERVER="on", OCIVENDIR_SERVER_DIR=str(server))
    started = run([str(program), "server", "start"], env=env)
    if started.code != 0:
        raise RuntimeError(f"ocivendir server start failed: {started.stderr[-2000:]}")


def _push(registry: Registry, case: Case, number: int, work: Path) -> str:
    if case.files:
        return seed.many_files_bundle(registry, f"pull/files{number}", case.files)
    work.mkdir(parents=True, exist_ok=True)
    return seed.big_bundle(registry, f"pull/big{number}", case.size_mib << 20, work)


def _resumed(registry: Registry, tools: Tools, work: Path, case: Case, ref: str) -> dict[str, Any]:
    """One cold ocivendir pull of `ref` through a proxy that resets the connection half-way through the layer.

    The registry's log gives each layer GET's bytes (the first one cut off, the resumed one with `Range`); the result
    says what fraction of the layer was sent twice, and checks the pulled file's size.
    """
    _empty(work)
    layer_bytes = case.size_mib << 20
    log = AccessLog(registry)
    mark = log.mark()
    with CuttingProxy(registry.host, cut_at=layer_bytes // 2) as proxy:
        argv = [str(tools.ocivendir), "pull", "-b", ref.replace(registry.host, proxy.host, 1), "-o", str(work / "out"),
                "--cache-dir", str(work / "cache"), "-q"]  # fmt: skip
        done = run(argv, env=clean_env(work / "home"))
        through_proxy = proxy.total
    if done.code != 0:
        raise RuntimeError(f"the resumed pull failed with exit code {done.code}: {done.stderr[-2000:]}")
    pulled = (work / "out" / "data.bin").stat().st_size
    if pulled != layer_bytes:
        raise RuntimeError(f"the resumed pull wrote {pulled} bytes of data.bin, not {layer_bytes}")
    traffic = log.since(mark)
    blob_gets: dict[str, list[int]] = {}
    for method, path, size in log.settled()[mark:]:
        if method == "GET" and "/blobs/" in path:
            blob_gets.setdefault(path, []).append(size)
    layer_gets = max(blob_gets.values(), key=len)  # the layer is the blob asked for more than once
    return {"name": case.name, "cut_at": layer_bytes // 2, "layer_gets": layer_gets, "registry_bytes": traffic.bytes,
            "proxy_bytes": through_proxy, "layer_bytes": layer_bytes,
            "resumed_fraction": round(layer_gets[-1] / layer_bytes, 4) if len(layer_gets) > 1 else 0.0,
            "sent_twice": round((through_proxy - layer_bytes) / layer_bytes, 4), "wall_s": round(done.wall_s, 4),
            "cpu_s": round(done.cpu_s, 4), "max_rss_kib": done.rss_kib}  # fmt: skip
