"""`eukhe jobs list|wait|cancel --session ID`: the jobs of a daemon-hosted session (S2 "Jobs" 4).

`list` answers every job the session ever ran, those of its earlier worker or daemon lives too; `wait` and `cancel`
on a job of an earlier life answer its recorded end at once.

--json: `list` -> `{"jobs": [...]}`, each row `id`, `kind`, `command`, `status` (running or ended), the output counts
and, once ended, `exit_code` or `killed: true` with its `reason` when it ended with its host (`worker_died`,
`daemon_stopped`, `host_restart`, `session_closed`; `forked` in a session whose running jobs went on in its
fork); `wait` and `cancel` -> the call answer, `status` settled or
detached, with `output` (docs/daemon-protocol.md).
"""

from __future__ import annotations

import argparse
import sys

from eukhe.cli.bash import print_output
from eukhe.cli.common import emit_json, non_negative_int
from eukhe.cli.daemon import add_daemon_options, call

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (CLI start-up time); mypy knows the name
if TYPE_CHECKING:
    from typing import Any


def cmd_list(args: argparse.Namespace) -> int:
    """List every job the session ever ran."""
    answer = call(args, "jobs.list", {"session": args.session})
    if args.json:
        emit_json(answer)
        return 0
    for job in answer["jobs"]:
        print(f"{job['id']}  {job['status']:7}  {end_text(job):8}  {job['command']}")
    return 0


def end_text(job: dict[str, Any]) -> str:
    """How a job ended, in a word or two: `exit 0`, `killed`, `killed (worker_died)`; empty while it runs."""
    if job["status"] == "running":
        return ""
    if job.get("killed"):
        return f"killed ({job['reason']})" if job.get("reason") else "killed"
    return f"exit {job.get('exit_code')}"


def _report(args: argparse.Namespace, result: dict[str, Any]) -> int:
    if args.json:
        emit_json(result)
        return 0
    print_output(result)
    if result["status"] == "detached":
        sys.stderr.write(f"eukhe: job {result['job']} is still running\n")
    elif result.get("killed"):
        why = f" ({result['reason']})" if result.get("reason") else ""
        sys.stderr.write(f"eukhe: job {result['job']} was killed{why}\n")
    else:
        sys.stderr.write(f"eukhe: job {result['job']} exited with {result.get('exit_code')}\n")
    return 0


def cmd_wait(args: argparse.Namespace) -> int:
    """Wait for a job's end, at most --timeout-ms (and the session budget)."""
    payload: dict[str, Any] = {"session": args.session, "job": args.job}
    if args.timeout_ms is not None:
        payload["timeout_ms"] = args.timeout_ms
    return _report(args, call(args, "jobs.wait", payload, wait_label=f"waiting for job {args.job}"))


def cmd_cancel(args: argparse.Namespace) -> int:
    """Kill a job and wait for its end (at most the session budget)."""
    payload = {"session": args.session, "job": args.job}
    return _report(args, call(args, "jobs.cancel", payload, wait_label=f"cancelling job {args.job}"))


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
    for parser in (listing, wait, cancel):
        parser.add_argument("--session", required=True, help="the session id")
        add_daemon_options(parser)
