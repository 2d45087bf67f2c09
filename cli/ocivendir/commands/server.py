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
        _foreground()
        return
    facts = query("status")
    if facts is None:
        from ocivendir.server.spawn import server_argv, spawn_detached  # noqa: PLC0415

        spawn_detached(server_argv())
        _wait_until(lambda: query("status") is not None)
        facts = query("status")
    if facts is None:
        raise OcivendirError("the server did not start", hint="run `ocivendir server start --foreground` to see why")
    _report(run, "server start", facts)


def _foreground() -> None:
    import logging  # noqa: PLC0415

    from ocivendir.commands import main  # noqa: PLC0415 - the entry point every worker runs for a call
    from ocivendir.fs.locks import LockBusy  # noqa: PLC0415
    from ocivendir.server.daemon import run_server  # noqa: PLC0415
    from ocivendir.server.place import Unusable, server_dir  # noqa: PLC0415
    from ocivendir.server.preload import preload  # noqa: PLC0415
    from ocivendir.settings import load_server_max_calls, load_server_settings  # noqa: PLC0415

    log = logging.getLogger("ocivendir.server")
    handler = logging.StreamHandler()
    handler.setFormatter(logging.Formatter("ocivendir server: %(message)s"))
    log.addHandler(handler)
    log.setLevel(logging.INFO)
    log.propagate = False
    idle, workers = load_server_settings()
    max_calls = load_server_max_calls()
    try:
        run_server(server_dir(), idle=idle, workers=workers, max_calls=max_calls, preload=preload, entry=main)
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
    _wait_until(lambda: query("status") is None)
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


def _wait_until(done: Callable[[], bool]) -> None:
    """Poll `done` until it is true or the start-up wait has passed."""
    deadline = time.monotonic() + _START_WAIT_SECONDS
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
