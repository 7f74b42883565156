"""`eukhe jobs attach --session ID JOB`: a person's terminal joined to a tty job's, as `tmux attach` joins a session.

The terminal goes to raw mode; the job's screen is drawn, then every byte it writes is shown as it comes (the
daemon's `jobs.attach` stream), and every key typed goes to the job (`jobs.input`, on a second connection), Ctrl-C
and Ctrl-D included. Ctrl-] (as in telnet) detaches: the job runs on, and a later attach (or `jobs write`) takes it
up again. The command ends by itself when the job ends, saying how. The terminal is put back as it was in any case.

While attached the terminal is the job's, as under `tmux attach` or `ssh`: its bytes reach it as they are (a
full-screen program needs its cursor moves), unlike every other command's output (eukhe.cli.common.emit_text).
"""

from __future__ import annotations

import argparse
import base64
import os
import select
import sys
import termios
import tty

from eukhe.daemon.client import connect, socket_path
from eukhe.daemon.replies import EVENT, decode_reply, reply_outcome
from eukhe.daemon.wire import encode_request
from eukhe.errors import UsageError

DETACH_KEY = b"\x1d"
"""Ctrl-]: detaches from the job, which runs on."""
READ_BYTES = 1 << 16


def attach(args: argparse.Namespace) -> int:
    """Attach the terminal on stdin/stdout to the job until Ctrl-] or the job's end."""
    stdin, stdout = sys.stdin.fileno(), sys.stdout.fileno()
    if not os.isatty(stdin):
        raise UsageError("eukhe jobs attach: stdin is not a terminal (use `eukhe jobs write` from a program)")
    path = socket_path(args.daemon_socket)
    stream = connect(path)
    keys = connect(path)
    session, job = args.session, args.job
    stream.send_raw(encode_request("attach", "jobs.attach", {"session": session, "job": job}))
    try:  # the screen, or the refusal (no terminal, ended, unknown job) raised with the daemon's code
        kind, first = reply_outcome(decode_reply(stream.read_line()), "attach")
    except BaseException:
        stream.close()
        keys.close()
        raise
    saved = termios.tcgetattr(stdin)
    ended: dict[str, object] | None = None
    try:
        tty.setraw(stdin)
        if kind == EVENT:
            _show(stdout, first)
        else:
            ended = first
        pending = bytearray()
        while ended is None:
            readable, _, _ = select.select([stdin, stream._sock], [], [])
            if stdin in readable:
                typed = os.read(stdin, READ_BYTES)
                if not typed:
                    break
                cut = typed.find(DETACH_KEY)
                if cut >= 0:
                    typed = typed[:cut]
                if typed:
                    keys.call("jobs.input", {"session": session, "job": job, "input": typed.decode(errors="replace")})
                if cut >= 0:
                    break
            if stream._sock in readable:
                chunk = stream._sock.recv(READ_BYTES)
                if not chunk:
                    ended = {}
                    break
                pending += chunk
                while (end := pending.find(b"\n")) >= 0:
                    kind, value = reply_outcome(decode_reply(bytes(pending[: end + 1])), "attach")
                    del pending[: end + 1]
                    if kind == EVENT:
                        _show(stdout, value)
                    else:
                        ended = value if isinstance(value, dict) else {}
    finally:
        termios.tcsetattr(stdin, termios.TCSADRAIN, saved)
        stream.close()
        keys.close()
    if ended is None:
        sys.stderr.write(f"\r\neukhe: detached from job {job}; it runs on\n")
        return 0
    how = "was killed" if ended.get("killed") else f"exited with {ended.get('exit_code')}"
    sys.stderr.write(f"\r\neukhe: job {job} {how}\n")
    return 0


def _show(stdout: int, event: object) -> None:
    if isinstance(event, dict) and event.get("type") == "tty_output":
        data = base64.b64decode(str(event.get("data", "")))
        while data:
            data = data[os.write(stdout, data) :]
