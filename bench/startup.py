"""Owns: the start-up scenario: `version`, a warm digest-pinned sync (also under `nice`) and a warm tag sync over TLS.

For ocivendir's venv console script, a pip install of its wheel (the Python client) and its dist/ build, against
`python -c pass` and the real vendir when VENDIR_BIN is set. The warm sync is kapp-controller's call of a relocated
bundle already in the per-App cache; the tag sync is the same call of an image by tag on an https registry of its own
(a throwaway CA appended to Debian's bundle, named by SSL_CERT_FILE, as kapp-controller appends its CAs): the TLS
context, the handshake and the HEAD that every production registry costs.
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from tests.support.builders import Pusher, make_image, publish_bundle, relocate
from tests.support.cutter import CuttingProxy
from tests.support.registry import Registry

from bench import anatomy
from bench.accesslog import AccessLog
from bench.fleet_apps import App
from bench.measure import SUB_SECOND_REPS, Run, Stat, repeat, run
from bench.serverstat import server_cpu_s, server_pids, stop_servers
from bench.tools import Tools, clean_env, named_vendir
from ocivendir.fs.fileid import SETTLED_NS

SYSTEM_BUNDLE = "/etc/ssl/certs/ca-certificates.crt"  # Debian's, the first file Go reads
SERVED = {"ocivendir (pip install, Python client + server)", "ocivendir (venv, Python client + server)",
          "ocivendir (dist build, native client + server)"}  # fmt: skip
# the warm sync under `nice -n 5` (a caller below the server's priority): served, the worker takes it on for the
# call (server/schedule.py); in-process is what such a call cost while workers refused it
NICED = {"ocivendir (dist build, native client + server)", "ocivendir (dist build)", "vendir"}
NICE = ("nice", "-n", "5")


def _programs(tools: Tools) -> dict[str, Path]:
    """Each program to compare, by label (ocivendir builds reached through a symlink named `vendir`).

    The Python client is a pip install of dist/'s wheel where one was built (a user's install), else this project's
    editable venv, whose build id costs more (`bench/tools.py`).
    """
    programs = {"ocivendir (venv console script)": tools.ocivendir}
    if tools.pip_client:
        programs["ocivendir (pip install, Python client + server)"] = tools.pip_client
    else:
        programs["ocivendir (venv, Python client + server)"] = tools.ocivendir
    if tools.dist:
        programs["ocivendir (dist build)"] = tools.dist
        if (tools.dist.parent / "vendir").exists():
            programs["ocivendir (dist build, native client + server)"] = tools.dist.parent / "vendir"
    if tools.vendir:
        programs["vendir"] = tools.vendir
    return programs


class _Warm:
    """One program's warm kapp-controller sync: its environment, its server (if any), its measured runs."""

    def __init__(self, label: str, program: Path, app: App, work: Path, what: str, **extra: str) -> None:
        """Prepare the program's cache, home and, through a server, a socket directory of its own."""
        self.label, self.app, self.work, self.what = label, app, work, what
        self.requests_per_call = 0
        self.connections_per_call = 0
        self.counter = itertools.count()
        home, cache = work / "home", work / "caches" / label.replace(" ", "_")
        home.mkdir(parents=True, exist_ok=True)
        self.server_dir = Path(tempfile.mkdtemp(prefix="ovb-startup-", dir="/tmp")) if label in SERVED else None
        self.env = clean_env(home, VENDIR_CACHE_DIR=str(cache), OCIVENDIR_SERVER="on" if self.server_dir else "off",
                             **extra)  # fmt: skip
        if self.server_dir:
            self.env["OCIVENDIR_SERVER_DIR"] = str(self.server_dir)
        self.argv = [str(named_vendir(program, work / "bin" / label.replace(" ", "_"))), "sync", "-f", "-",
                     "--lock-file", "/dev/null"]  # fmt: skip
        self.runs: list[Run] = []
        self.server_cpu = 0.0
        self.prefix: tuple[str, ...] = ()  # what the calls after the warm-up run under (`nice -n 5`)

    def once(self, app: App | None = None) -> Run:
        """One reconcile (of this program's App, or of `app`) in a fresh directory."""
        cwd = self.work / f"reconcile-{self.label.replace(' ', '_')}-{next(self.counter)}"
        cwd.mkdir()
        try:
            done = run([*self.prefix, *self.argv], env=self.env, cwd=cwd, stdin=(app or self.app).stdin)
        finally:
            shutil.rmtree(cwd, ignore_errors=True)
        if done.code != 0:
            raise RuntimeError(f"{self.label}: the warm sync failed: {done.stderr[-2000:]}")
        return done

    def warm_up(self) -> None:
        """Fill the cache (and the read memo); through a server, wait until the server the first call started serves."""
        self.once()
        if self.server_dir:
            deadline = time.monotonic() + 30
            while not server_pids(self.server_dir) or not any(self.server_dir.glob("server-*.sock")):
                if time.monotonic() > deadline:
                    raise RuntimeError(f"{self.label}: the server did not start")
                time.sleep(0.05)
        self.once()

    def measure(self) -> None:
        """One measured call, with the server's CPU and its worker's over it (/proc ticks; their sum is exact)."""
        before = server_cpu_s(self.server_dir) if self.server_dir else 0.0
        self.runs.append(self.once())
        if self.server_dir:
            self.server_cpu += server_cpu_s(self.server_dir) - before

    def row(self, requests: int) -> dict[str, Any]:
        """The figures: medians over the runs; through a server, its CPU per call added to the client's.

        `requests` is the registry's count over every program's measured calls (all warm: 0 is expected).
        """
        cpu = Stat.of([r.cpu_s for r in self.runs])
        wall = Stat.of([r.wall_s for r in self.runs])
        row = {"what": self.what, "tool": self.label, "wall_s": wall.as_dict(),
               "cpu_s": cpu.as_dict(), "max_rss_kib": Stat.of([float(r.rss_kib) for r in self.runs]).as_dict(0),
               "requests": requests, "requests_per_call": self.requests_per_call,
               "connections_per_call": self.connections_per_call}  # fmt: skip
        if self.server_dir:
            per_call = self.server_cpu / len(self.runs)
            row["server_cpu_s_per_call"] = round(per_call, 5)
            row["cpu_total_s"] = round(cpu.median + per_call, 5)
        return row

    def close(self) -> None:
        """Stop this program's server."""
        if self.server_dir:
            stop_servers(self.server_dir)
            shutil.rmtree(self.server_dir, ignore_errors=True)


