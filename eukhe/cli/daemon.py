"""`eukhe daemon start|run|stop|status`, and what every daemon-backed command shares.

Every daemon-backed command takes `--json` and `--daemon-socket PATH`; it starts the daemon on first use when none
answers (except `daemon stop` and `daemon status`, which only look). Long waits show a spinner on a terminal, never
under --json.
"""

from __future__ import annotations

import argparse
import sys
import time

from eukhe.cli.common import emit_json, emit_text
from eukhe.daemon.client import DaemonClient, DaemonUnavailableError, connect, socket_path, start_daemon

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (CLI start-up time); mypy knows the name
if TYPE_CHECKING:
    from collections.abc import Callable
    from contextlib import AbstractContextManager
    from typing import Any, TypeVar, overload

    T = TypeVar("T")


EXIT_NOT_RUNNING = 3
"""`daemon status` when no daemon runs (the LSB init-script convention)."""
STOP_TIMEOUT_S = 20.0


def add_daemon_options(parser: argparse.ArgumentParser) -> None:
    """The options every daemon-backed command has."""
    parser.add_argument(
        "--json", action="store_true", help="print one JSON value (errors: {error, message, field, details})"
    )
    parser.add_argument("--daemon-socket", metavar="PATH", help="the daemon's socket (default $TMPDIR/eukhe-UID/...)")


class _NoProgress:
    """The context a request runs in when no spinner is shown (contextlib.nullcontext, without importing
    contextlib: CLI start-up time)."""

    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        return None


def progress(args: argparse.Namespace, label: str) -> AbstractContextManager[object]:
    """A spinner with elapsed time on stderr while a long request runs (enter the result around the request);
    nothing under --json or off a terminal."""
    if args.json or not sys.stderr.isatty():
        return _NoProgress()
    # Lazy: rich costs CLI start-up time, and only a terminal needs it.
    from rich.console import Console  # noqa: PLC0415
    from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn  # noqa: PLC0415

    # The label is shown as it is: not read as rich markup (a command's `[/x]` would raise MarkupError).
    columns = (SpinnerColumn(), TextColumn("{task.description}", markup=False), TimeElapsedColumn())
    bar = Progress(*columns, console=Console(stderr=True), transient=True)
    bar.add_task(label, total=None)
    return bar


if TYPE_CHECKING:  # the typed forms (typing.overload only for mypy: CLI start-up time)

    @overload
    def call(
        args: argparse.Namespace,
        op: str,
        payload: dict[str, Any] | None = None,
        *,
        wait_label: str | None = None,
        on_event: Callable[[Any], None] | None = None,
        on_interrupt: Callable[[bool], None] | None = None,
        answer: type[T],
    ) -> T: ...

    @overload
    def call(
        args: argparse.Namespace,
        op: str,
        payload: dict[str, Any] | None = None,
        *,
        wait_label: str | None = None,
        on_event: Callable[[Any], None] | None = None,
        on_interrupt: Callable[[bool], None] | None = None,
        answer: None = None,
    ) -> Any: ...


def call(
    args: argparse.Namespace,
    op: str,
    payload: dict[str, Any] | None = None,
    *,
    wait_label: str | None = None,
    on_event: Callable[[Any], None] | None = None,
    on_interrupt: Callable[[bool], None] | None = None,
    answer: type[T] | None = None,
) -> Any:
    """Send one request to the daemon (starting it if needed) and return the result, as the record `answer` when
    given (DaemonProtocolError naming the field when it is not one); errors raise DaemonError. With `on_interrupt`,
    Ctrl-C cancels the request (see DaemonClient.call)."""
    with connect(socket_path(args.daemon_socket)) as client:
        if wait_label is None:
            return client.call(op, payload, on_event, on_interrupt=on_interrupt, answer=answer)
        with progress(args, wait_label):
            return client.call(op, payload, on_event, on_interrupt=on_interrupt, answer=answer)


def _look(args: argparse.Namespace) -> DaemonClient | None:
    """A connection to a running daemon, or None when none answers (never starts one)."""
    try:
        return connect(socket_path(args.daemon_socket), autostart=False)
    except DaemonUnavailableError:
        return None


def cmd_start(args: argparse.Namespace) -> int:
    """Start a daemon in the background; return once its socket answers."""
    path = socket_path(args.daemon_socket)
    client = _look(args)
    started = client is None
    if client is None:
        client = start_daemon(path)
    from eukhe.records.daemon import Pong  # noqa: PLC0415  (lazy: CLI start-up time)

    with client:
        pid = client.call("ping", answer=Pong).pid
    result = {"running": True, "started": started, "pid": pid, "socket": str(path)}  # DaemonStarted
    if args.json:
        emit_json(result)
    else:
        verb = "started" if started else "already running"
        emit_text(f"daemon {verb}: pid {pid} on {path}\n")
    return 0


