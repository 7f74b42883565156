"""`eukhe jobs list|wait|cancel|write|signal|attach --session ID`: the jobs of a daemon-hosted session (S2 "Jobs" 4).

`list` answers every job the session ever ran, those of its earlier worker or daemon lives too; `wait` and `cancel`
on a job of an earlier life answer its recorded end at once.

--json: `list` -> `{"jobs": [...]}`, each row `id`, `kind`, `command`, `status` (running or ended), the output counts
and, once ended, `exit_code` or `killed: true` with its `reason` when it ended with its host (`worker_died`,
`daemon_stopped`, `host_restart`, `session_closed`; `forked` in a session whose running jobs went on in its
fork); `wait` and `cancel` -> the call answer, `status` settled or
detached, with `output` (docs/daemon-protocol.md); `write` -> `status` written (the job runs on: `screen`, and the
raw `output` since the previous answer) or settled; `signal` -> `{"job", "signal", "groups"}`. `attach` joins a
person's terminal to a tty job's (docs/jobs.md, "Interactive jobs"; Ctrl-] detaches).
"""

from __future__ import annotations

import argparse
import sys

from eukhe.cli.bash import print_notices, print_refusal, print_window, refusal_hint
from eukhe.cli.common import emit_json, emit_text, non_negative_int
from eukhe.cli.daemon import add_daemon_options, call

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (CLI start-up time); mypy knows the name
if TYPE_CHECKING:
    from typing import Any

    from eukhe.records.jobs import CallAnswer, JobRow


def cmd_list(args: argparse.Namespace) -> int:
    """List every job the session ever ran."""
    from eukhe.records.jobs import JobList  # noqa: PLC0415  (lazy: CLI start-up time)

    answer = call(args, "jobs.list", {"session": args.session}, answer=JobList)
    if args.json:
        emit_json(answer.to_json())
        return 0
    for job in answer.jobs:
        emit_text(f"{job.id}  {job.status:7}  {end_text(job):8}  {job.command}\n")
    return 0


def end_text(job: JobRow) -> str:
    """How a job ended, in a word or two: `exit 0`, `killed`, `killed (worker_died)`; empty while it runs."""
    if job.status == "running":
        return ""
    if job.killed:
        return f"killed ({job.reason})" if job.reason else "killed"
    return f"exit {job.exit_code}"


def _call_answer(args: argparse.Namespace, op: str, payload: dict[str, Any], label: str) -> CallAnswer:
    """A `jobs.wait` or `jobs.cancel` request; its answer as a CallAnswer record."""
    from eukhe.records.jobs import CallAnswer  # noqa: PLC0415  (lazy: CLI start-up time)

    answer: Any = CallAnswer  # a union of records: msgspec reads it, `type[T]` cannot name it
    result: CallAnswer = call(args, op, payload, wait_label=label, answer=answer)
    return result


def _report(args: argparse.Namespace, result: CallAnswer) -> int:
    from eukhe.records.jobs import Detached  # noqa: PLC0415  (lazy: CLI start-up time)

    if args.json:
        emit_json(result.to_json())
        return 0
    print_window(result.output.text if result.screen is None else result.screen, result.output.notice)
    print_notices(result.notices)
    if isinstance(result, Detached):
        emit_text(f"eukhe: job {result.job} is still running\n", sys.stderr)
    elif result.killed:
        why = f" ({result.reason})" if result.reason else ""
        emit_text(f"eukhe: job {result.job} was killed{why}\n", sys.stderr)
    else:
        emit_text(f"eukhe: job {result.job} exited with {result.exit_code}\n", sys.stderr)
    print_refusal(refusal_hint(result))
    return 0


def cmd_wait(args: argparse.Namespace) -> int:
    """Wait for a job's end, at most --timeout-ms (and the session budget)."""
    payload: dict[str, Any] = {"session": args.session, "job": args.job}
    if args.timeout_ms is not None:
        payload["timeout_ms"] = args.timeout_ms
    return _report(args, _call_answer(args, "jobs.wait", payload, f"waiting for job {args.job}"))