class _Interpreter:
    """`python -c pass`, the ratios' base, measured in the warm syncs' rotation: it then has the drift they had."""

    def __init__(self, env: dict[str, str]) -> None:
        self.env = env
        self.runs: list[Run] = []

    def measure(self) -> None:
        self.runs.append(run([sys.executable, "-c", "pass"], env=self.env))

    def row(self) -> dict[str, Any]:
        return {"what": "interpreter start-up", "tool": "python -c pass",
                "wall_s": Stat.of([r.wall_s for r in self.runs]).as_dict(),
                "cpu_s": Stat.of([r.cpu_s for r in self.runs]).as_dict(),
                "max_rss_kib": Stat.of([float(r.rss_kib) for r in self.runs]).as_dict(0)}  # fmt: skip


def _warm_syncs(registry: Registry, programs: dict[str, Path], app: App, work: Path, reps: int, what: str,
                base: _Interpreter | None = None, prefix: tuple[str, ...] = (),
                **extra: str) -> list[dict[str, Any]]:  # fmt: skip
    """Every program's warm sync, interleaved call by call (machine noise hits all alike); the registry's traffic.

    With `base`, `python -c pass` takes its turn in every round as well. With `prefix`, every call after the warm-up
    runs under it (the server the warm-up started does not).

    Each program's requests per warm call are counted on one call of its own, before the interleaved ones; its TCP
    connections per warm call on a second call through a relay that counts them (the first through it may connect:
    a server's worker keeps its registry connections between calls, per origin: `registry/keptpools.py`).
    """
    warm = [_Warm(label, program, app, work, what, **extra) for label, program in programs.items()]
    try:
        log = AccessLog(registry)
        for one in warm:
            one.warm_up()
            one.prefix = prefix
            mark = log.mark()
            one.once()
            one.requests_per_call = log.since(mark).requests
            with CuttingProxy(registry.host, 0) as relay:
                relayed = dataclasses.replace(app, ref=app.ref.replace(registry.host, relay.host, 1))
                one.once(relayed)
                made = len(relay.sent)
                one.once(relayed)
                one.connections_per_call = len(relay.sent) - made
        mark = log.mark()
        for _ in range(max(reps, SUB_SECOND_REPS * 4)):  # at least 20 interleaved calls each
            for one in warm:
                one.measure()
            if base is not None:
                base.measure()
        requests = log.since(mark).requests
        return [one.row(requests) for one in warm]
    finally:
        for one in warm:
            one.close()


