"""The `Session`: one durable conversation with its tools, jobs and rewinds (S1 store; S2 "A tool call", "Jobs"
4-7; "Local access" 3-4).

Every durable change goes through `commit`: one journal commit, then the in-memory trees fold it, then the job
table observes each entry it holds (the rewind order). The job writer turns job starts and ends into `eukhe.job`
nodes off the callers' path. A rewind (`navigate_tree`, `fork`) kills the jobs started after its target and waits
for their ends at most the blocking budget.

This class hosts user bash and jobs. What the layers above add (the Python kernel, `eukhe.kernel.session_kernel`; the
children, `eukhe.children.family`) are its parts (`SessionPart`): members the session calls at fixed points (a
reopen, a rewind, a fork, the close), given to it when it is made. This layer imports nothing of the kernel.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import logging
import os
import sys
from collections.abc import Awaitable, Callable, Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any, Protocol, Self, TypedDict, TypeVar

import msgspec

from eukhe.clock import Clock
from eukhe.core.job import EndedInTime, deadline_for
from eukhe.core.jobdocs import JOB_DOC_TYPE, JobEnded, JobStarted, WriterEntry
from eukhe.core.jobends import PastJob, StopReason, past_jobs, reopened_ends
from eukhe.core.tty import DEFAULT_COLS, DEFAULT_ROWS, size_problem
from eukhe.errors import CodedError, EukheError, InputError
from eukhe.harness.board import EventStream
from eukhe.harness.harness import Harness
from eukhe.jobs import Job, JobTable, wait_until
from eukhe.jobs.bash import BashOptions, TtySize, bash_and_wait, end_left_group
from eukhe.jobs.tty import attach_to, ended_error, signal_job, type_into, write_to
from eukhe.output import set_artifact_max_bytes
from eukhe.paths import kernel_venv_dir
from eukhe.private_fs import check_working_dir
from eukhe.procs import boot_id
from eukhe.records.jobs import Detached, JobDocument, JobRow, Rewound, Settled
from eukhe.records.journal import (
    JOURNAL_FORMAT,
    Commit,
    DocPut,
    EntryRecord,
    ForkOrigin,
    JournalRecord,
    LeafRecord,
    SessionHeader,
)
from eukhe.records.network import NetworkLog
from eukhe.records.output import OutputWindow
from eukhe.records.sandbox import UNCONFINED, SandboxChoice, SandboxPolicy
from eukhe.records.settings import KernelTransport, ResourceLimits, SessionSettings
from eukhe.records.tty import Attached, InputTaken, Signalled, TtyOutput, Written
from eukhe.sandbox.bwrap import available
from eukhe.sandbox.confine import Confinement, check_composition, choose
from eukhe.sandbox.group import Confine
from eukhe.session.files import SessionFiles
from eukhe.session.history import (
    EndRow,
    end_row,
    forked_row,
    history_facts,
    left_node,
    past_answer,
    past_row,
    reopened_row,
)
from eukhe.session.refusals import with_refusal
from eukhe.session.settings import load_artifact_max_bytes, load_limits, load_settings, model_key_variable
from eukhe.session.writer import JobWriter
from eukhe.store import dirs
from eukhe.store.journal import Journal, JournalError, JournalRead
from eukhe.store.ledger import Ledger
from eukhe.store.tree import Entry, StateView, UnknownEntryError, state_after

JSON = Any

log = logging.getLogger("eukhe.session")


class FromSettings(enum.Enum):
    """Take it from the settings files (a sentinel, never None: None says Local)."""

    FROM_SETTINGS = "from settings"


FROM_SETTINGS = FromSettings.FROM_SETTINGS
StartListener = Callable[[str], None]
"""Hears the id of a call's job as soon as it runs (a cancel or a later wait names it)."""
LiveListener = Callable[[Job], None]
"""Hears the job that holds a call's output while it runs (its row and output so far are its progress)."""


def _heard(job: Job, on_start: StartListener | None, on_live: LiveListener | None) -> None:
    if on_start is not None:
        on_start(job.id)
    if on_live is not None:
        on_live(job)


class SessionPart(Protocol):
    """What a layer above adds to a session (its kernel, its children): a member the session calls at fixed points."""

    def after_reopen(self) -> None:
        """A saved session reopened, its interrupted calls settled (the kernel reaps what an old kernel left)."""
        ...

    def rewinding(self, entry_id: str | None) -> Callable[[], None]:
        """The leaf moves back to `entry_id` (a rewind or a fork; the target is checked, nothing changed yet):
        what to do once the session's own jobs are stopped."""
        ...

    def records_left_behind(self, fork_id: str) -> list[JournalRecord]:
        """What fork `fork_id` takes over from this part, as records of the session it leaves (`_leave_behind`)."""
        ...

    async def close(self) -> None:
        """The session closes: end what the part hosts, after the session's jobs were stopped."""
        ...