def cmd_cancel(args: argparse.Namespace) -> int:
    """Kill a job and wait for its end (at most the session budget)."""
    payload = {"session": args.session, "job": args.job}
    return _report(args, _call_answer(args, "jobs.cancel", payload, f"cancelling job {args.job}"))


def cmd_write(args: argparse.Namespace) -> int:
    """Type TEXT into a tty job's terminal; print what it shows since the previous answer."""
    payload: dict[str, Any] = {"session": args.session, "job": args.job, "input": args.text}
    if args.budget_ms is not None:
        payload["budget_ms"] = args.budget_ms
    result = call(args, "jobs.write", payload, wait_label=f"writing to job {args.job}")
    if args.json:
        emit_json(result)
        return 0
    if result.get("status") == "written":
        print_window(result.get("screen") or "", result.get("output", {}).get("notice"))
        emit_text(f"eukhe: job {args.job} runs on ({result.get('reason')})\n", sys.stderr)
        return 0
    print_window(result.get("screen") or (result.get("output") or {}).get("text") or "", None)
    end = "was killed" if result.get("killed") else f"exited with {result.get('exit_code')}"
    emit_text(f"eukhe: job {args.job} {end}\n", sys.stderr)
    return 0


def cmd_signal(args: argparse.Namespace) -> int:
    """Send SIGNAL to a job's process group."""
    result = call(args, "jobs.signal", {"session": args.session, "job": args.job, "signal": args.signal})
    if args.json:
        emit_json(result)
        return 0
    emit_text(f"eukhe: SIG{result['signal']} sent to job {args.job}\n", sys.stderr)
    return 0


def cmd_attach(args: argparse.Namespace) -> int:
    """Attach this terminal to a tty job: see it live, type into it; Ctrl-] detaches and leaves it running."""
    from eukhe.cli.attach import attach  # noqa: PLC0415  (lazy: CLI start-up time)

    return attach(args)


def register(subparsers: Any) -> None:
    """Add `eukhe jobs ...` to the parser."""
    jobs = subparsers.add_parser("jobs", help="list, wait for or cancel a session's jobs")
    commands = jobs.add_subparsers(dest="jobs_command", required=True, parser_class=type(jobs))
    listing = commands.add_parser("list", help="list the session's jobs")
    listing.set_defaults(handler=cmd_list)
    wait = commands.add_parser("wait", help="wait for a job's end (at most the timeout and the budget)")
    wait.add_argument("job")
    wait.add_argument("--timeout-ms", type=non_negative_int)
    wait.set_defaults(handler=cmd_wait)
    cancel = commands.add_parser("cancel", help="kill a job and wait for its end")
    cancel.add_argument("job")
    cancel.set_defaults(handler=cmd_cancel)
    write = commands.add_parser("write", help="type into a tty job; print its output since the last answer")
    write.add_argument("job")
    write.add_argument("text", help="the keys to type ($'6*7\\n' in bash: Enter; $'\\x03': Ctrl-C)")
    write.add_argument("--budget-ms", type=non_negative_int, help="wait at most this long for its output")
    write.set_defaults(handler=cmd_write)
    signal = commands.add_parser("signal", help="send a signal to a job's process group")
    signal.add_argument("job")
    signal.add_argument("signal", help="INT, TERM, HUP, QUIT, KILL, USR1, USR2 or WINCH")
    signal.set_defaults(handler=cmd_signal)
    attach = commands.add_parser("attach", help="attach this terminal to a tty job (Ctrl-] detaches)")
    attach.add_argument("job")
    attach.set_defaults(handler=cmd_attach)
    for parser in (listing, wait, cancel, write, signal, attach):
        parser.add_argument("--session", required=True, help="the session id")
        add_daemon_options(parser)