def cmd_run(args: argparse.Namespace) -> int:
    """Run the daemon in this process (foreground) until stopped."""
    from pathlib import Path  # noqa: PLC0415  (lazy: the client path works with str paths; CLI start-up time)

    from eukhe.daemon.supervisor import run_supervisor  # noqa: PLC0415  (lazy: only `daemon run` needs asyncio)

    return run_supervisor(Path(socket_path(args.daemon_socket)))


def cmd_stop(args: argparse.Namespace) -> int:
    """Ask the daemon to stop and wait until it is gone."""
    path = socket_path(args.daemon_socket)
    client = _look(args)
    if client is None:
        result: dict[str, Any] = {"running": False, "stopped": False, "socket": str(path), "pid": None}  # DaemonStopped
    else:
        from eukhe.records.daemon import Stopping  # noqa: PLC0415  (lazy: CLI start-up time)

        with client:
            pid = client.call("stop", answer=Stopping).pid
        deadline = time.monotonic() + STOP_TIMEOUT_S
        while _alive(pid) and time.monotonic() < deadline:
            time.sleep(0.01)  # polling a real event: the daemon process exiting, bounded by the deadline
        result = {"running": _alive(pid), "stopped": True, "socket": str(path), "pid": pid}
    if args.json:
        emit_json(result)
    elif result["stopped"]:
        emit_text(f"daemon stopped: pid {result['pid']}\n")
    else:
        emit_text(f"no daemon runs on {path}\n")
    return 0


def _alive(pid: int) -> bool:
    """True while `pid` exists and is not a zombie."""
    from eukhe.procs import alive  # noqa: PLC0415  (lazy: only `daemon stop` needs psutil; CLI start-up time)

    return alive(pid)


def cmd_status(args: argparse.Namespace) -> int:
    """Show the running daemon, its workers and its reports; exit 3 when none runs."""
    path = socket_path(args.daemon_socket)
    client = _look(args)
    if client is None:
        if args.json:
            emit_json({"running": False, "socket": str(path)})  # DaemonNotRunning
        else:
            emit_text(f"no daemon runs on {path}\n")
        return EXIT_NOT_RUNNING
    with client:
        # As JSON, not as a DaemonStatus record: msgspec imports typing, and `eukhe daemon status` imports nothing
        # heavy (tests/real/test_cli_client_imports.py); its reports print as the JSON objects they are.
        status = client.call("status")
    if args.json:
        emit_json(status)
        return 0
    emit_text(f"daemon pid {status['pid']} on {status['socket']}, up {status['uptime_s']:.0f} s\n")
    fork_server = status.get("fork_server")
    emit_text(
        f"  workers start forked from fork server pid {fork_server}\n" if fork_server else "  workers start fresh\n"
    )
    for worker in status["workers"]:
        emit_text(f"  session {worker['session']}: worker pid {worker['pid']} in {worker['cwd']}\n")
    for report in status["reports"]:
        emit_text(f"  report: {report}\n")
    for culled in status.get("culled", []):
        what = "worker" if culled["event"] == "session_culled" else "kernel"
        when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(culled["at"]))
        emit_text(
            f"  culled at {when}: the {what} of session {culled['session']} after {culled['idle_s']:.0f} s idle\n"
        )
    last_gc = status.get("last_gc")
    if last_gc:
        when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(last_gc["at"]))
        emit_text(
            f"  last artifact collection at {when}: removed {len(last_gc['removed'])} files,"
            f" freed {last_gc['bytes_freed']} bytes; {last_gc['bytes_after']} bytes in artifacts\n"
        )
    return 0


def register(subparsers: Any) -> None:
    """Add `eukhe daemon ...` to the parser."""
    daemon = subparsers.add_parser("daemon", help="start, run, stop or inspect the eukhe daemon")
    commands = daemon.add_subparsers(dest="daemon_command", required=True, parser_class=type(daemon))
    for name, handler, text in (
        ("start", cmd_start, "start the daemon in the background; return when its socket is ready"),
        ("run", cmd_run, "run the daemon in the foreground"),
        ("stop", cmd_stop, "stop the daemon and its session workers"),
        ("status", cmd_status, "show the daemon, its workers and reports (exit 3: not running)"),
    ):
        parser = commands.add_parser(name, help=text)
        add_daemon_options(parser)
        parser.set_defaults(handler=handler)


__all__ = ["add_daemon_options", "call", "progress", "register"]