PartsMaker = Callable[["Session"], Sequence[SessionPart]]
"""Makes a session's parts once the session itself is made (they hold it); called in the session's constructor."""

_Part = TypeVar("_Part", bound=SessionPart)


class SessionMade(TypedDict):
    """What a session is made of (its constructor's arguments besides its parts): for the classes that give it
    their parts (`eukhe.kernel.session_kernel.KernelSession`, `eukhe.children.family.AgentSession`)."""

    root: Path
    directory: Path
    ledger: Ledger
    cwd: Path
    clock: Clock | None
    bash_options: BashOptions | None


class UnknownJobError(EukheError, KeyError):
    """A jobs call names a job this session does not have."""

    code = "unknown_job"

    def __init__(self, job_id: str) -> None:
        super().__init__(f"no job {job_id!r} in this session")
        self.job_id = job_id

    def __str__(self) -> str:
        return str(self.args[0])


class SessionClosedError(EukheError):
    """The session was closed; open it again to go on."""

    code = "session_closed"


class SessionHasJobsError(CodedError):
    """A close or delete without force found jobs running (`details["jobs"]` names them); nothing was changed."""

    def __init__(self, session_id: str, jobs: Sequence[str], what: str = "close") -> None:
        super().__init__(
            "session_has_jobs",
            f"session {session_id} has running jobs ({', '.join(jobs)}): {what} it with force to kill them",
            details={"jobs": list(jobs)},
        )
        self.jobs = list(jobs)


def job_document(job: Job, boot: str | None = None) -> JobDocument:
    """The `eukhe.job` node's value: what the prompt and a reader need to name the job, the boot its host runs in,
    and the clean stop its host began (a reopen reads why the job ended from these)."""
    group = job.spec.group
    return JobDocument(
        kind=job.spec.kind,
        command=job.spec.command,
        started_ms=job.started_ms,
        boot_id=boot,
        stop_reason=job.stop_reason,
        process_group=None if group is None else group.group,
        process_start=None if group is None else group.leader_start,
        process_mark=None if group is None else group.mark,
    )


class SessionJobs:
    """`jobs.list`, `jobs.wait`, `jobs.cancel` on a session; every wait is `wait_until` within the budget."""

    def __init__(self, session: Session) -> None:
        self._session = session

    def _job(self, job_id: str) -> Job | PastJob[EndRow]:
        job = self._session.job_table.get(job_id)
        if job is not None:
            return job
        past = self._session.past_jobs.get(job_id)
        if past is None:
            raise UnknownJobError(job_id)
        return past

    def list(self) -> list[JobRow]:
        """Every job this session ever ran, in start order: those of its earlier lives (as its journal holds them),
        then this life's."""
        table = self._session.job_table
        past = [past_row(job) for job_id, job in self._session.past_jobs.items() if table.get(job_id) is None]
        return past + [job.row() for job in table.jobs()]

    async def wait(self, job_id: str, timeout_ms: int | None = None) -> Settled | Detached:
        """Wait for the job's end at most `timeout_ms` (and at most the blocking budget). Cancelling the wait leaves
        the job alone. A job of an earlier life answers its recorded end at once."""
        job = self._job(job_id)
        if isinstance(job, PastJob):
            return past_answer(job)
        now = job.clock.now_ms()
        deadline = deadline_for(now, timeout_ms, self._session.budget_ms)
        return self._session.with_notices(job.answer(await wait_until(job, deadline), deadline - now))

    async def cancel(self, job_id: str) -> Settled | Detached:
        """Kill the job through its owner and wait for its end at most the blocking budget. A job of an earlier life
        ended with it: its recorded end, at once."""
        job = self._job(job_id)
        if isinstance(job, PastJob):
            return past_answer(job)
        job.kill()
        now = job.clock.now_ms()
        deadline = deadline_for(now, None, self._session.budget_ms)
        return self._session.with_notices(job.answer(await wait_until(job, deadline), deadline - now))

    def _live(self, job_id: str) -> Job:
        """A job of this life; one of an earlier life has ended: `job_ended`, saying how."""
        job = self._job(job_id)
        if isinstance(job, PastJob):
            row = job.end
            raise ended_error(
                job_id,
                None if row is None else row.exit_code,
                False if row is None else row.killed,
                None if row is None else row.reason,
            )
        return job

    async def write(self, job_id: str, text: str, budget_ms: int | None = None) -> Written | Settled:
        """Write `text` to a tty job's terminal (control characters too: "\u0003" is Ctrl-C, "\u0004" end of
        file); answer with the output since the previous answer once it is quiet, the program idle or the budget
        (at most the session's) passed; settled if the job ended. `job_has_no_terminal` for a job without one,
        `job_ended` for one that ended."""
        job = self._live(job_id)
        deadline = deadline_for(job.clock.now_ms(), budget_ms, self._session.budget_ms)
        return await write_to(job, text, deadline)

    async def input(self, job_id: str, text: str) -> InputTaken:
        """Type `text` into a tty job's terminal without waiting for its output (an attached person's keys)."""
        job = self._live(job_id)
        deadline = deadline_for(job.clock.now_ms(), None, self._session.budget_ms)
        return InputTaken(job=job.id, input_bytes=await type_into(job, text, deadline))

    async def attach(
        self, job_id: str, emit: Callable[[TtyOutput], None], drain: Callable[[], Awaitable[None]]
    ) -> Attached:
        """Stream a tty job's terminal to `emit` (its screen now, then its output) until it ends."""
        return await attach_to(self._live(job_id), emit, drain)

    def signal(self, job_id: str, name: str) -> Signalled:
        """Send a signal (INT, TERM, HUP, QUIT, KILL, USR1, USR2, WINCH) to the job's process group."""
        return signal_job(self._live(job_id), name)


