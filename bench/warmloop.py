"""Owns: the warm loop — one reused process serving many kapp-controller calls, measured call by call and profiled.

A real registry on 127.0.0.1 gets a kapp-shaped App: a relocated bundle of twelve ~3 KiB YAML files naming two images,
fetched by digest (`vendir sync -f - --lock-file /dev/null`, stdin = kapp-controller's placeholder Secret and Config,
one cache per App). A child process then does what a reused server worker does: it preloads the server's warm set
(`server/preload.py`), serves one cold call that fills the cache, then N warm calls one after another, each with its
own argv, stdin, stdout/stderr, environment, umask and a fresh working directory put in place as the worker puts them
(`server/worker.py`'s `_adopt`), the entry point run with its exit caught (`_run`). The warm calls start once the
cold call's blobs have settled (`fs/fileid.py`), so the layer is replayed from memory (`fs/replay.py`) as in a
worker whose cache was filled more than two seconds before. CPU is the process's CPU clock
(user and system split by getrusage) around the call alone: the per-call set-up and the removal of the reconcile
directory are outside it.
Creating files dominates the system time and swings with the machine's load; `--scratch /dev/shm` puts the cache and
the reconcile directories on tmpfs, which isolates the Python side's cost.

Then M more calls run under cProfile; the report lists functions by self time and sums self time by area (SQLite,
go-yaml, tar extraction, fsync, ...). `python -m bench.warmloop --calls 60 --profile 40` (run from the worktree with
PYTHONPATH=cli:.); `--child SPEC` is the measuring child.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import os
import pstats
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from tests.support.builders import Pusher, make_image, publish_bundle, relocate
from tests.support.registry import Registry

from bench.fleet_apps import App
from bench.tools import clean_env
from ocivendir.fs.fileid import SETTLED_NS

ARGV = ["vendir", "sync", "-f", "-", "--lock-file", "/dev/null"]
# self time summed by where it is spent: a function counts for the first area whose marker its file or name holds
AREAS = (
    ("sqlite", ("sqlite3", "cache/index.py", "cache/memo.py")),
    ("go-yaml", ("goyaml/",)),
    ("pyyaml", ("/yaml/",)),
    ("tree (tar, extract, swap)", ("fs/tarread.py", "fs/extract.py", "fs/swap.py", "fs/gunzip.py", "zlib")),
    ("fsync", ("fsync",)),
    ("click and commands", ("click/", "ocivendir/commands/")),
    ("registry client", ("ocivendir/registry/", "requests/", "urllib3/")),
    ("engine", ("ocivendir/engine/",)),
    ("cache (store)", ("ocivendir/cache/",)),
    ("vendir config and lock", ("ocivendir/vendir/",)),
    ("os calls", ("<built-in method posix.", "<built-in method io.open", "<method 'close'", "<method 'read'")),
)


def _publish(registry: Registry, category: str) -> App:
    """The App: a bundle (two images, twelve YAML files), relocated or not, or an image; by digest (or by tag)."""
    pusher = Pusher(registry)
    line = "# warm: " + "x" * 60 + "\n"
    files = {f"config/warm-{n:02}.yml": f"name: warm-{n}\n" + line * (3000 // len(line)) for n in range(12)}
    if category == "image":
        return App("warm", category, pusher.image("warm/image", make_image(files), tag="v1"), "warm/image")
    published = publish_bundle(pusher, "warm", images=2, files=files)
    if category == "not_relocated":
        return App("warm", category, published.ref(registry), published.bundle_repo)
    relocate(pusher, published, "warm/relocated")
    if category == "tag_bundle":
        return App("warm", category, f"{registry.host}/warm/relocated:v1", "warm/relocated")
    return App("warm", category, published.ref(registry, "warm/relocated"), "warm/relocated")


class _Counts:
    """What warm calls should not do, counted: index transactions, SQLite connections, fsyncs."""

    def __init__(self) -> None:
        from ocivendir.cache.index import CacheIndex  # noqa: PLC0415 - preloaded

        self.writes = self.connects = self.fsyncs = 0
        write, fsync = CacheIndex._commit, os.fsync  # noqa: SLF001 - the bench counts the index's transactions

        def counted_write(index: CacheIndex, *args: Any, **kwargs: Any) -> None:  # noqa: ANN401
            self.writes += 1
            write(index, *args, **kwargs)

        def counted_fsync(fd: int) -> None:
            self.fsyncs += 1
            fsync(fd)

        CacheIndex._commit = counted_write  # type: ignore[method-assign,assignment] # noqa: SLF001
        os.fsync = counted_fsync  # type: ignore[assignment]
        sys.addaudithook(self._audit)

    def _audit(self, event: str, _args: tuple[object, ...]) -> None:
        if event == "sqlite3.connect":
            self.connects += 1

    def snapshot(self) -> tuple[int, int, int]:
        return self.writes, self.connects, self.fsyncs


def _call(work: Path, name: str, stdin: Path, env: dict[str, str]) -> tuple[int, tuple[float, float, float], float]:
    """One call as a reused worker serves it: the caller's world put in place, the entry point run.

    Returns the exit code, the call's CPU (CLOCK_PROCESS_CPUTIME_ID; then user and system from getrusage, which the
    kernel may sample at its tick) and its wall time.
    """
    from ocivendir.commands import main  # noqa: PLC0415 - preloaded
    from ocivendir.output import flush_streams, rebind_stdio  # noqa: PLC0415 - preloaded

    cwd = work / name
    cwd.mkdir()
    fds = [os.open(stdin, os.O_RDONLY), os.open(work / f"{name}.out", os.O_WRONLY | os.O_CREAT, 0o600)]
    fds.append(os.open(work / f"{name}.err", os.O_WRONLY | os.O_CREAT, 0o600))
    os.chdir(cwd)
    for target, fd in enumerate(fds):
        os.dup2(fd, target)
        os.close(fd)
    os.umask(0o022)
    os.environ.clear()
    os.environ.update(env)
    time.tzset()
    sys.argv = list(ARGV)
    rebind_stdio()
    before, cpu, wall = resource.getrusage(resource.RUSAGE_SELF), time.process_time(), time.perf_counter()
    try:
        main()
        code = 0
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    flush_streams()
    after, cpu, wall = resource.getrusage(resource.RUSAGE_SELF), time.process_time() - cpu, time.perf_counter() - wall
    return code, (cpu, after.ru_utime - before.ru_utime, after.ru_stime - before.ru_stime), wall


def _finish(work: Path, name: str, code: int) -> None:
    """Check the call succeeded and laid down the tree; remove its directory (kapp-controller's fetch directory)."""
    if code != 0 or not any((work / name / "0" / "config").iterdir()):
        err = (work / f"{name}.err").read_text(errors="replace")
        raise SystemExit(f"call {name} failed ({code}): {err[-2000:]}")
    os.chdir(work)
    shutil.rmtree(work / name)
    for suffix in (".out", ".err"):
        (work / f"{name}{suffix}").unlink()


def _areas(stats: pstats.Stats) -> dict[str, float]:
    """Self time by area (seconds), the rest as `other`."""
    sums: dict[str, float] = {}
    for (filename, _line, function), row in stats.stats.items():  # type: ignore[attr-defined]
        where = f"{filename}:{function}"
        area = next((name for name, markers in AREAS if any(m in where for m in markers)), "other")
        sums[area] = sums.get(area, 0.0) + row[2]
    return sums


def _child(spec: dict[str, Any]) -> None:
    """Preload, one cold call, N measured warm calls, M profiled calls; figures as one JSON line on the report fd."""
    work, env = Path(spec["work"]), spec["env"]
    stdin = work / "stdin.yml"
    report, control, errors = os.dup(1), os.dup(0), os.dup(2)
    from ocivendir.server.preload import preload  # noqa: PLC0415 - what the server imports before its first fork

    preload()
    counts = _Counts()
    code, cold_cpu, cold_wall = _call(work, "cold", stdin, env)
    os.dup2(errors, 2)  # a failing call's report reaches the parent
    _finish(work, "cold", code)
    cold = counts.snapshot()
    os.write(report, b"cold\n")
    os.read(control, 3)  # the parent has marked the registry's log
    time.sleep(SETTLED_NS / 1e9)  # the cold call's blobs settle first, as a worker's long have: it replays the layer
    cpus, users, systems, walls = [], [], [], []
    for number in range(spec["calls"]):
        code, (cpu, user, system), wall = _call(work, f"warm-{number}", stdin, env)
        _finish(work, f"warm-{number}", code)
        cpus.append(cpu)
        users.append(user)
        systems.append(system)
        walls.append(wall)
    warm = [after - before for after, before in zip(counts.snapshot(), cold, strict=True)]
    profile = cProfile.Profile()
    for number in range(spec["profile"]):
        profile.enable()
        code, _, _ = _call(work, f"profiled-{number}", stdin, env)
        profile.disable()
        _finish(work, f"profiled-{number}", code)
    os.dup2(errors, 2)  # the harness's own stderr again (a call's was on 2)
    text, areas = io.StringIO(), {}
    if spec["profile"]:
        if spec.get("dump"):
            profile.dump_stats(spec["dump"])
        stats = pstats.Stats(profile, stream=text)
        total = sum(row[2] for row in stats.stats.values()) or 1.0  # type: ignore[attr-defined]
        stats.sort_stats("tottime").print_stats(spec["top"])
        areas = {name: round(100 * seconds / total, 1) for name, seconds in sorted(_areas(stats).items(),
                                                                                key=lambda kv: -kv[1])}  # fmt: skip
    figures = {"cold_cpu_ms": round(cold_cpu[0] * 1000, 2), "cold_wall_ms": round(cold_wall * 1000, 2),
               "calls": len(cpus), "median_cpu_ms": round(statistics.median(cpus) * 1000, 3),
               "min_cpu_ms": round(min(cpus) * 1000, 3), "max_cpu_ms": round(max(cpus) * 1000, 3),
               "median_user_ms": round(statistics.median(users) * 1000, 3),
               "median_sys_ms": round(statistics.median(systems) * 1000, 3),
               "median_wall_ms": round(statistics.median(walls) * 1000, 3),
               "cold_index_writes_connects_fsyncs": cold,
               "warm_index_writes_connects_fsyncs_per_call": [round(n / len(cpus), 2) for n in warm],
               "profiled_calls": spec["profile"], "self_time_by_area_pct": areas,
               "profile": text.getvalue()}  # fmt: skip
    os.write(report, json.dumps(figures).encode() + b"\n")


def measure(calls: int, profile: int, top: int, category: str, dump: Path | None = None,
            scratch_dir: Path | None = None) -> dict[str, Any]:  # fmt: skip
    """Start a registry, push the App, run the measuring child; its figures."""
    with tempfile.TemporaryDirectory(prefix="ovb-warmloop-", dir=scratch_dir) as scratch:
        root = Path(scratch)
        registry = Registry("plain", root / "registry").start()
        try:
            app = _publish(registry, category)
            work = root / "work"
            work.mkdir()
            (work / "stdin.yml").write_text(app.stdin)
            env = clean_env(root / "home", VENDIR_CACHE_DIR=str(root / "cache"), OCIVENDIR_SERVER="off")
            spec = json.dumps(
                {
                    "work": str(work),
                    "env": env,
                    "calls": calls,
                    "profile": profile,
                    "top": top,
                    "dump": str(dump.resolve()) if dump else None,
                }
            )
            here = Path(__file__).resolve().parent.parent
            child_env = {**env, "PYTHONPATH": f"{here / 'cli'}:{here}"}
            with subprocess.Popen([sys.executable, "-m", "bench.warmloop", "--child", spec], env=child_env,
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                  text=True) as child:  # fmt: skip
                assert child.stdout is not None
                child.stdout.readline()  # the cold call is done: the warm calls' requests start here
                mark = registry.mark()
                out, err = child.communicate("go\n")
            if child.returncode != 0:
                raise SystemExit(f"the warm loop's child failed: {err[-3000:]}")
            figures: dict[str, Any] = json.loads(next(line for line in out.splitlines() if line.startswith("{")))
            figures["warm_requests_per_call"] = round(len(registry.since(mark)) / (calls + profile), 2)
            return figures
        finally:
            registry.stop()


def main(argv: list[str] | None = None) -> None:
    """The command line: measure and print the figures (the profile last)."""
    parser = argparse.ArgumentParser(prog="python -m bench.warmloop", description=__doc__)
    parser.add_argument("--calls", type=int, default=60, help="measured warm calls (default 60)")
    parser.add_argument("--profile", type=int, default=40, help="profiled warm calls after them (default 40)")
    parser.add_argument("--top", type=int, default=35, help="functions listed by self time (default 35)")
    parser.add_argument(
        "--app",
        choices=("relocated", "not_relocated", "image", "tag_bundle"),
        default="relocated",
        help="what the App fetches, by digest but for tag_bundle (default: a relocated bundle)",
    )
    parser.add_argument("--scratch", type=Path, help="where the cache and reconcile directories go (default: TMPDIR)")
    parser.add_argument("--dump", type=Path, help="also write the profile (pstats) to this file")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        _child(json.loads(args.child))
        return
    figures = measure(args.calls, args.profile, args.top, args.app, args.dump, args.scratch)
    profile = figures.pop("profile")
    sys.stdout.write(json.dumps(figures, indent=1) + "\n" + profile)


if __name__ == "__main__":
    main()