def _warm_tag_syncs_over_tls(programs: dict[str, Path], work: Path, reps: int) -> list[dict[str, Any]]:
    """The warm sync of an image by tag on an https registry started for it, trusted through the system bundle."""
    tls = Registry(mode="tls", workdir=work / "tls-registry").start()
    try:
        assert tls.ca_cert is not None
        Pusher(tls).image("startup/tls", make_image({"app.yml": "tls\n"}), tag="v1")
        bundle = work / "tls-bundle.pem"
        bundle.write_bytes(Path(SYSTEM_BUNDLE).read_bytes() + tls.ca_cert.read_bytes())
        # a worker keeps a TLS context (and the connections made with it) only once the files it was made from have
        # settled (`fs/fileid.py`), as a cluster's CA bundle long has: the measured calls start once this one has
        time.sleep(max(0, bundle.stat().st_ctime_ns + SETTLED_NS - time.time_ns()) / 1e9)
        app = App("startup-tls", "tag_image", f"{tls.host}/startup/tls:v1", "startup/tls")
        return _warm_syncs(tls, programs, app, work / "tls", reps, "warm tag sync over TLS",
                           SSL_CERT_FILE=str(bundle))  # fmt: skip
    finally:
        tls.stop()


def scenario(registry: Registry, tools: Tools, work: Path, reps: int) -> dict[str, Any]:
    """`version` for each program, then the warm sync for each program with `python -c pass` in its rotation."""
    pusher = Pusher(registry)
    published = publish_bundle(pusher, "startup", images=1)
    relocate(pusher, published, "startup/relocated")
    app = App("startup", "relocated", published.ref(registry, "startup/relocated"), "startup/relocated")
    env = clean_env(work / "home")
    base = _Interpreter(env)
    rows: list[dict[str, Any]] = []
    programs = _programs(tools)
    for label, program in programs.items():
        if label in SERVED:
            continue  # `version` through a server is the warm sync's floor; the warm sync is what is compared
        version = functools.partial(run, [str(program), "version"], env=env)
        rows.append({"what": "version", "tool": label, **repeat(version, reps).as_dict()})
    rows += _warm_syncs(registry, programs, app, work, reps, "warm digest-pinned sync", base)
    rows.insert(0, base.row())  # the first row is every ratio's base
    niced = {label: program for label, program in programs.items() if label in NICED}
    rows += _warm_syncs(registry, niced, app, work / "niced", reps, "warm digest-pinned sync under nice -n 5",
                        prefix=NICE)  # fmt: skip
    rows += _warm_tag_syncs_over_tls(programs, work, reps)
    env = clean_env(work / "home", VENDIR_CACHE_DIR=str(work / "caches" / "anatomy"), OCIVENDIR_SERVER="off")
    calls = anatomy.measure(app.stdin, env, work / "anatomy", max(reps, SUB_SECOND_REPS * 4))
    skipped = {name: why for name, why in tools.skipped.items() if name in {"dist build", "real vendir", "pip install"}}
    return {"rows": rows, "anatomy": calls, "skipped": skipped}