def _user_limits() -> tuple[ResourceLimits, tuple[str, ...]]:
    """The user's `limits`, and what to say when the settings file cannot give them (the defaults then hold)."""
    try:
        return load_limits(), ()
    except InputError as error:
        return ResourceLimits(), (f"{error}: the default limits hold",)


class Session:
    """An open session. Make one with `await Session.create(...)` or `await Session.open(...)`; `await close()`."""

    def __init__(
        self,
        *,
        root: Path,
        directory: Path,
        ledger: Ledger,
        cwd: Path,
        clock: Clock | None,
        bash_options: BashOptions | None,
        parts: PartsMaker | None = None,
    ) -> None:
        self.root = root
        self.dir = directory
        self._ledger = ledger
        self.cwd = cwd
        header = ledger.trees.header
        self.settings = header.settings if header is not None else SessionSettings()
        policy = header.sandbox if header is not None and header.sandbox is not None else UNCONFINED
        limits, limits_said = _user_limits()
        self.sandbox = Confinement(
            policy, cwd=cwd, session_dir=directory, readable=self._sandbox_readable(), limits=limits.to_core()
        )
        self.job_table = JobTable(clock)
        ledger.entry_listeners.append(self.job_table.observe)
        self._bash_options = bash_options or BashOptions()
        self.harness = Harness(
            self,
            lambda: self.settings.bound,
            self.artifact_dir,
            job_ids=self.job_table.new_id,
            before_settle=lambda: self.writer.idle(sync=False),
        )
        self.jobs = SessionJobs(self)
        self.files = SessionFiles(self)
        self.writer = JobWriter(self.commit, self.entry_record, self._job_nodes, on_start_lost=self._start_lost)
        self._unsubscribe = self.job_table.subscribe(self)
        self._closed = False
        self.last_read: JournalRead | None = None  # what the reopen read: its commits and skipped lines
        self.boot_id = boot_id()  # this boot of the machine: each job node records it
        self.notices: tuple[str, ...] = limits_said
        """What the settings files said when this session was made (each also a `settings` notice entry)."""
        self.past_jobs: dict[str, PastJob[EndRow]] = {}  # the jobs of earlier lives, by id (read at open)
        self._stop_reason: StopReason | None = None
        self.parts: tuple[SessionPart, ...] = () if parts is None else tuple(parts(self))
        """What the layers above add (their order: a reopen and a rewind call them in it, the close in reverse)."""

    # ---- open, create, close -------------------------------------------------------------------------------------

    @classmethod
    async def create(
        cls,
        cwd: str | os.PathLike[str] | None,
        *,
        settings: SessionSettings | None = None,
        session_id: str | None = None,
        root: Path | None = None,
        clock: Clock | None = None,
        bash_options: BashOptions | None = None,
        kernel_transport: KernelTransport | FromSettings | None = FROM_SETTINGS,
        sandbox: SandboxPolicy | SandboxChoice | None = None,
        parts: PartsMaker | None = None,
    ) -> Self:
        """A new session in `cwd` (which must name an existing directory: the spec's three refusals).

        Its settings are `settings`, else the user's and the project's settings files over the defaults; its kernel
        transport is the user settings file's (`kernel_transport`), unless `kernel_transport` names one here. Its
        sandbox policy is `sandbox`, else the settings files' (a `SandboxChoice` sets only its mode or network over
        them); bwrap is probed first, and a session whose confinement cannot work is not made
        (`sandbox_unavailable`). A settings file that does not decode is refused (`bad_setting`, naming the file
        and the key). `parts` makes what the layers above add (None: the class's own)."""
        working = check_working_dir(cwd)
        loaded = load_settings(working)
        set_artifact_max_bytes(loaded.artifact_max_bytes)  # the user's cap, for every artifact of this process
        transport = loaded.kernel_transport if isinstance(kernel_transport, FromSettings) else kernel_transport
        policy = sandbox if isinstance(sandbox, SandboxPolicy) else choose(loaded.sandbox, sandbox)
        check_composition(policy, transport)
        if policy.confined:
            available()  # sandbox_unavailable before anything is made
        base = dirs.resolve_root(root)
        sid = session_id or dirs.new_session_id()
        directory = dirs.create_session_dir(base, sid)
        ledger = Ledger.create(directory / dirs.JOURNAL_NAME)
        header = SessionHeader(
            format=JOURNAL_FORMAT,
            id=sid,
            cwd=str(working),
            settings=settings or loaded.settings,
            kernel_transport=transport,
            sandbox=policy,
        )
        notices = [
            ledger.entry_record("notice", {"notice": "settings", "message": text}) for text in loaded.diagnostics
        ]
        for text in loaded.diagnostics:
            sys.stderr.write(f"eukhe: {text}\n")
        try:
            ledger.commit([header])
            if notices:
                ledger.commit(notices)
        except BaseException:  # e.g. a full disk: the journal's descriptor is not leaked
            ledger.close()
            raise
        session = cls(
            root=base,
            directory=directory,
            ledger=ledger,
            cwd=working,
            clock=clock,
            bash_options=bash_options,
            parts=parts,
        )
        session.notices = loaded.diagnostics
        session._start_or_close()
        session.writer.start()
        return session

    @classmethod
    async def open(
        cls,
        session_id: str,
        *,
        cwd: str | os.PathLike[str] | None = None,
        root: Path | None = None,
        clock: Clock | None = None,
        bash_options: BashOptions | None = None,
        parts: PartsMaker | None = None,
    ) -> Self:
        """Reopen a saved session: read its journal once (a torn last line is skipped with a diagnostic), retire the
        job nodes the old process left (their rows recorded), settle the calls a crash interrupted from what is
        durable (the end of the job a call ran, else its artifact), then let each
        part do what a reopen asks of it. `parts` as for `create`."""
        with contextlib.suppress(InputError):  # a settings file that does not decode keeps the cap in force
            set_artifact_max_bytes(load_artifact_max_bytes())
        base = dirs.resolve_root(root)
        directory = dirs.open_session_dir(base, session_id)
        ledger, read = Ledger.load(directory / dirs.JOURNAL_NAME)
        header = ledger.trees.header
        try:
            if header is None:
                raise dirs.UnknownSessionError(session_id, base)
            working = check_working_dir(cwd if cwd is not None else header.cwd)
        except BaseException:
            ledger.close()
            raise
        session = cls(
            root=base,
            directory=directory,
            ledger=ledger,
            cwd=working,
            clock=clock,
            bash_options=bash_options,
            parts=parts,
        )
        session.last_read = read
        session._start_or_close(
            session._end_leftover_jobs,
            session._read_past_jobs,
            lambda: session.harness.settle_interrupted(ledger.trees.slots, session._past_end),
            *(part.after_reopen for part in session.parts),
        )
        session.writer.start()
        return session

    def _start_or_close(self, *steps: Callable[[], object]) -> None:
        """Start the sandbox (sandbox_unavailable: the session does not open), then `steps` in order; if any fails
        (a commit on a full disk), nothing runs yet, so only the journal and the sandbox are open: both are closed
        (the sandbox's groups removed, its tmpfs released with its content kept), the error raised."""
        try:
            self.sandbox.start()
            for step in steps:
                step()
        except BaseException:
            self._unsubscribe()
            self._ledger.close()
            with contextlib.suppress(Exception):  # the first error is the one to raise
                self.sandbox.close()
            raise

    def _end_leftover_jobs(self) -> None:
        """The jobs whose nodes the history left ended with their host: end what is left of each one's process group
        (if it is still the job's), retire each node and record its row (killed, why, the output its artifact holds),
        in one commit."""
        nodes = self.view_state().of_type(JOB_DOC_TYPE)
        if not nodes:
            return
        records: list[JournalRecord] = []
        left = [left_node(job, value) for job, value in nodes.items()]
        for node in left:  # recorded as ended below: so each one is, if its group is still the job's
            if node.group is not None and end_left_group(node.group, node.boot, self.boot_id):
                log.warning("job %s: its host died and left its process group %d: killed", node.job, node.group.group)
        for end in reopened_ends(left, self.boot_id):
            retire, row = reopened_row(end, nodes[end.job], self.artifact_dir, self.settings.truncation)
            records += [retire, self.entry_record("notice", row)]
        self.commit(records)

    def _past_end(self, job_id: str) -> tuple[OutputWindow, JSON] | None:
        """A job of an earlier life that ended: its output and its answer (how a call it ran is settled)."""
        past = self.past_jobs.get(job_id)
        if past is None or past.end is None:
            return None
        answer = past_answer(past)
        return answer.output, answer.to_json()

    def _read_past_jobs(self) -> None:
        """The jobs of earlier lives, from the journal (a new job never takes one of their ids)."""
        facts = history_facts(record for _, records in self._ledger.commits for record in records)
        self.past_jobs = {job.job: job for job in past_jobs(facts)}
        self.job_table.reserve(self.past_jobs)

    async def begin_stop(self, reason: StopReason) -> None:
        """A clean stop of the host begins (`daemon_stopped`, `session_closed`): record it on every running job's
        node before anything kills it, so a job still ending when the process ends is recorded with this reason by
        the next open; the jobs it kills end with it. The first stop's reason stays."""
        if self._stop_reason is not None:
            return
        self._stop_reason = reason
        for job in self.job_table.running():
            job.stop_reason = reason
        await self.writer.idle()  # every started job's node is committed (or its start and end wrote nothing)
        nodes = self._job_nodes()
        marks: list[JournalRecord] = [
            DocPut(type=JOB_DOC_TYPE, key=job.id, value=msgspec.to_builtins(job_document(job, self.boot_id)))
            for job in self.job_table.running()
            if job.id in nodes
        ]
        if marks:
            try:
                self.commit(marks)
            except JournalError as error:  # a full disk: the stop goes on; a reopen reads worker_died instead
                sys.stderr.write(f"eukhe: could not record the stop on the running jobs: {error.reason}\n")

    async def close(self, *, force: bool = True) -> None:
        """Record the stop on the running jobs (`session_closed`, unless a stop began with another reason), abort the
        running tool calls (each settles), kill every running job (waiting at most the budget), close what the
        session hosts, commit what the writer holds, close the journal. With `force=False` a session with running
        jobs is not closed: SessionHasJobsError (`session_has_jobs`) names them."""
        if self._closed:
            return
        self._refuse_while_jobs_run(force, "close")
        self._closed = True
        # Every step runs whatever failed before it (a call's settle on a full disk): the jobs are always killed and
        # the journal always closed. The steps run last pushed first.
        async with contextlib.AsyncExitStack() as steps:
            steps.callback(self._ledger.close)
            steps.callback(self.sandbox.close)
            steps.callback(self._unsubscribe)
            steps.push_async_callback(self.writer.close)
            for part in self.parts:  # closed in reverse: a later part builds on the earlier ones
                steps.push_async_callback(part.close)
            steps.push_async_callback(self._quit_jobs)
            await self.begin_stop("session_closed")
            await self.harness.abort_all()

    async def _quit_jobs(self) -> None:
        """Kill every running job; wait for their ends at most the blocking budget."""
        clock = self.job_table.clock
        await self.job_table.quit(deadline_for(clock.now_ms(), None, self.budget_ms))

    async def delete(self, *, force: bool = False) -> list[str]:
        """Close the session (its kernel and jobs end), then remove its directory (journal and artifacts) and its
        workspaces (its isolated children's copies); the paths removed. Refused while jobs run unless `force`
        (SessionHasJobsError, and nothing is changed); `force` kills them as a rewind would."""
        self._refuse_while_jobs_run(force, "delete")
        await self.close()
        return dirs.remove_session(self.root, self.id)

    def _refuse_while_jobs_run(self, force: bool, what: str) -> None:
        running = [job.id for job in self.job_table.running()]
        if running and not force:
            raise SessionHasJobsError(self.id, running, what)

    def part(self, kind: type[_Part]) -> _Part:
        """This session's part of type `kind` (LookupError when it has none)."""
        for part in self.parts:
            if isinstance(part, kind):
                return part
        raise LookupError(f"session {self.id} has no {kind.__name__}")

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        await self.close()

    # ---- identity and settings -----------------------------------------------------------------------------------

    @property
    def id(self) -> str:
        """The session id (after a fork: the fork's)."""
        header = self._ledger.trees.header
        return header.id if header is not None else self.dir.name

    @property
    def header(self) -> SessionHeader | None:
        """The session header the journal holds."""
        return self._ledger.trees.header

    @property
    def kernel_transport(self) -> KernelTransport | None:
        """The kernel transport the session started with (None: Local)."""
        header = self._ledger.trees.header
        return header.kernel_transport if header is not None else None

    @property
    def journal(self) -> Journal:
        """The journal the session commits to (tests observe its commits)."""
        return self._ledger.journal

    @property
    def artifact_dir(self) -> Path:
        """Where BoundedOutput artifacts of this session go."""
        return self.dir / dirs.ARTIFACTS_NAME

    @property
    def budget_ms(self) -> int:
        """The blocking budget, `tool_blocking_budget_ms`."""
        return self.settings.tool_blocking_budget_ms

    @property
    def closed(self) -> bool:
        """Whether `close` was called."""
        return self._closed

    # ---- commits -------------------------------------------------------------------------------------------------

    def entry_record(self, kind: str, content: JSON) -> EntryRecord:
        """A new entry record; its parent is set at commit time to the leaf it follows."""
        return self._ledger.entry_record(kind, content)

    def commit(self, records: Sequence[JournalRecord], *, sync: bool = True) -> Commit:
        """One durable commit (`sync=False`: durable with the next one, see `Journal.commit`); then the trees fold it
        and the job table observes each entry (the rewind order)."""
        return self._ledger.commit(records, sync=sync)

    def check_open(self) -> None:
        """SessionClosedError once the session is closed."""
        if self._closed:
            raise SessionClosedError(f"session {self.id} is closed")

    def append(self, kind: str, content: JSON) -> Entry:
        """Append a conversation entry (user, assistant, notice) at the leaf; it becomes the leaf."""
        self.check_open()
        record = self.entry_record(kind, content)
        self.commit([record])
        return self._ledger.trees.entries[record.id]

    # ---- reading -------------------------------------------------------------------------------------------------

    @property
    def leaf(self) -> str | None:
        """The current leaf entry (None: before every entry)."""
        return self._ledger.trees.leaf

    def network(self) -> NetworkLog:
        """The connections the session's network allowlist saw (its proxy's record, oldest first: each name, port,
        verdict, bytes each way and time); none unless the policy's network is `allowlist`."""
        return NetworkLog(network=self.sandbox.policy.network, attempts=self.sandbox.network_attempts())

    def entries(self) -> list[Entry]:
        """Every entry, in commit order."""
        return [self._ledger.trees.entries[entry_id] for entry_id in self._ledger.trees.order]

    def entry(self, entry_id: str) -> Entry:
        """One entry by id."""
        found = self._ledger.trees.entries.get(entry_id)
        if found is None:
            raise UnknownEntryError(entry_id)
        return found

    def branch(self) -> list[Entry]:
        """The entries from the root to the leaf."""
        return self._ledger.trees.path_to(self._ledger.trees.leaf)

    def view_state(self) -> StateView:
        """The committed state: documents and tool call slots (a running call's slot has no output)."""
        return self._ledger.trees.state()

    def state_after(self, entry_id: str | None) -> StateView:
        """The committed state just after the commit that holds `entry_id` (None: before every entry)."""
        return state_after(self._ledger.commits, entry_id)

    def _job_nodes(self) -> frozenset[str]:
        return frozenset(key for (kind, key) in self._ledger.trees.documents if kind == JOB_DOC_TYPE)

    def watch_events(self) -> EventStream:
        """Live observer of tool call progress (see `Harness.watch_events`)."""
        return self.harness.watch_events()

    def system_prompt(self) -> str:
        """The system prompt; section `running-jobs` (count and ids of the job nodes) exactly while one runs."""
        lines = [f"Working directory: {self.cwd}", f"Session: {self.id}"]
        nodes = self.view_state().of_type(JOB_DOC_TYPE)
        if nodes:
            lines.append(f'<running-jobs count="{len(nodes)}">')
            for job_id in sorted(nodes):
                value = nodes[job_id] if isinstance(nodes[job_id], Mapping) else {}
                lines.append(f"{job_id} {value.get('kind', 'job')}: {value.get('command', '')}")
            lines.append("</running-jobs>")
        return "\n".join(lines) + "\n"

    # ---- the job table's listener --------------------------------------------------------------------------------

    def job_started(self, job: Job) -> None:
        """JobListener: a start becomes a node (through the writer; nobody waits)."""
        job.stop_reason = self._stop_reason  # a job started once a stop began is stopped by it too
        self.sandbox.limits.job_started(job.id)  # its answer is judged by what the session's groups count after
        self.writer.submit(JobStarted(job.id, msgspec.to_builtins(job_document(job, self.boot_id))))

    def _start_lost(self, job_id: str) -> None:
        """A job whose start record could not be committed (a full disk) is killed at once: without its node, a
        reopen after a crash could not end its process group, which would outlive its dead host."""
        job = self.job_table.get(job_id)
        if job is not None:
            job.kill()

    def job_ended(self, job: Job, end: object) -> None:
        """JobListener: an end retires the node and records the job's row (`eukhe.bash` for a user-bash run,
        `eukhe.job_end` for any other job)."""
        self.writer.submit(JobEnded(job.id))
        self.writer.submit(WriterEntry("notice", msgspec.to_builtins(end_row(job))))

    # ---- user bash -----------------------------------------------------------------------------------------------

    def bash_confinement(self) -> Confine | None:
        """How this session's bash jobs are confined (None: the policy is off)."""
        if not self.sandbox.confined:
            return None
        sandbox = self.sandbox
        return lambda argv, info_fd: sandbox.wrap(argv, info_fd=info_fd)

    def launch_environment(self, host: Mapping[str, str] | None = None) -> dict[str, str]:
        """What a job or kernel of this session gets of the host's environment (`host`, else this process's): under
        a confined policy, no variable that looks like a secret (the model key the daemon holds for prompt children
        included, whatever its name) unless `sandbox.env_passthrough` names it (docs/sandbox.md)."""
        variable = model_key_variable() if self.sandbox.confined else None  # unconfined, nothing is held back
        return self.sandbox.environment(
            os.environ if host is None else host, held=() if variable is None else (variable,)
        )

    def _sandbox_readable(self) -> list[Path]:
        """What a confined process reads of eukhe's own directories: this session's artifacts, the kernel venv."""
        return [self.artifact_dir, kernel_venv_dir()]

    async def execute_bash_and_wait(
        self,
        command: str,
        budget_ms: int | None = None,
        *,
        on_start: StartListener | None = None,
        on_live: LiveListener | None = None,
        job_id: str | None = None,
        tty: bool = False,
        cols: int | None = None,
        rows: int | None = None,
    ) -> Settled | Detached:
        """Run `command` as a job (`job_id`: the id it takes when free); settled within the budget, else detached
        with the output so far (the job goes on; its end records its `eukhe.bash` row). `on_start` hears the job's
        id as soon as it runs, `on_live` the job itself (its output so far). Cancelling the call kills the job
        through its owner (waiting for its end at most the budget), then re-raises. With `tty`, on a
        pseudo-terminal of `cols` x `rows` (120 x 40 by default), which `jobs.write` writes to."""
        self.check_open()
        size = None
        if tty:
            size = TtySize(cols or DEFAULT_COLS, rows or DEFAULT_ROWS)
            problem = size_problem(size.cols, size.rows)
            if problem is not None:
                raise InputError("usage_error", problem, field="cols" if problem.startswith("cols") else "rows")
        answer = await bash_and_wait(
            command,
            self.cwd,
            truncation=self.settings.bound,
            artifact_dir=self.artifact_dir,
            table=self.job_table,
            budget_ms=self.budget_ms,
            timeout_ms=budget_ms,
            options=self._bash_options,
            on_start=lambda job: _heard(job, on_start, on_live),
            env=self.launch_environment(),
            confine=self.bash_confinement(),
            job_id=job_id,
            tty=size,
        )
        return await self.recorded(answer)

    def with_notices(self, answer: Settled | Detached) -> Settled | Detached:
        """The answer with what the sandbox undid since the last answer (git state a confined command left), and
        for a failed run, the sandbox's refusal that made it fail (`eukhe.session.refusals`)."""
        notices = self.sandbox.notices()
        answer = msgspec.structs.replace(answer, notices=[*answer.notices, *notices]) if notices else answer
        return with_refusal(self.sandbox, answer, cells=self.kernel_transport is None)

    async def recorded(self, answer: Settled | Detached) -> Settled | Detached:
        """An answer that names a running job (detached, or the job of what its shell left running) goes back once
        that job's node is committed: a caller who holds the job id finds the job in the journal after any crash.
        Cancelled meanwhile: the job is killed, as a cancelled call's job is. The sandbox's notices go with it."""
        answer = self.with_notices(answer)
        running = answer.job if isinstance(answer, Detached) else answer.left_running
        if running is not None:
            try:
                await self.writer.idle()
            except asyncio.CancelledError:
                job = self.job_table.get(running)
                if job is not None:
                    job.kill()
                raise
        return answer

    # ---- rewind --------------------------------------------------------------------------------------------------

    def _check_target(self, entry_id: str | None) -> None:
        self.check_open()
        if entry_id is not None and entry_id not in self._ledger.trees.entries:
            raise UnknownEntryError(entry_id)

    async def _stop(self, killed: Sequence[Job]) -> tuple[list[str], list[str]]:
        clock = self.job_table.clock
        deadline = deadline_for(clock.now_ms(), None, self.budget_ms)
        stopped: list[str] = []
        stopping: list[str] = []
        for job in killed:
            verdict = await wait_until(job, deadline)
            (stopped if isinstance(verdict, EndedInTime) else stopping).append(job.id)
        return stopped, stopping

    async def navigate_tree(self, entry_id: str | None) -> Rewound:
        """Move the leaf to `entry_id` (None: before every entry) and stop the jobs started after it; then each part
        does what the rewind asks of it."""
        self._check_target(entry_id)
        then = [part.rewinding(entry_id) for part in self.parts]
        self.commit([LeafRecord(id=entry_id)])
        killed = self.job_table.rewind_to(entry_id)
        stopped, stopping = await self._stop(killed)
        for after in then:
            after()
        return Rewound(session=self.id, parent=None, leaf=entry_id, stopped_jobs=stopped, stopping_jobs=stopping)

    async def fork(self, entry_id: str | None, *, session_id: str | None = None) -> Rewound:
        """A new session holding the branch up to `entry_id` (written through a private staging dir), which this
        object continues in; the jobs started after the entry are stopped, the others keep running there. Each part
        does what the fork asks of it (as for a rewind)."""
        self._check_target(entry_id)
        then = [part.rewinding(entry_id) for part in self.parts]
        await self.writer.idle()  # the rows of jobs that ended before the fork belong to this session's journal
        # The fork is written first: if it cannot be (a full disk), no job was killed and nothing changed.
        killed = self.job_table.orphans_of(entry_id)
        killed_ids = {job.id for job in killed}
        parent = self.id
        sid = session_id or dirs.new_session_id()
        header = SessionHeader(
            format=JOURNAL_FORMAT,
            id=sid,
            cwd=str(self.cwd),
            settings=self.settings,
            forked_from=ForkOrigin(session=parent, entry=entry_id),
            kernel_transport=self.kernel_transport,
            sandbox=self.sandbox.policy,
        )
        copied: list[JournalRecord] = [
            EntryRecord(id=entry.id, parent=entry.parent, kind=entry.kind, content=entry.content)  # type: ignore[arg-type]
            for entry in self._ledger.trees.path_to(entry_id)
        ]
        carried: list[JournalRecord] = [
            DocPut(type=doc_type, key=key, value=value)
            for (doc_type, key), value in self.state_after(entry_id).documents.items()
            if doc_type != JOB_DOC_TYPE
        ]
        kept: list[JournalRecord] = [
            DocPut(type=JOB_DOC_TYPE, key=job_id, value=value)
            for job_id, value in self.view_state().of_type(JOB_DOC_TYPE).items()
            if job_id not in killed_ids and (job := self.job_table.get(job_id)) is not None and job.running
        ]
        commits: list[list[JournalRecord]] = [[header], [*copied, LeafRecord(id=entry_id), *carried, *kept]]
        directory = dirs.write_staged_session(self.root, sid, commits)
        self._leave_behind(sid)
        self._switch_to(directory)
        for job in killed:
            job.kill()
        stopped, stopping = await self._stop(killed)
        for after in then:
            after()
        return Rewound(session=sid, parent=parent, leaf=entry_id, stopped_jobs=stopped, stopping_jobs=stopping)

    def _leave_behind(self, fork_id: str) -> None:
        """Commit to this session's own journal what the fork takes over from it (its jobs, and what each part says),
        so a later reopen of this session does not end it a second time. A commit that fails (a full disk) is
        logged: the fork goes on."""
        records = self._jobs_left_behind(fork_id)
        for part in self.parts:
            records += part.records_left_behind(fork_id)
        if records:
            try:
                self.commit(records)
            except JournalError as error:
                sys.stderr.write(f"eukhe: could not record what fork {fork_id} took over: {error.reason}\n")

    def _jobs_left_behind(self, fork_id: str) -> list[JournalRecord]:
        """What a fork takes over from this session, as records of this session: every job still running goes on
        (or is stopped) in the fork, which records its end; here its node retires with a row that says `forked`
        (no output: the fork has it), so a reopen of this session does not record it as ended by its host."""
        nodes = self._ledger.trees.documents
        records: list[JournalRecord] = []
        for job_id in sorted(self._job_nodes()):
            retire, row = forked_row(job_id, nodes[(JOB_DOC_TYPE, job_id)])
            records += [retire, self.entry_record("notice", row)]
        return records

    def _switch_to(self, directory: Path) -> None:
        """Continue in another session dir (a fork's): the same jobs and tools, its journal and trees."""
        ledger, _ = Ledger.load(directory / dirs.JOURNAL_NAME)
        ledger.entry_listeners.append(self.job_table.observe)
        old, self._ledger, self.dir = self._ledger, ledger, directory
        self.harness.retarget(self.artifact_dir)
        self.sandbox = self.sandbox.moved(directory, readable=self._sandbox_readable())
        old.close()
        self._read_past_jobs()  # the fork's history: the rows on its branch (this life's jobs stay in the table)
