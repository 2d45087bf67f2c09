"""Owns: `ocivendir server start|stop|status` — the resident server's lifecycle from the command line."""

from __future__ import annotations

import time

import click

from ocivendir.commands.options import global_options
from ocivendir.errors import OcivendirError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable

    from ocivendir.commands.runtime import Run

__all__ = ["server"]

_START_WAIT_SECONDS = 15.0
_POLL_SECONDS = 0.05


@click.group()
def server() -> None:
    """Run ocivendir as a resident server whose warm workers serve calls one after another.

    \b
    Calls reach it through the client: `OCIVENDIR_SERVER=on` (or invoked as `vendir`, where `auto`, the default,
    turns it on). The socket lives in OCIVENDIR_SERVER_DIR, else $XDG_RUNTIME_DIR/ocivendir, else
    <tmp>/ocivendir-<uid> (a 0700 directory of your own). OCIVENDIR_SERVER_IDLE ends an idle server (default 10m,
    0: never); OCIVENDIR_SERVER_WORKERS bounds the calls run at once (default 8; more run in-process);
    OCIVENDIR_SERVER_MAX_CALLS retires a worker after that many calls (default 1000; 1: a fresh worker each call).
    OCIVENDIR_SERVER_LOG names a file (an absolute path) the server appends its log to: retirements, refusals and,
    at debug level, each connection's path through it.
    """


@server.command()
@click.option("--foreground", is_flag=True, help="Serve in this process (logs on stderr) instead of a daemon.")
@global_options
@click.pass_context
def start(ctx: click.Context, foreground: bool) -> None:
    """Start this build's server (no-op when it runs already)."""
    from ocivendir.commands.runtime import Run  # noqa: PLC0415 - `--help` stays light
    from ocivendir.server.client import query  # noqa: PLC0415

    run = Run.start(ctx)
    if foreground:
        _foreground(ctx.find_root().obj["entry"])
        return
    facts = query("status")
    if facts is None:
        _start_detached()
        facts = query("status")
    if facts is None:
        raise OcivendirError("the server did not start", hint="run `ocivendir server start --foreground` to see why")
    _report(run, "server start", facts)


def _start_detached() -> None:
    """Start a daemon and wait until it listens or ends; an error known before, or the daemon's own, at once.

    The daemon's stderr is a pipe until it listens: EOF there means it listens or ended, and what it wrote says why.
    When another start is under way (its start lock is held), wait for that one to let the lock go.
    """
    import os  # noqa: PLC0415

    from ocivendir.server.build import build_id  # noqa: PLC0415
    from ocivendir.server.client import query  # noqa: PLC0415
    from ocivendir.server.place import Unusable, server_dir, socket_path  # noqa: PLC0415
    from ocivendir.server.spawn import start_server  # noqa: PLC0415

    deadline = time.monotonic() + _START_WAIT_SECONDS
    read, write = os.pipe2(os.O_CLOEXEC)
    try:
        directory, build = server_dir(), build_id()
        socket_path(directory, build)
        started = start_server(directory, build, stderr=write, by_hand=True)
    except Unusable as exc:
        os.close(read)
        raise OcivendirError(f"the server directory is unusable: {exc}") from None
    except OSError as exc:
        os.close(read)
        raise OcivendirError(f"the server cannot be started: {exc}") from None
    finally:
        os.close(write)
    said = _read_until_eof(read, deadline)
    if not started:
        _wait_until(lambda: _start_done(directory, build), deadline)
    elif said and query("status") is None:
        lines = [line.removeprefix("ocivendir: Error: ") for line in said.splitlines() if line.strip()]
        raise OcivendirError(f"the server did not start: {lines[-1]}" if lines else "the server did not start")


def _read_until_eof(fd: int, deadline: float) -> str:
    """What the daemon wrote on its stderr until EOF or the deadline (the last 64 KiB)."""
    import os  # noqa: PLC0415
    import select  # noqa: PLC0415

    data = b""
    try:
        while (left := deadline - time.monotonic()) > 0 and select.select([fd], [], [], left)[0]:
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                break
            data = (data + chunk)[-(1 << 16) :]
    finally:
        os.close(fd)
    return data.decode(errors="replace")


