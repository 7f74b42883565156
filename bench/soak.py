"""Soak with fault injection (docs/testing.md): concurrent clients drive random operations against a real daemon in a
private world while faults are injected at random times; invariants are checked all along and at the end.

    uv run python bench/soak.py --minutes 10 --seed 7        # or --seconds 60; --clients, --round-seconds, --json

Clients (threads, each on its own connection, a few calls through the CLI) run short, long and detached bash;
cells; cancels (of jobs, and of requests in flight); rewinds and forks; fs read/write/edit/grep/glob; children
(shared and isolated) spawned, collected and deleted. Faults: kill -9 of a worker, of the supervisor and of a kernel;
ENOSPC (as root the agent dir is a small tmpfs the soak mounts, filled for a moment); EMFILE (the daemon's
RLIMIT_NOFILE lowered to what it holds, for a moment).

The run is cut into rounds; each ends with a quiesce (clients and faults pause, every job is cancelled, every child
deleted) where the invariants are checked:
- every bash job the soak started is journaled once at its end (one `eukhe.bash` row) after reopen, unless its life
  overlapped a fault that may lose it (kill -9 of its worker, ENOSPC, EMFILE: counted as "excused"); its node is
  put and retired at most once; every tool call slot has one start and one settle; no job node is left;
- kept + dropped = written for every ended job (each command writes a known amount, then touches a marker file),
  in its answer, its row and its artifact;
- no process of an ended job is alive (each job's processes carry SOAK_TAG=<tag> in their environment; /proc is
  scanned);
- every journal parses (a skipped line counts unless a fault that tears a write happened since the last check);
- the daemon answers every request (within 120 s) and never answers `internal`;
- the daemon's open fds return to their baseline: each worker's at consecutive quiesces, and the supervisor's once
  every session is closed.

It prints a table: operations, faults by kind, invariant violations (must be 0), and the seed to replay (the seed
fixes every client's and the injector's choices; thread timing still varies). Exit code 1 when a violation was seen.
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import os
import random
import resource
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.verdict import Target, report

REPLY_TIMEOUT_S = 120.0
"""A request not answered in this long is a violation (the blocking budget is 30 s; a reopen may wait 30 s)."""
PROC_GRACE_S = 5.0
"""How long a process of an ended job may still be seen (it is being reaped)."""
FD_SETTLE_S = 10.0
MIN_FAULTS_WAIT_S = 600.0
"""How long past its time a run waits for --min-faults (faults come every --fault-every seconds on average)."""
SLOW_CLOSE_S = 44.5
"""A close this slow met the supervisor's stop grace (WORKER_STOP_GRACE_MS, 45 s): its worker may have been killed."""
HOST_ENDS = ("worker_died", "daemon_stopped", "host_restart")
FORKED_WORKER_NAME = "eukhe-worker"
"""eukhe.daemon.forkserver.WORKER_PROCESS_NAME (not imported: the soak reads only /proc and the wire)."""
"""The reasons a reopen gives a job that ended with its host (its live output died with it)."""
TMPFS_SIZE = "256m"


# ---------------------------------------------------------------------------------------------------------------------
# The world


@dataclass
class World:
    root: Path
    tmpfs: bool = False

    @property
    def agent(self) -> Path:
        return self.root / "agent"

    @property
    def sessions(self) -> Path:
        return self.agent / "sessions"

    @property
    def socket(self) -> Path:
        return self.root / "t" / f"eukhe-{os.getuid()}" / "daemon.sock"

    @property
    def markers(self) -> Path:
        return self.root / "m"

    @property
    def workspaces(self) -> Path:
        return self.root / "ws"

    def env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("EUKHE_")}
        env.update(
            TMPDIR=str(self.root / "t"),
            EUKHE_CODING_AGENT_DIR=str(self.agent),
            HOME=str(self.root / "home"),
            EUKHE_KERNEL_PYTHON=sys.executable,
        )
        return env


def make_world(use_tmpfs: bool) -> World:
    root = Path(tempfile.mkdtemp(prefix="eksoak", dir="/tmp"))  # short: socket paths stop at 107 bytes
    world = World(root)
    for sub in ("t", "m", "ws", "home", "agent"):
        (root / sub).mkdir(mode=0o700)
    if use_tmpfs and os.geteuid() == 0 and shutil.which("mount"):  # else no ENOSPC faults (util-linux has mount)
        done = subprocess.run(
            ["mount", "-t", "tmpfs", "-o", f"size={TMPFS_SIZE},mode=0700", "tmpfs", str(world.agent)],
            capture_output=True,
            check=False,
        )
        world.tmpfs = done.returncode == 0
    os.environ.update(world.env())
    return world


def proc_environ(pid: str) -> bytes:
    try:
        return Path(f"/proc/{pid}/environ").read_bytes()
    except OSError:
        return b""


def proc_cmdline(pid: str) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def proc_name(pid: str) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return ""


def proc_state(pid: str) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return "?"


def live_pids() -> Iterator[str]:
    me = str(os.getpid())
    for entry in os.listdir("/proc"):
        if entry.isdigit() and entry != me and proc_state(entry) not in ("Z", "X", "?"):
            yield entry


def world_processes(world: World) -> dict[int, str]:
    """Every live process of this world (its environment names our agent dir): pid -> command line. A worker the
    fork server forked keeps the fork server's command line; its process name says what it is, so it leads."""
    marker = f"EUKHE_CODING_AGENT_DIR={world.agent}".encode()
    found = {}
    for pid in live_pids():
        if marker in proc_environ(pid).split(b"\0"):
            name = proc_name(pid)
            found[int(pid)] = f"[{name}] {proc_cmdline(pid)}" if name == FORKED_WORKER_NAME else proc_cmdline(pid)
    return found


def live_tags() -> dict[str, list[int]]:
    """SOAK_TAG value -> the live pids that carry it."""
    found: dict[str, list[int]] = {}
    for pid in live_pids():
        for item in proc_environ(pid).split(b"\0"):
            if item.startswith(b"SOAK_TAG="):
                found.setdefault(item[9:].decode(), []).append(int(pid))
    return found


def fd_targets(pid: int) -> list[str]:
    try:
        names = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return []
    targets = []
    for name in names:
        with contextlib.suppress(OSError):
            targets.append(os.readlink(f"/proc/{pid}/fd/{name}"))
    return sorted(targets)


# ---------------------------------------------------------------------------------------------------------------------
# What the soak knows


@dataclass
class JobInfo:
    id: str
    session: str
    tag: str
    kind: str  # bash | cell
    lines: int  # how many lines the command writes ("L<n>\n")
    marker: Path | None  # touched once every line was written
    started: float
    ended: float | None = None  # when the soak learned its end (or its host's)
    answers: list[dict[str, Any]] = field(default_factory=list)  # Settled answers seen
    artifacts_pruned: bool = False

    def expected(self) -> bytes:
        return b"".join(b"L%d\n" % n for n in range(1, self.lines + 1))


@dataclass
class Fault:
    kind: str
    start: float
    end: float
    detail: str = ""


