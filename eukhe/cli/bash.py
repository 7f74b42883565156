"""`eukhe bash --session ID [--budget-ms N] [--tty [--cols C --rows R]] -- CMD`: run a user command as a job of a
daemon-hosted session (S2); with --tty on a pseudo-terminal (`eukhe jobs write`, `eukhe jobs attach` drive it).

It blocks at most the budget (the session's `tool_blocking_budget_ms`, lowered by --budget-ms): the run settles
(--json: `status: settled`, `exit_code`, `killed`) or detaches (`status: detached`, `job`) with its output so far
(`output`), and goes on in the daemon. Ctrl-C cancels the job through the daemon (a second one leaves at once).
"""

from __future__ import annotations

import argparse
import sys

from eukhe.cli.common import emit_json, emit_text, non_negative_int
from eukhe.cli.daemon import add_daemon_options, call
from eukhe.errors import UsageError

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (CLI start-up time); mypy knows the name
if TYPE_CHECKING:
    from typing import Any

    from eukhe.records.jobs import CallAnswer


def command_text(words: list[str]) -> str:
    """The command after `--`, as one shell string (words joined by spaces, as ssh does)."""
    if words and words[0] == "--":
        words = words[1:]
    if not words:
        raise UsageError("eukhe bash: give a command after --")
    return " ".join(words)


def report_detached(session: str, result: dict[str, Any]) -> bool:
    """Say on stderr that a run passed its budget and how to wait for its job; True if it did."""
    if result["status"] != "detached":
        return False
    say_detached(session, result["job"], result["budget_ms"])
    return True


def report_left(session: str, result: dict[str, Any]) -> None:
    """Say on stderr that the processes a run's shell left running go on as a job, and how to wait for it or end
    it (nothing when none was left)."""
    job = result.get("left_running")
    if job:
        emit_text(
            f"eukhe: processes it left running go on as job {job}: `eukhe jobs wait --session {session} {job}` "
            f"waits for their end, `eukhe jobs cancel --session {session} {job}` ends them\n",
            sys.stderr,
        )


def say_detached(session: str, job: str, budget_ms: int) -> None:
    """Say on stderr that a run passed its budget and how to wait for its job."""
    emit_text(
        f"eukhe: still running after {budget_ms} ms: detached as job {job}; "
        f"`eukhe jobs wait --session {session} {job}` waits for it\n",
        sys.stderr,
    )


def print_output(result: dict[str, Any]) -> None:
    """The output window of an answer read as JSON (a tty job's: its screen), then the truncation notice (if any)
    and the session's notices on stderr."""
    output = result.get("output") or {}
    screen = result.get("screen")
    print_window(output.get("text") or "" if screen is None else screen, output.get("notice"))
    print_notices(result.get("notices") or [])
    print_refusal((result.get("refusal") or {}).get("hint"))


def print_notices(notices: list[str]) -> None:
    """The session's notices on an answer (what the sandbox undid), one line each on stderr."""
    for notice in notices:
        emit_text(f"eukhe: {notice}\n", sys.stderr)


def print_refusal(hint: str | None) -> None:
    """The line of the sandbox's refusal that made a run fail (if any), last on stderr."""
    if hint:
        emit_text(f"eukhe: {hint}\n", sys.stderr)


def refusal_hint(answer: CallAnswer) -> str | None:
    """The line of the sandbox's refusal that made a settled run fail, if any (a detached answer has none)."""
    refusal = getattr(answer, "refusal", None)
    return None if refusal is None else str(refusal.hint)


def print_window(text: str, notice: str | None) -> None:
    """An output window's text, then its truncation notice (if any) on stderr."""
    emit_text(text)
    if text and not text.endswith("\n"):
        emit_text("\n")
    sys.stdout.flush()
    if notice:
        emit_text(f"{notice}\n", sys.stderr)