def _start_done(directory: str, build: str) -> bool:
    """Whether no start is under way any more (its start lock is free: the server listens or ended)."""
    import os  # noqa: PLC0415

    from ocivendir.fs.locks import LockBusy, hold_lock  # noqa: PLC0415
    from ocivendir.server.place import start_path  # noqa: PLC0415

    try:
        os.close(hold_lock(start_path(directory, build)))
    except LockBusy:
        return False
    return True


def _foreground(entry: Callable[[], object]) -> None:
    """Serve in this process; `entry` is the CLI's `main`, what every worker runs for a call.

    It is handed down from `main` itself through click's context: neither this module nor the server names the
    command package.
    """
    import logging  # noqa: PLC0415

    from ocivendir.server.spawn import restart_clean  # noqa: PLC0415

    restart_clean()  # started by hand with another environment: again, scrubbed

    from ocivendir.fs.locks import LockBusy  # noqa: PLC0415
    from ocivendir.server.daemon import run_server  # noqa: PLC0415
    from ocivendir.server.place import Unusable, server_dir  # noqa: PLC0415
    from ocivendir.server.preload import preload  # noqa: PLC0415
    from ocivendir.server.spawn import release_start  # noqa: PLC0415
    from ocivendir.settings import load_server_log, load_server_max_calls, load_server_settings  # noqa: PLC0415

    log = logging.getLogger("ocivendir.server")
    handler = logging.StreamHandler()
    handler.setFormatter(logging.Formatter("ocivendir server: %(message)s"))
    handler.setLevel(logging.INFO)
    log.addHandler(handler)
    log.setLevel(logging.INFO)
    log.propagate = False
    if (log_path := load_server_log()) is not None:
        from ocivendir.server.log import AppendHandler  # noqa: PLC0415 - only with a log

        log.addHandler(AppendHandler(log_path))
        log.setLevel(logging.DEBUG)
    idle, workers = load_server_settings()
    max_calls = load_server_max_calls()
    try:
        directory = server_dir()
        run_server(directory, idle=idle, workers=workers, max_calls=max_calls, preload=preload, entry=entry,
                   ready=lambda build: release_start(directory, build))  # fmt: skip
    except LockBusy:
        log.info("a server of this build runs already")
    except Unusable as exc:
        raise OcivendirError(f"the server directory is unusable: {exc}") from None
    except FileNotFoundError as exc:
        raise OcivendirError(f"the server directory cannot be made: {exc}") from None


@server.command()
@global_options
@click.pass_context
def stop(ctx: click.Context) -> None:
    """Stop this build's server: it takes no new call and ends when the running ones have."""
    from ocivendir.commands.runtime import Run  # noqa: PLC0415
    from ocivendir.server.client import query  # noqa: PLC0415

    run = Run.start(ctx)
    facts = query("stop")
    if facts is None:
        _report(run, "server stop", None)
        return
    _wait_until(lambda: query("status") is None, time.monotonic() + _START_WAIT_SECONDS)
    _report(run, "server stop", facts)


@server.command()
@global_options
@click.pass_context
def status(ctx: click.Context) -> None:
    """Whether this build's server runs: pid, socket, build, uptime, calls served (exit 0 running, 1 not)."""
    from ocivendir.commands.runtime import Run  # noqa: PLC0415
    from ocivendir.server.client import query  # noqa: PLC0415

    run = Run.start(ctx)
    facts = query("status")
    _report(run, "server status", facts)
    if facts is None:
        ctx.exit(1)


def _wait_until(done: Callable[[], bool], deadline: float) -> None:
    """Poll `done` until it is true or the deadline has passed."""
    while not done() and time.monotonic() < deadline:
        time.sleep(_POLL_SECONDS)


def _report(run: Run, command: str, facts: dict[str, object] | None) -> None:
    output = run.output
    if output.mode.json:
        output.envelope(command, "ok" if facts is not None else "not-running", facts or {})
        return
    if facts is None:
        click.echo("ocivendir server: not running")
        return
    verb = {"server start": "running", "server stop": "stopping", "server status": "running"}[command]
    click.echo(
        f"ocivendir server: {verb} (pid {facts['pid']}, build {facts['build']}, socket {facts['socket']}, "
        f"uptime {facts['uptime']} s, calls {facts['calls']}, workers {facts.get('busy', 0)} busy "
        f"{facts.get('idle', 0)} idle)"
    )