class Stats:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.ops: Counter[str] = Counter()
        self.errors: Counter[str] = Counter()
        self.examples: dict[str, list[str]] = {}
        self.faults: Counter[str] = Counter()
        self.violations: list[str] = []
        self.excused: Counter[str] = Counter()
        self.checks: Counter[str] = Counter()

    def op(self, name: str) -> None:
        with self.lock:
            self.ops[name] += 1

    def error(self, code: str, example: str = "") -> None:
        with self.lock:
            self.errors[code] += 1
            seen = self.examples.setdefault(code, [])
            if len(seen) < 3 and example:
                seen.append(example[:300])

    def violation(self, kind: str, text: str) -> None:
        with self.lock:
            self.violations.append(f"{kind}: {text}")
        sys.stderr.write(f"soak: VIOLATION {kind}: {text}\n")
        sys.stderr.flush()

    def check(self, name: str, n: int = 1) -> None:
        with self.lock:
            self.checks[name] += n


class Registry:
    """Sessions in play, jobs started, faults injected: shared by the clients, the injector and the checks."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.sessions: list[str] = []
        self.known_sessions: set[str] = set()
        self.jobs: dict[str, JobInfo] = {}
        self.faults: list[Fault] = []
        self.children: dict[str, set[str]] = {}
        self.tags = itertools.count(1)

    def add_session(self, session: str) -> None:
        with self.lock:
            if session not in self.sessions:
                self.sessions.append(session)
            self.known_sessions.add(session)

    def pick_session(self, rng: random.Random) -> str | None:
        with self.lock:
            return rng.choice(self.sessions) if self.sessions else None

    def running_jobs(self, session: str) -> list[JobInfo]:
        with self.lock:
            return [j for j in self.jobs.values() if j.session == session and j.ended is None]

    def faults_between(self, start: float, end: float, kinds: set[str]) -> list[Fault]:
        with self.lock:
            return [f for f in self.faults if f.kind in kinds and f.start <= end and f.end >= start]


# ---------------------------------------------------------------------------------------------------------------------
# Talking to the daemon


class NoAnswerError(Exception):
    """The daemon did not answer in REPLY_TIMEOUT_S."""


class Reply:
    def __init__(self, ok: bool, result: Any, error: dict[str, Any] | None, events: list[dict[str, Any]]) -> None:
        self.ok, self.result, self.error, self.events = ok, result, error or {}, events

    @property
    def code(self) -> str:
        return str(self.error.get("code"))

    def started_job(self) -> str | None:
        for event in self.events:
            if event.get("type") == "started":
                return str(event["job"])
        return None


class Connection:
    """One client connection that reconnects (starting the daemon when none answers) after a fault."""

    def __init__(self, world: World) -> None:
        self.world = world
        self.client: Any = None
        self.ids = itertools.count(1)

    def _connect(self) -> Any:
        from eukhe.daemon.client import connect

        if self.client is None:
            self.client = connect(str(self.world.socket))
            self.client._sock.settimeout(REPLY_TIMEOUT_S)
        return self.client

    def drop(self) -> None:
        if self.client is not None:
            with contextlib.suppress(OSError):
                self.client.close()
        self.client = None

    def request(self, op: str, args: dict[str, Any] | None = None, cancel_after: float | None = None) -> Reply:
        """Send one request (optionally a cancel of it after `cancel_after` s); its reply and events. A connection
        closed by a fault answers Reply(ok=False, code="connection_lost")."""
        from eukhe.daemon.client import DaemonProtocolError, DaemonUnavailableError
        from eukhe.daemon.wire import encode_request

        try:
            client = self._connect()
        except (DaemonUnavailableError, OSError) as error:
            self.drop()
            return Reply(False, None, {"code": "connection_lost", "message": str(error)}, [])
        request_id = next(self.ids)
        cancel_id = f"c{request_id}"
        events: list[dict[str, Any]] = []
        answer: Reply | None = None
        try:
            client.send_raw(encode_request(request_id, op, args))
            if cancel_after is not None:
                time.sleep(cancel_after)
                client.send_raw(encode_request(cancel_id, "cancel", {"request": request_id}))
            cancel_answered = cancel_after is None
            while answer is None or not cancel_answered:
                reply = client.read_reply()
                if reply.get("id") == cancel_id:
                    cancel_answered = True  # accepted at once, or refused after the request's reply
                elif reply.get("id") != request_id:
                    self.drop()
                    return Reply(False, None, {"code": "daemon_protocol", "message": str(reply)[:200]}, events)
                elif "event" in reply:
                    events.append(reply["event"])
                else:
                    answer = Reply(bool(reply.get("ok")), reply.get("result"), reply.get("error"), events)
            return answer
        except TimeoutError as error:
            self.drop()
            raise NoAnswerError(f"{op} {json.dumps(args)[:200]}") from error
        except (DaemonProtocolError, OSError) as error:
            self.drop()
            return Reply(False, None, {"code": "connection_lost", "message": str(error)}, events)


# ---------------------------------------------------------------------------------------------------------------------
# The clients


def bash_body(lines: int, marker: Path, sleep_s: float, background: bool) -> str:
    parts = ["exec 2>/dev/null"]
    if background:
        parts.append("sleep 600 &")  # a group member that outlives nothing: the job's end must end it
    parts.append(f"seq -f 'L%g' 1 {lines}" if lines else "true")
    parts.append(f": > {shlex.quote(str(marker))}")
    if sleep_s:
        parts.append(f"sleep {sleep_s:.2f}")
    return "\n".join(parts)


class Client(threading.Thread):
    def __init__(self, number: int, soak: Soak) -> None:
        super().__init__(name=f"client-{number}", daemon=True)
        self.number = number
        self.soak = soak
        self.rng = random.Random(soak.seed * 1000 + number)
        self.conn = Connection(soak.world)
        self.files = itertools.count(1)
        self.busy = threading.Event()

    # -- plumbing --------------------------------------------------------------------------------------------------

    def ask(self, op: str, args: dict[str, Any] | None = None, **kw: Any) -> Reply:
        reply = self.conn.request(op, args, **kw)
        if not reply.ok:
            self.soak.stats.error(reply.code, f"{op}: {reply.error.get('message')}")
            if reply.code == "internal":
                self.soak.stats.violation("internal", f"{op} {json.dumps(args)[:160]}: {reply.error.get('message')}")
        return reply

    def run(self) -> None:
        soak = self.soak
        while not soak.stopped.is_set():
            if soak.paused.is_set():
                self.conn.drop()  # no connection stays open through a quiesce (the supervisor's fds are counted)
                self.busy.clear()
                time.sleep(0.05)
                continue
            self.busy.set()
            try:
                self.step()
            except NoAnswerError as error:
                soak.stats.violation("no_answer", str(error))
            except Exception as error:  # a bug of the soak itself: say it, go on
                soak.stats.violation("soak_error", f"{type(error).__name__}: {error}")
                import traceback

                traceback.print_exc()
        self.busy.clear()
        self.conn.drop()

    def step(self) -> None:
        ops: list[tuple[Callable[[str], None], int]] = [
            (self.bash_short, 14),
            (self.bash_long, 8),
            (self.bash_detached, 4),
            (self.bash_cancel_request, 3),
            (self.jobs_wait, 6),
            (self.jobs_cancel, 4),
            (self.cell_short, 6),
            (self.cell_long, 3),
            (self.cell_cancel_request, 1),
            (self.navigate, 3),
            (self.fork, 1),
            (self.fs_ops, 8),
            (self.children_op, 2),
            (self.remote_op, 2),
            (self.cli_op, 2),
            (self.jobs_list, 2),
        ]
        session = self.soak.registry.pick_session(self.rng)
        if session is None or (self.rng.random() < 0.01 and len(self.soak.registry.sessions) < 6):
            self.create_session()
            return
        action = self.rng.choices([op for op, _ in ops], weights=[w for _, w in ops])[0]
        action(session)

    def create_session(self) -> None:
        cwd = self.soak.new_workspace()
        reply = self.ask("session.create", {"cwd": str(cwd)})
        self.soak.stats.op("session.create")
        if reply.ok:
            self.soak.registry.add_session(reply.result["id"])

    # -- bash ------------------------------------------------------------------------------------------------------

    def _bash(
        self,
        session: str,
        lines: int,
        sleep_s: float,
        budget_ms: int,
        *,
        background: bool = False,
        cancel_after: float | None = None,
    ) -> tuple[Reply, JobInfo | None]:
        registry = self.soak.registry
        tag = f"{self.soak.tag_prefix}{next(registry.tags)}"
        marker = self.soak.world.markers / tag
        body = bash_body(lines, marker, sleep_s, background)
        command = f"SOAK_TAG={tag} exec bash -c {shlex.quote(body)}"
        started = time.monotonic()
        reply = self.ask(
            "bash", {"session": session, "command": command, "budget_ms": budget_ms}, cancel_after=cancel_after
        )
        job_id = reply.started_job()
        if job_id is None and reply.ok and isinstance(reply.result, dict):
            job_id = reply.result.get("job")
        if job_id is None:
            return reply, None
        info = JobInfo(job_id, session, tag, "bash", lines, marker, started)
        with registry.lock:
            registry.jobs[job_id] = info
        if reply.ok:
            self.soak.saw_answer(info, reply.result)
        elif reply.code == "cancelled" and "ended" in str(reply.error.get("message")):
            self.soak.saw_end(info)
        return reply, info

    def bash_short(self, session: str) -> None:
        self.soak.stats.op("bash.short")
        self._bash(session, self.rng.choice([0, 1, 5, 50, 300, 3000]), 0, 10_000)

    def bash_long(self, session: str) -> None:
        self.soak.stats.op("bash.long")
        lines = self.rng.choice([10, 2000, 8000, 20000])
        self._bash(session, lines, self.rng.uniform(0.5, 4), self.rng.choice([100, 300, 1000]))

    def bash_detached(self, session: str) -> None:
        self.soak.stats.op("bash.detached")
        self._bash(session, self.rng.choice([0, 100, 6000]), self.rng.uniform(5, 30), 0, background=True)

    def bash_cancel_request(self, session: str) -> None:
        self.soak.stats.op("bash.cancel_request")
        self._bash(session, self.rng.choice([10, 5000]), 20, 20_000, cancel_after=self.rng.uniform(0.05, 0.6))

    def _some_job(self, session: str, running_only: bool) -> JobInfo | None:
        registry = self.soak.registry
        with registry.lock:
            jobs = [j for j in registry.jobs.values() if j.session == session and (j.ended is None or not running_only)]
        return self.rng.choice(jobs[-20:]) if jobs else None

    def jobs_wait(self, session: str) -> None:
        job = self._some_job(session, running_only=False)
        if job is None:
            return
        self.soak.stats.op("jobs.wait")
        reply = self.ask(
            "jobs.wait", {"session": job.session, "job": job.id, "timeout_ms": self.rng.choice([0, 500, 3000])}
        )
        if reply.ok:
            self.soak.saw_answer(job, reply.result)

    def jobs_cancel(self, session: str) -> None:
        job = self._some_job(session, running_only=True)
        if job is None:
            return
        self.soak.stats.op("jobs.cancel")
        reply = self.ask("jobs.cancel", {"session": job.session, "job": job.id})
        if reply.ok:
            self.soak.saw_answer(job, reply.result)

    def jobs_list(self, session: str) -> None:
        self.soak.stats.op("jobs.list")
        reply = self.ask("jobs.list", {"session": session})
        if reply.ok:
            self.soak.check_rows(reply.result["jobs"])

    # -- cells -----------------------------------------------------------------------------------------------------

    def _cell(self, session: str, code: str, budget_ms: int, cancel_after: float | None = None) -> None:
        registry = self.soak.registry
        started = time.monotonic()
        reply = self.ask(
            "ipython", {"session": session, "code": code, "budget_ms": budget_ms}, cancel_after=cancel_after
        )
        job_id = reply.started_job()
        if reply.ok and reply.result.get("status") == "detached" and job_id is not None:
            info = JobInfo(job_id, session, "", "cell", 0, None, started)
            with registry.lock:
                registry.jobs[job_id] = info

    def cell_short(self, session: str) -> None:
        self.soak.stats.op("cell.short")
        n = self.rng.randint(1, 1000)
        self._cell(session, f"x = sum(range({n}))\nprint('n', {n})\nx", 20_000)

    def cell_long(self, session: str) -> None:
        self.soak.stats.op("cell.long")
        self._cell(
            session,
            f"import time\nprint('L' * {self.rng.randint(1, 5000)})\ntime.sleep({self.rng.uniform(1, 8):.2f})\n1",
            self.rng.choice([0, 200]),
        )

    def cell_cancel_request(self, session: str) -> None:
        self.soak.stats.op("cell.cancel_request")
        self._cell(session, "import time\ntime.sleep(20)", 20_000, cancel_after=self.rng.uniform(0.1, 0.8))

    # -- rewinds ---------------------------------------------------------------------------------------------------

    def _rewind_target(self, session: str) -> tuple[bool, str | None]:
        reply = self.ask("session.show", {"session": session})
        if not reply.ok:
            return False, None
        entries = [e["id"] for e in reply.result["entries"]]
        if not entries or self.rng.random() < 0.2:
            return True, None
        return True, self.rng.choice(entries[-30:])

    def navigate(self, session: str) -> None:
        self.soak.stats.op("tree.navigate")
        ok, target = self._rewind_target(session)
        if not ok:
            return
        reply = self.ask("tree.navigate", {"session": session, "entry": target})
        if reply.ok:
            self.soak.saw_stopped(reply.result["stopped_jobs"])

    def fork(self, session: str) -> None:
        self.soak.stats.op("tree.fork")
        ok, target = self._rewind_target(session)
        if not ok:
            return
        reply = self.ask("tree.fork", {"session": session, "entry": target})
        if not reply.ok:
            return
        fork = reply.result["session"]
        stopped = set(reply.result["stopped_jobs"]) | set(reply.result["stopping_jobs"])
        self.soak.saw_stopped(reply.result["stopped_jobs"])
        registry = self.soak.registry
        with registry.lock:
            for job in registry.jobs.values():
                if job.session == session and job.ended is None and job.id not in stopped:
                    job.session = fork  # a job the fork keeps runs on in the fork (the worker went with it)
        registry.add_session(fork)
        with registry.lock:
            too_many = len(registry.sessions) > 6
            oldest = registry.sessions[0] if too_many else None
        if oldest is not None:
            self.soak.close_session(self.conn, oldest)

    # -- files -----------------------------------------------------------------------------------------------------

    def fs_ops(self, session: str) -> None:
        name = f"c{self.number}-{next(self.files) % 7}.txt"
        words = [f"w{self.rng.randint(0, 99)}" for _ in range(self.rng.randint(1, 40))]
        content = "\n".join(words) + "\n"
        self.soak.stats.op("fs.write")
        reply = self.ask("fs.write", {"session": session, "path": name, "content": content})
        if not reply.ok:
            return
        self.soak.stats.op("fs.read")
        reply = self.ask("fs.read", {"session": session, "path": name})
        if reply.ok and reply.result["output"]["text"] != content:
            # The file is this client's own: nobody else writes it (a fork shares the directory, not the name).
            self.soak.stats.violation("fs_read", f"{session}/{name}: read {reply.result['output']['text'][:80]!r}")
        choice = self.rng.random()
        if choice < 0.4:
            self.soak.stats.op("fs.edit")
            patch = f"*** Begin Patch\n*** Update File: {name}\n-{words[0]}\n+{words[0]}x\n*** End Patch"
            reply = self.ask("fs.edit", {"session": session, "patch": patch})
            if reply.ok:
                again = self.ask("fs.read", {"session": session, "path": name, "limit": 1})
                if again.ok and again.result["output"]["text"] != f"{words[0]}x\n":
                    self.soak.stats.violation("fs_edit", f"{session}/{name}: {again.result['output']['text']!r}")
        elif choice < 0.7:
            self.soak.stats.op("fs.grep")
            self.ask("fs.grep", {"session": session, "pattern": words[0], "glob": "*.txt"})
        else:
            self.soak.stats.op("fs.glob")
            self.ask("fs.glob", {"session": session, "pattern": "**/*.txt"})

    # -- @remote ---------------------------------------------------------------------------------------------------

    def remote_op(self, session: str) -> None:
        """Register a kernel function (now and then: a cell), then call it as a tool: its answer is the sum, or a
        typed error (the kernel may have been killed or restarted in between: not_running, unreachable, unknown)."""
        if self.rng.random() < 0.3:
            self.soak.stats.op("remote.register")
            code = "@rlm.remote\ndef add(a: int, b: int) -> int:\n    return a + b\n"
            self._cell(session, code, 20_000)
        a, b = self.rng.randint(-1000, 1000), self.rng.randint(-1000, 1000)
        self.soak.stats.op("remote.call")
        reply = self.ask("remote.call", {"session": session, "name": "add", "args": {"a": a, "b": b}})
        if not reply.ok:
            return
        if "error" in reply.result and reply.result["error"] is not None:
            self.soak.stats.error(f"remote_{reply.result['error']['kind']}")
        elif reply.result.get("result") != a + b:
            self.soak.stats.violation("remote_call", f"{session}: add({a}, {b}) answered {reply.result!r}")

    # -- children --------------------------------------------------------------------------------------------------

    def children_op(self, session: str) -> None:
        registry = self.soak.registry
        with registry.lock:
            names = sorted(registry.children.get(session, set()))
        choice = self.rng.random()
        if not names or choice < 0.5:
            name = f"k{self.number}x{self.rng.randint(0, 10**6)}"
            workspace = self.rng.choice(["shared", "isolated"])
            self.soak.stats.op(f"children.spawn.{workspace}")
            code = self.rng.choice(
                ["1 + 1", "import time\ntime.sleep(1)\nrlm.answer(42)", "open('child.txt', 'w').write('hi')\n3"]
            )
            reply = self.ask(
                "children.spawn",
                {"session": session, "name": name, "code": code, "workspace": workspace, "timeout_ms": 20_000},
            )
            if reply.ok:
                with registry.lock:
                    registry.children.setdefault(session, set()).add(name)
        elif choice < 0.75:
            self.soak.stats.op("children.collect")
            self.ask("children.collect", {"session": session, "names": None, "timeout_ms": self.rng.choice([0, 2000])})
        else:
            name = self.rng.choice(names)
            self.soak.stats.op("children.delete")
            reply = self.ask("children.delete", {"session": session, "name": name})
            if reply.ok or reply.code == "unknown_child":
                with registry.lock:
                    registry.children.get(session, set()).discard(name)

    # -- the CLI ---------------------------------------------------------------------------------------------------

    def cli_op(self, session: str) -> None:
        registry = self.soak.registry
        if self.rng.random() < 0.5:
            self.soak.stats.op("cli.bash")
            tag = f"{self.soak.tag_prefix}{next(registry.tags)}"
            marker = self.soak.world.markers / tag
            lines = self.rng.choice([1, 100])
            command = f"SOAK_TAG={tag} exec bash -c {shlex.quote(bash_body(lines, marker, 0, False))}"
            args = ["bash", "--session", session, "--json", "--", command]
        else:
            self.soak.stats.op("cli.jobs_list")
            args, tag, lines, marker = ["jobs", "list", "--session", session, "--json"], "", 0, None
        started = time.monotonic()
        try:
            done = subprocess.run(
                [sys.executable, "-m", "eukhe.cli.main", *args],
                capture_output=True,
                text=True,
                timeout=REPLY_TIMEOUT_S,
                check=False,
            )
        except subprocess.TimeoutExpired as error:
            raise NoAnswerError(f"cli {args}") from error
        if "Traceback" in done.stderr:
            self.soak.stats.violation("cli_traceback", done.stderr[-400:])
        try:
            value = json.loads(done.stdout)
        except ValueError:
            self.soak.stats.violation("cli_output", f"{args[:2]} exit {done.returncode}: {done.stdout[:200]!r}")
            return
        if done.returncode != 0:
            self.soak.stats.error(str(value.get("error")))
            if value.get("error") == "internal":
                self.soak.stats.violation("internal", f"cli {args[:2]}: {value}")
            return
        if marker is not None and isinstance(value, dict) and value.get("job"):
            info = JobInfo(value["job"], session, tag, "bash", lines, marker, started)
            with registry.lock:
                registry.jobs[info.id] = info
            self.soak.saw_answer(info, value)


# ---------------------------------------------------------------------------------------------------------------------
# Faults


class Injector(threading.Thread):
    KINDS = ("kill_worker", "kill_supervisor", "kill_kernel", "enospc", "emfile")

    def __init__(self, soak: Soak) -> None:
        super().__init__(name="injector", daemon=True)
        self.soak = soak
        self.rng = random.Random(soak.seed * 1000 + 999)
        self.idle = threading.Event()
        self.idle.set()

    def run(self) -> None:
        soak = self.soak
        kinds = self.kinds()
        while not soak.stopped.is_set():
            wait = self.rng.expovariate(1 / soak.fault_every)
            end = time.monotonic() + wait
            while time.monotonic() < end and not soak.stopped.is_set():
                time.sleep(0.05)
            while soak.paused.is_set() and not soak.stopped.is_set():
                time.sleep(0.05)  # a fault drawn during a round's checks comes after them, not never
            if soak.stopped.is_set():
                continue
            kind = next(kinds)
            self.idle.clear()
            try:
                self.inject(kind)
            finally:
                self.idle.set()

    def kinds(self) -> Iterator[str]:
        """Every kind in turn, each round of them in a new random order (a short run still meets each)."""
        enabled = [k for k in self.KINDS if k != "enospc" or self.soak.world.tmpfs]
        while True:
            self.rng.shuffle(enabled)
            yield from enabled

    def inject(self, kind: str) -> None:
        soak = self.soak
        start = time.monotonic()
        procs = world_processes(soak.world)
        detail = ""
        if kind.startswith("kill_"):
            needle = {
                "kill_worker": "eukhe.daemon.worker",  # or a forked one: f"[{FORKED_WORKER_NAME}]" below
                "kill_supervisor": "eukhe.daemon.supervisor",
                "kill_kernel": "eukhe_kernel",
            }[kind]
            needles = (needle, f"[{FORKED_WORKER_NAME}]") if kind == "kill_worker" else (needle,)
            pids = sorted(pid for pid, cmd in procs.items() if any(n in cmd for n in needles))
            if not pids:
                return
            pid = self.rng.choice(pids)
            detail = str(pid)
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        elif kind == "enospc":
            filler = soak.world.agent / "filler"
            hold = self.rng.uniform(0.5, 3)
            try:
                with open(filler, "wb") as handle, contextlib.suppress(OSError):
                    while True:
                        handle.write(b"\0" * (1 << 20))
                        handle.flush()
                time.sleep(hold)
            finally:
                with contextlib.suppress(OSError):
                    filler.unlink()
        elif kind == "emfile":
            hold = self.rng.uniform(0.5, 3)
            limited: dict[int, tuple[int, int]] = {}
            for pid in procs:
                if "eukhe.daemon" not in procs[pid]:
                    continue
                with contextlib.suppress(OSError):
                    old = resource.prlimit(pid, resource.RLIMIT_NOFILE)
                    used = len(os.listdir(f"/proc/{pid}/fd"))
                    resource.prlimit(pid, resource.RLIMIT_NOFILE, (used + self.rng.randint(0, 3), old[1]))
                    limited[pid] = old
            time.sleep(hold)
            # Restore every daemon process, also the ones started meanwhile (they inherited the low limit).
            for pid in world_processes(soak.world):
                with contextlib.suppress(OSError):
                    resource.prlimit(pid, resource.RLIMIT_NOFILE, limited.get(pid, soak.nofile))
            detail = f"{len(limited)} processes"
        end = time.monotonic()
        soak.stats.faults[kind] += 1
        with soak.registry.lock:
            soak.registry.faults.append(Fault(kind, start, end, detail))


# ---------------------------------------------------------------------------------------------------------------------
# The soak


class Soak:
    def __init__(self, args: argparse.Namespace) -> None:
        self.seed: int = args.seed
        self.tag_prefix = f"{self.seed}.{os.getpid()}-"
        """Every tag of this run starts so: another soak on the machine (CI beside a long run) has its own."""
        self.duration: float = args.seconds if args.seconds is not None else args.minutes * 60
        self.round_s: float = args.round_seconds
        self.min_faults: int = args.min_faults
        self.fault_every: float = args.fault_every
        self.world = make_world(not args.no_tmpfs)
        self.stats = Stats()
        self.registry = Registry()
        self.stopped = threading.Event()
        self.paused = threading.Event()
        self.clients = [Client(n, self) for n in range(args.clients)]
        self.injector = Injector(self)
        self.conn = Connection(self.world)
        self.nofile = resource.getrlimit(resource.RLIMIT_NOFILE)
        self.workspace_numbers = itertools.count(1)
        self.supervisor_baseline: int | None = None
        self.worker_baseline: dict[int, int] = {}
        self.diagnostics_seen: dict[str, int] = {}
        self.last_check = time.monotonic()
        self.journals_read_at = time.monotonic()
        """When the journals were last read (only close rounds read them): a torn line since then is excused by a
        tearing fault since then, not only by one in the last round."""
        self.rounds = 0

    # -- bookkeeping the clients call ----------------------------------------------------------------------------

    def new_workspace(self) -> Path:
        path = self.world.workspaces / f"w{next(self.workspace_numbers)}"
        path.mkdir()
        (path / "README.md").write_text("soak workspace\n")
        if shutil.which("git"):  # a git work tree where git is installed; a plain directory serves as well
            subprocess.run(["git", "init", "-q", str(path)], check=False, capture_output=True)
        return path

    def saw_end(self, job: JobInfo) -> None:
        with self.registry.lock:
            if job.ended is None:
                job.ended = time.monotonic()

    def saw_stopped(self, job_ids: list[str]) -> None:
        with self.registry.lock:
            jobs = [self.registry.jobs[j] for j in job_ids if j in self.registry.jobs]
        for job in jobs:
            self.saw_end(job)

    def saw_answer(self, job: JobInfo, answer: dict[str, Any]) -> None:
        """A Settled answer: the job ended; its counts must be every byte it wrote."""
        if answer.get("status") != "settled" or answer.get("reason") == "forked":
            return  # a `forked` answer is the session forked from's: the job goes on in the fork
        self.saw_end(job)
        with self.registry.lock:
            job.answers.append(answer)
        if job.kind == "bash" and job.marker is not None:
            self.check_output(
                job,
                answer["output"],
                f"answer of {job.id}",
                killed=bool(answer.get("killed")),
                reason=answer.get("reason"),
            )

    def check_output(
        self, job: JobInfo, window: dict[str, Any], where: str, *, killed: bool, reason: str | None = None
    ) -> None:
        """kept + dropped = written: every line when the marker says all was written (or the job exited). A job that
        ended with its host (a reopen recorded it: worker_died, daemon_stopped, host_restart) counts the same: its
        spill file held every byte its host read."""
        assert job.marker is not None
        total = window["bytes_kept"] + window["bytes_dropped"]
        lines = window["lines_kept"] + window["lines_dropped"]
        expected = job.expected()
        complete = job.marker.exists() or not killed
        self.stats.check("kept+dropped")
        short = (total, lines) != (len(expected), job.lines)
        if complete and short:
            ended = f" (ended: {reason})" if reason else ""
            self.stats.violation(
                "kept+dropped", f"{where}{ended}: {total} bytes / {lines} lines, wrote {len(expected)} / {job.lines}"
            )
        elif total > len(expected):
            self.stats.violation("kept+dropped", f"{where}: {total} bytes counted, at most {len(expected)} written")
        artifact = window.get("artifact")
        if artifact:
            try:
                data = Path(artifact).read_bytes()
            except OSError:
                return  # pruned after a check, or a full disk kept it from being written (artifact_error says)
            self.stats.check("artifact")
            if data != expected[: len(data)] or (window["artifact_error"] is None and len(data) != total):
                self.stats.violation("artifact", f"{where}: {len(data)} bytes, {total} counted")

    def check_rows(self, rows: list[dict[str, Any]]) -> None:
        with self.registry.lock:
            known = {row["id"]: self.registry.jobs.get(row["id"]) for row in rows}
        for row in rows:
            job = known[row["id"]]
            if job is None or job.marker is None or row["status"] != "ended" or row.get("reason") == "forked":
                continue
            self.saw_end(job)
            self.check_output(job, row, f"jobs.list row of {job.id}", killed=row["killed"], reason=row.get("reason"))

    def close_session(self, conn: Connection, session: str) -> None:
        started = time.monotonic()
        reply = conn.request("session.close", {"session": session, "force": True})
        took = time.monotonic() - started
        if took >= SLOW_CLOSE_S:
            # The supervisor kills a worker whose close passes its grace (45 s): what it had not written yet (the
            # rows of the jobs it was ending) is lost. Known; reported as such (docs/testing.md), not a violation.
            self.stats.faults["slow_close_killed"] += 1
            with self.registry.lock:
                self.registry.faults.append(Fault("slow_close_killed", started, time.monotonic(), session))
        if reply.ok:
            with self.registry.lock:
                if session in self.registry.sessions:
                    self.registry.sessions.remove(session)
                ended = [j for j in self.registry.jobs.values() if j.session == session and j.ended is None]
            for job in ended:
                self.saw_end(job)

    # -- the run ---------------------------------------------------------------------------------------------------

    def injected(self) -> int:
        """How many faults the injector has made so far."""
        with self.registry.lock:
            return len(self.registry.faults)

    def goes_on(self, elapsed: float) -> bool:
        """Another round: the time is not up, or fewer than --min-faults faults came (a machine under load runs
        fewer operations and faults in the same time); past MIN_FAULTS_WAIT_S more, only a stuck injector, it ends."""
        if elapsed < self.duration:
            return True
        return self.injected() < self.min_faults and elapsed < self.duration + MIN_FAULTS_WAIT_S

    def run(self) -> int:
        from eukhe.daemon.client import start_daemon

        print(
            f"soak: seed {self.seed}, {self.duration:.0f} s, {len(self.clients)} clients, world {self.world.root}"
            f"{' (agent dir on tmpfs)' if self.world.tmpfs else ''}",
            flush=True,
        )
        start_daemon(str(self.world.socket)).close()
        self.supervisor_baseline = self.supervisor_fds_settled(None)
        for _ in range(2):
            reply = self.conn.request("session.create", {"cwd": str(self.new_workspace())})
            if reply.ok:
                self.registry.add_session(reply.result["id"])
        for client in self.clients:
            client.start()
        self.injector.start()
        began = time.monotonic()
        try:
            while self.goes_on(time.monotonic() - began):
                left = self.duration - (time.monotonic() - began)
                time.sleep(max(0.0, min(self.round_s, left)) if left > 0 else self.round_s)
                last = not self.goes_on(time.monotonic() - began)
                try:
                    self.quiesce(final=last)
                except NoAnswerError as error:
                    self.stats.violation("no_answer", f"at a quiesce: {error}")
                    self.paused.clear()
        finally:
            self.stopped.set()
            self.paused.clear()
            for client in self.clients:
                client.join(timeout=REPLY_TIMEOUT_S)
            self.injector.join(timeout=30)
            self.finish()
        return 1 if self.stats.violations else 0

    def pause(self) -> None:
        self.paused.set()
        deadline = time.monotonic() + REPLY_TIMEOUT_S * 2
        while time.monotonic() < deadline and (
            any(c.busy.is_set() for c in self.clients) or not self.injector.idle.is_set()
        ):
            time.sleep(0.05)

    def quiesce(self, *, final: bool) -> None:
        """Pause clients and faults; end every job and child; check the invariants; go on."""
        self.rounds += 1
        self.pause()
        kind = "close" if final or self.rounds % 3 == 0 else ("measure" if self.rounds % 3 == 1 else "compare")
        conn = self.conn
        reply = conn.request("ping")
        if not reply.ok:
            reply = conn.request("ping")  # a supervisor killed just before the pause: this one starts a new one
            if not reply.ok:
                self.stats.violation("daemon_answers", f"ping: {reply.error}")
        with self.registry.lock:
            sessions = list(self.registry.sessions)
        # Every session a worker hosts: also one the pool let go that a late request reopened, and children.
        hosted = sorted(set(self.worker_pids(conn)) | set(sessions))
        for session in hosted:
            self.end_everything(conn, session)
        self.check_procs(all_ended=False)
        if kind in ("measure", "compare"):
            self.check_worker_fds(conn, sessions, compare=kind == "compare")
        else:
            for session in hosted:
                self.close_session(conn, session)
            for session in sessions:
                self.registry.add_session(session)  # still in play: the next request reopens it
            self.check_procs(all_ended=True)
            conn.drop()
            self.supervisor_fds_settled(self.supervisor_baseline)
            self.check_journals(conn)
        self.last_check = time.monotonic()
        self.prune_artifacts()
        print(
            f"soak: round {self.rounds} ({kind}) checked: {sum(self.stats.ops.values())} ops, "
            f"{sum(self.stats.faults.values())} faults, {len(self.stats.violations)} violations",
            flush=True,
        )
        self.paused.clear()

    def end_everything(self, conn: Connection, session: str) -> None:
        reply = conn.request("jobs.list", {"session": session})
        if not reply.ok:
            return
        self.check_rows(reply.result["jobs"])
        for row in reply.result["jobs"]:
            if row["status"] == "running":
                cancel = conn.request("jobs.cancel", {"session": session, "job": row["id"]})
                with self.registry.lock:
                    job = self.registry.jobs.get(row["id"])
                if cancel.ok and job is not None:
                    self.saw_answer(job, cancel.result)
        children = conn.request("children.list", {"session": session})
        if children.ok:
            for child in children.result["children"]:
                conn.request("children.delete", {"session": session, "name": child["name"]})
        with self.registry.lock:
            self.registry.children.pop(session, None)

    # -- checks ----------------------------------------------------------------------------------------------------

    def check_procs(self, *, all_ended: bool) -> None:
        """No process of an ended job is alive (every job has ended when `all_ended`: its sessions closed)."""
        deadline = time.monotonic() + PROC_GRACE_S
        while True:
            tags = {tag: pids for tag, pids in live_tags().items() if tag.startswith(self.tag_prefix)}
            now = time.monotonic()
            with self.registry.lock:
                if all_ended:
                    for job in self.registry.jobs.values():
                        if job.ended is None:
                            job.ended = now
                ended = {j.tag: j for j in self.registry.jobs.values() if j.ended is not None and j.tag}
            alive = {tag: pids for tag, pids in tags.items() if tag in ended or (all_ended and tag)}
            if not alive or time.monotonic() > deadline:
                break
            time.sleep(0.1)
        self.stats.check("procs", len(ended))
        for tag, pids in alive.items():
            job = ended.get(tag)
            detail = ", ".join(f"{pid} {proc_cmdline(str(pid))[:60]}" for pid in pids)
            self.stats.violation("process_alive", f"job {job.id if job else '?'} (tag {tag}) ended: {detail}")
            for pid in pids:
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGKILL)

    def worker_pids(self, conn: Connection) -> dict[str, int]:
        reply = conn.request("status")
        if not reply.ok:
            return {}
        return {row["session"]: row["pid"] for row in reply.result["workers"]}

    def check_worker_fds(self, conn: Connection, sessions: list[str], *, compare: bool) -> None:
        """Each worker in the same state (kernel up, no job, no child) holds the fds it held at the last quiesce."""
        for session in sessions:
            conn.request("ipython", {"session": session, "code": "None", "budget_ms": 20_000})
        conn.drop()
        for session, pid in self.worker_pids(conn).items():
            conn.drop()
            before = self.worker_baseline.get(pid)
            count = settled_fds(pid, before)
            if count is None:
                continue
            if before is None or not compare:
                self.worker_baseline[pid] = count if before is None else min(before, count)
                continue
            self.stats.check("worker_fds")
            if count > before:
                self.stats.violation(
                    "worker_fds",
                    f"worker {pid} of {session}: {count} fds, {before} at the last quiesce: {fd_targets(pid)}",
                )

    def supervisor_pid(self) -> int | None:
        for pid, cmd in world_processes(self.world).items():
            if "eukhe.daemon.supervisor" in cmd:
                return pid
        return None

    def supervisor_fds_settled(self, baseline: int | None) -> int | None:
        """The supervisor's fds with no worker and no client, less its fork server's control socket (a supervisor
        whose fork server could not start, e.g. under EMFILE, starts workers as fresh Pythons and holds none); a
        violation if they do not come back to `baseline`."""
        pid = self.supervisor_pid()
        if pid is None:
            self.stats.violation("daemon_answers", "no supervisor runs at a quiesce")
            return None
        fork = self.fork_server_fds(wait=baseline is None)
        self.conn.drop()
        count = settled_fds(pid, None if baseline is None else baseline + fork)
        if count is None:
            return None
        count -= fork
        if baseline is not None:
            self.stats.check("supervisor_fds")
            if count != baseline:
                procs = world_processes(self.world)
                self.stats.violation(
                    "supervisor_fds",
                    f"supervisor {pid}: {count} fds (less {fork} for a fork server), baseline {baseline}: "
                    f"{fd_targets(pid)}; {procs}",
                )
        return count

    def fork_server_fds(self, *, wait: bool) -> int:
        """1 if the supervisor has a fork server (it holds one socket to it), else 0; with `wait`, give a supervisor
        that just started a few seconds to start its fork server."""
        deadline = time.monotonic() + (FD_SETTLE_S if wait else 0)
        while True:
            reply = self.conn.request("status")
            if reply.ok and reply.result.get("fork_server") is not None:
                return 1
            if time.monotonic() >= deadline:
                return 0
            time.sleep(0.1)

    def check_journals(self, conn: Connection) -> None:
        """Reopen every session (interrupted calls settle, left nodes retire), close it, then read every journal."""
        from eukhe.records.journal import CallSettle, CallStart, DocPut, DocRetire, EntryRecord
        from eukhe.store.journal import read_journal
        from eukhe.store.tree import fold

        with self.registry.lock:
            sessions = sorted(self.registry.known_sessions)
        reopened: set[str] = set()
        for session in sessions:
            reply = conn.request("session.show", {"session": session})
            if reply.ok:
                reopened.add(session)
                conn.request("session.close", {"session": session, "force": True})
            elif reply.code not in ("unknown_session",):
                self.stats.violation("reopen", f"{session}: {reply.code} {reply.error.get('message')}")
        conn.drop()
        rows: dict[str, set[str]] = {}
        row_windows: dict[str, list[dict[str, Any]]] = {}
        read_at = time.monotonic()  # at a quiesce: no fault is injected while the journals are read
        tearing = self.registry.faults_between(
            self.journals_read_at, read_at, {"kill_worker", "kill_supervisor", "enospc", "emfile"}
        )
        self.journals_read_at = read_at
        for directory in sorted(p for p in self.world.sessions.iterdir() if (p / "main.jsonl").exists()):
            name = directory.name
            try:
                read = read_journal(directory / "main.jsonl")
            except Exception as error:
                self.stats.violation("journal_parses", f"{name}: {type(error).__name__}: {error}")
                continue
            self.stats.check("journals")
            skipped = len(read.diagnostics)
            if skipped > self.diagnostics_seen.get(name, 0):
                if tearing:
                    self.stats.excused["torn_line"] += skipped - self.diagnostics_seen.get(name, 0)
                else:
                    self.stats.violation("journal_parses", f"{name}: {[d.reason for d in read.diagnostics]}")
            self.diagnostics_seen[name] = skipped
            forked = read.commits and getattr(read.commits[0].records[0], "forked_from", None) is not None
            starts: Counter[str] = Counter()
            settles: Counter[str] = Counter()
            puts: Counter[str] = Counter()
            retires: Counter[str] = Counter()
            revived: Counter[str] = Counter()
            for commit in read.commits:
                for record in commit.records:
                    if isinstance(record, CallStart):
                        starts[record.call] += 1
                    elif isinstance(record, CallSettle):
                        settles[record.call] += 1
                    elif isinstance(record, DocPut) and record.type == "eukhe.job" and not (forked and commit.seq == 2):
                        if retires[record.key]:  # a node put again after it retired: a job that ended came back
                            revived[record.key] += 1
                        puts[record.key] += 1
                    elif isinstance(record, DocRetire) and record.type == "eukhe.job":
                        retires[record.key] += 1
                    elif (
                        isinstance(record, EntryRecord)
                        and is_bash_row(record.content)
                        and record.content.get("reason") != "forked"  # the fork records the job's end
                    ):
                        job_id = str(record.content.get("job"))
                        rows.setdefault(job_id, set()).add(record.id)
                        row_windows.setdefault(job_id, []).append(record.content)
            for call in set(starts) | set(settles):
                self.stats.check("calls")
                if starts[call] != 1 or settles[call] != 1:
                    self.stats.violation(
                        "calls_twice", f"{name}: call {call}: {starts[call]} starts, {settles[call]} settles"
                    )
            for key in puts | retires:  # a clean stop puts a running job's node again, with its reason
                if revived[key] or retires[key] > 1:
                    self.stats.violation("job_nodes", f"{name}: job {key}: {puts[key]} puts, {retires[key]} retires")
            trees = fold((c.seq, c.records) for c in read.commits)
            left = trees.state().of_type("eukhe.job")
            if left and name in reopened:
                self.stats.violation("job_nodes", f"{name}: job nodes left after reopen and close: {sorted(left)}")
        now = time.monotonic()
        with self.registry.lock:
            jobs = [j for j in self.registry.jobs.values() if j.kind == "bash" and j.marker is not None]
        for job in jobs:
            found = rows.get(job.id, set())
            self.stats.check("rows")
            if len(found) > 1:
                self.stats.violation("rows", f"job {job.id}: {len(found)} eukhe.bash rows")
            elif not found:
                excuse = self.registry.faults_between(
                    job.started, job.ended or now, {"kill_worker", "enospc", "emfile"}
                )
                if excuse:
                    self.stats.excused[f"row_lost_{excuse[0].kind}"] += 1
                else:
                    self.stats.violation("rows", f"job {job.id} of {job.session} (tag {job.tag}) has no eukhe.bash row")
            for content in row_windows.get(job.id, [])[:1]:
                self.check_output(
                    job,
                    content["output"],
                    f"row of {job.id}",
                    killed=bool(content["killed"]),
                    reason=content.get("reason"),
                )
                for answer in job.answers:
                    if (answer["exit_code"], answer["killed"]) != (content["exit_code"], content["killed"]):
                        # The job ended and answered, then its host died before the writer committed its row: the
                        # next open recorded it as ended with its host (as a row lost to the same faults is excused).
                        lost = self.registry.faults_between(
                            job.started, now, {"kill_worker", "kill_supervisor", "enospc", "emfile"}
                        )
                        if content.get("reason") in HOST_ENDS and lost:
                            self.stats.excused[f"row_after_answer_lost_{lost[0].kind}"] += 1
                            continue
                        said = f"answer {answer['exit_code']}/{answer['killed']}"
                        self.stats.violation(
                            "rows", f"job {job.id}: {said}, row {content['exit_code']}/{content['killed']}"
                        )

    def prune_artifacts(self) -> None:
        """Artifacts of checked, ended jobs are removed (a long run would fill the tmpfs with them)."""
        with self.registry.lock:
            done = [j for j in self.registry.jobs.values() if j.ended is not None and not j.artifacts_pruned]
            for job in done:
                job.artifacts_pruned = True
        if not self.world.sessions.exists():
            return
        for path in self.world.sessions.glob("*/artifacts/*.log"):
            if any(f"job-{job.id}-" in path.name for job in done):
                with contextlib.suppress(OSError):
                    path.unlink()

    def finish(self) -> None:
        """Stop the daemon; nothing of this world may outlive it; print the table."""
        from eukhe.daemon.client import DaemonClient

        with contextlib.suppress(OSError), DaemonClient.connect(str(self.world.socket)) as client:
            client._sock.settimeout(30)
            with contextlib.suppress(Exception):
                client.call("stop")
        deadline = time.monotonic() + 30
        while (left := world_processes(self.world)) and time.monotonic() < deadline:
            time.sleep(0.1)
        for pid, cmd in left.items():
            self.stats.violation("process_alive", f"{pid} {cmd[:80]} outlived the daemon stop")
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        self.report()
        if self.stats.violations:  # the daemon's log explains them: kept past the world's removal
            kept = Path(tempfile.gettempdir()) / f"eukhe-soak-{self.seed}-{os.getpid()}-daemon.log"
            with contextlib.suppress(OSError):
                shutil.copyfile(self.world.agent / "daemon.log", kept)
                print(f"soak: the daemon's log is kept in {kept}", flush=True)
        if os.environ.get("SOAK_KEEP"):
            print(f"soak: world kept in {self.world.root}")
            return
        if self.world.tmpfs:
            subprocess.run(["umount", "-l", str(self.world.agent)], check=False, capture_output=True)
        shutil.rmtree(self.world.root, ignore_errors=True)

    def report(self) -> None:
        stats = self.stats
        rows: list[tuple[str, str]] = [("seed", str(self.seed)), ("rounds", str(self.rounds))]
        rows += [(f"op {name}", str(n)) for name, n in sorted(stats.ops.items())]
        rows.append(("operations", str(sum(stats.ops.values()))))
        rows += [(f"fault {name}", str(stats.faults.get(name, 0))) for name in Injector.KINDS]
        rows.append(("worker killed at its close grace", str(stats.faults.get("slow_close_killed", 0))))
        rows += [(f"error reply {code}", str(n)) for code, n in sorted(stats.errors.items())]
        rows += [(f"checked {name}", str(n)) for name, n in sorted(stats.checks.items())]
        rows += [(f"excused {name}", str(n)) for name, n in sorted(stats.excused.items())]
        by_kind = Counter(v.split(":", 1)[0] for v in stats.violations)
        rows += [(f"violation {name}", str(n)) for name, n in sorted(by_kind.items())]
        rows.append(("invariant violations", str(len(stats.violations))))
        width = max(len(name) for name, _ in rows)
        print("-" * (width + 12))
        for name, value in rows:
            print(f"{name:<{width}}  {value:>8}")
        print("-" * (width + 12))
        print(f"replay: uv run python bench/soak.py --seconds {self.duration:.0f} --seed {self.seed}")
        summary = {
            "seed": self.seed,
            "operations": dict(stats.ops),
            "faults": dict(stats.faults),
            "errors": dict(stats.errors),
            "error_examples": stats.examples,
            "checks": dict(stats.checks),
            "excused": dict(stats.excused),
            "violations": stats.violations,
        }
        print("SOAK_SUMMARY " + json.dumps(summary), flush=True)
        report([Target("invariant violations", len(stats.violations), "<=", 0)])
        sys.stdout.flush()


def is_bash_row(content: object) -> bool:
    return isinstance(content, dict) and content.get("notice") == "eukhe.bash"


def settled_fds(pid: int, target: int | None) -> int | None:
    """The process's fd count once it stops falling (or reaches `target`), within FD_SETTLE_S; None if it is gone."""
    deadline = time.monotonic() + FD_SETTLE_S
    last: int | None = None
    steady = 0
    while time.monotonic() < deadline:
        try:
            count = len(os.listdir(f"/proc/{pid}/fd"))
        except OSError:
            return None
        if target is not None and count <= target:
            return count
        steady = steady + 1 if count == last else 0
        last = count
        if target is None and steady >= 5:
            return count
        time.sleep(0.1)
    return last


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--minutes", type=float, default=1.0)
    parser.add_argument("--seconds", type=float, default=None, help="overrides --minutes")
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--clients", type=int, default=4)
    parser.add_argument("--round-seconds", type=float, default=20.0, help="time between quiesces (checks)")
    parser.add_argument("--fault-every", type=float, default=6.0, help="mean seconds between faults")
    parser.add_argument(
        "--min-faults", type=int, default=0, help="go on past the time, round by round, until this many faults came"
    )
    parser.add_argument("--no-tmpfs", action="store_true", help="no tmpfs for the agent dir (no ENOSPC faults)")
    args = parser.parse_args(argv)
    if args.seed is None:
        args.seed = random.SystemRandom().randrange(1, 10**6)
    return Soak(args).run()


if __name__ == "__main__":
    sys.exit(main())