class Interrupts:
    """What a blocking call says on Ctrl-C: the first cancels its job through the daemon and waits for its end;
    the second leaves at once, naming the job and how to wait for it or cancel it."""

    def __init__(self, session: str) -> None:
        self.session = session
        self.job: str | None = None

    def on_event(self, event: Any) -> None:
        if isinstance(event, dict) and event.get("type") == "started":
            self.job = str(event.get("job"))

    def on_interrupt(self, first: bool) -> None:
        # The job may run before its id reaches this client (the cancel names the request, so it reaches the job
        # all the same); the end's line names it then.
        job = self.job or "(its id not heard yet)"
        if first:
            emit_text(f"eukhe: interrupted: cancelling job {job} (Ctrl-C again to leave it running)\n", sys.stderr)
            return
        if self.job is None:
            emit_text(
                f"eukhe: left the call while it is cancelled: `eukhe jobs list --session {self.session}` names its "
                "job\n",
                sys.stderr,
            )
            return
        emit_text(
            f"eukhe: left job {job} while it is cancelled: `eukhe jobs wait --session {self.session} {job}` waits "
            f"for its end, `eukhe jobs cancel --session {self.session} {job}` cancels it again\n",
            sys.stderr,
        )


def blocking_call(args: argparse.Namespace, op: str, payload: dict[str, Any], label: str, answer: Any = None) -> Any:
    """A `bash` or `ipython` request whose Ctrl-C cancels its job (see Interrupts); its answer as `answer` when
    given (a record type; None: as JSON)."""
    interrupts = Interrupts(args.session)
    return call(
        args,
        op,
        payload,
        wait_label=label,
        on_event=interrupts.on_event,
        on_interrupt=interrupts.on_interrupt,
        answer=answer,
    )


def cmd_bash(args: argparse.Namespace) -> int:
    """Run the command; print the answer (--json) or its output (the exit code mirrors the command's)."""
    payload: dict[str, Any] = {"session": args.session, "command": command_text(args.command)}
    if args.budget_ms is not None:
        payload["budget_ms"] = args.budget_ms
    if args.tty:
        payload["tty"] = True
        for name in ("cols", "rows"):
            if getattr(args, name) is not None:
                payload[name] = getattr(args, name)
    elif args.cols is not None or args.rows is not None:
        raise UsageError("eukhe bash: --cols and --rows size a terminal: give --tty too")
    # As JSON, not as a CallAnswer record: msgspec imports typing, and a warm `eukhe bash` imports nothing heavy
    # (tests/real/test_cli_client_imports.py, bench/cli_roundtrip.py).
    result = blocking_call(args, "bash", payload, f"running {payload['command']!r}")
    if args.json:
        emit_json(result)
        return 0
    print_output(result)
    screen = result.get("screen")
    if screen is not None and result["status"] == "detached":
        emit_text(f"eukhe: `eukhe jobs attach --session {args.session} {result['job']}` attaches to it\n", sys.stderr)
    if report_detached(args.session, result):
        return 0
    report_left(args.session, result)
    if result.get("killed"):
        return 137
    return int(result.get("exit_code") or 0)


def register(subparsers: Any) -> None:
    """Add `eukhe bash` to the parser."""
    parser = subparsers.add_parser("bash", help="run a command as a job of a session (detaches past the budget)")
    parser.add_argument("--session", required=True, help="the session id")
    parser.add_argument(
        "--budget-ms", type=non_negative_int, help="block at most this long (within the session budget)"
    )
    parser.add_argument("--tty", action="store_true", help="run it on a pseudo-terminal (jobs write, jobs attach)")
    parser.add_argument("--cols", type=non_negative_int, help="with --tty: the terminal's width (default 120)")
    parser.add_argument("--rows", type=non_negative_int, help="with --tty: the terminal's height (default 40)")
    add_daemon_options(parser)
    parser.add_argument("command", nargs=argparse.REMAINDER, help="-- then the command")
    parser.set_defaults(handler=cmd_bash)
