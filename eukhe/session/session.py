"""The `Session`: one durable conversation with its tools, jobs and rewinds (S1 store; S2 "A tool call", "Jobs"
4-7; "Local access" 3-4). The Python API a long-lived host (the daemon) keeps open.

Every durable change goes through `commit`: one journal commit, then the in-memory trees fold it, then the job
table observes each entry it holds (the rewind order). The job writer turns job starts and ends into `eukhe.job`
nodes off the callers' path. A rewind (`navigate_tree`, `fork`) kills the jobs started after its target and waits
for their ends at most the blocking budget.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any

from eukhe.core.job import Detached, Settled, blocking_span, deadline_for, end_as_json
from eukhe.core.jobdocs import JOB_DOC_TYPE, EntryRecord, JobEnded, JobStarted
from eukhe.errors import EukheError
from eukhe.harness.board import EventStream
from eukhe.harness.harness import Harness
from eukhe.jobs import Clock, Job, JobTable, wait_until
from eukhe.jobs.bash import BashDetached, BashOptions, BashSettled, bash_and_wait
from eukhe.kernel.cells import CellDetached, CellSettled
from eukhe.kernel.launch import installed_kernel_launch
from eukhe.kernel.tool import SessionKernel
from eukhe.private_fs import check_working_dir
from eukhe.session import store
from eukhe.session.journal import Commit, Journal, JournalRead, Record
from eukhe.session.ledger import Ledger
from eukhe.session.settings import SessionSettings
from eukhe.session.tree import Entry, StateView, UnknownEntryError, state_after
from eukhe.session.writer import JobWriter

JSON = Any
BASH_ROW = "eukhe.bash"


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


@dataclass(frozen=True, slots=True)
class RewindResult:
    """What a rewind did: where the leaf is, the jobs it stopped in time and those still stopping."""

    leaf: str | None
    stopped_jobs: tuple[str, ...]
    stopping_jobs: tuple[str, ...]
    session_id: str  # the session the rewind leaves open (a fork: the new one)

    def as_json(self) -> dict[str, JSON]:
        """The answer a host sends: `stoppedJobs`, `stoppingJobs`, the leaf and the session."""
        return {
            "sessionId": self.session_id,
            "leaf": self.leaf,
            "stoppedJobs": list(self.stopped_jobs),
            "stoppingJobs": list(self.stopping_jobs),
        }


def job_document(job: Job) -> dict[str, JSON]:
    """The `eukhe.job` node's value: what the prompt and a reader need to name the job."""
    return {"kind": job.spec.kind, "title": job.spec.title, "startedMs": job.started_ms}


def bash_row(job: Job) -> dict[str, JSON]:
    """The `eukhe.bash` row a user-bash run records at its end."""
    end = job.end
    result = job.result()
    return {
        "notice": BASH_ROW,
        "job": job.id,
        "command": job.spec.title,
        **(end_as_json(end) if end is not None else {"exitCode": None, "killed": False}),
        "output": result.as_json(),
    }


class SessionJobs:
    """`jobs.list`, `jobs.wait`, `jobs.cancel` on a session; every wait is `wait_until` within the budget."""

    def __init__(self, session: Session) -> None:
        self._session = session

    def _job(self, job_id: str) -> Job:
        job = self._session.job_table.get(job_id)
        if job is None:
            raise UnknownJobError(job_id)
        return job

    def list(self) -> list[dict[str, JSON]]:
        """Every job this session started since it opened, in start order."""
        return [job.describe() for job in self._session.job_table.jobs()]

    async def wait(self, job_id: str, timeout_ms: int | None = None) -> dict[str, JSON]:
        """Wait for the job's end at most `timeout_ms` (and at most the blocking budget)."""
        job = self._job(job_id)
        clock = self._session.job_table.clock
        verdict = await wait_until(job, deadline_for(clock.now_ms(), timeout_ms, self._session.budget_ms))
        return self._answer(job, verdict)

    async def cancel(self, job_id: str) -> dict[str, JSON]:
        """Kill the job through its owner and wait for its end at most the blocking budget."""
        job = self._job(job_id)
        job.kill()
        clock = self._session.job_table.clock
        verdict = await wait_until(job, deadline_for(clock.now_ms(), None, self._session.budget_ms))
        return self._answer(job, verdict)

    @staticmethod
    def _answer(job: Job, verdict: Settled | Detached) -> dict[str, JSON]:
        answer = job.describe()
        answer["settled"] = isinstance(verdict, Settled)
        answer["output"] = (job.result() if isinstance(verdict, Settled) else job.snapshot()).as_json()
        return answer


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
    ) -> None:
        self.root = root
        self.dir = directory
        self._ledger = ledger
        self.cwd = cwd
        header = ledger.trees.header
        self.settings = SessionSettings.from_json(header.get("settings") if isinstance(header, Mapping) else None)
        self.job_table = JobTable(clock)
        ledger.entry_listeners.append(self.job_table.observe)
        self._bash_options = bash_options or BashOptions()
        self.harness = Harness(self, lambda: self.settings.truncation, self.artifact_dir)
        self.jobs = SessionJobs(self)
        self.writer = JobWriter(self.commit, self.entry_record, self._job_nodes)
        self._unsubscribe = self.job_table.subscribe(self)
        self._closed = False
        self.last_read: JournalRead | None = None  # what the reopen read: its commits and skipped lines
        self._kernel: SessionKernel | None = None  # the Python kernel, started by the first `ipython` cell

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
    ) -> Session:
        """A new session in `cwd` (which must name an existing directory: the spec's three refusals)."""
        working = check_working_dir(cwd)
        base = store.resolve_root(root)
        sid = session_id or store.new_session_id()
        directory = store.create_session_dir(base, sid)
        ledger = Ledger.create(directory / store.JOURNAL_NAME)
        try:
            ledger.commit(
                [
                    {
                        "t": "session",
                        "id": sid,
                        "cwd": str(working),
                        "settings": (settings or SessionSettings()).as_json(),
                    }
                ]
            )
        except BaseException:  # e.g. a full disk: the journal's descriptor is not leaked
            ledger.close()
            raise
        session = cls(
            root=base, directory=directory, ledger=ledger, cwd=working, clock=clock, bash_options=bash_options
        )
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
    ) -> Session:
        """Reopen a saved session: read its journal (a torn last line is skipped with a diagnostic), settle the
        calls a crash interrupted from what is durable, and retire the job nodes the old process left."""
        base = store.resolve_root(root)
        directory = store.open_session_dir(base, session_id)
        ledger, read = Ledger.load(directory / store.JOURNAL_NAME)
        header = ledger.trees.header
        recorded = header.get("cwd") if isinstance(header, Mapping) else None
        try:
            working = check_working_dir(cwd if cwd is not None else recorded)
        except BaseException:
            ledger.close()
            raise
        session = cls(
            root=base, directory=directory, ledger=ledger, cwd=working, clock=clock, bash_options=bash_options
        )
        session.last_read = read
        try:
            session.harness.settle_interrupted(ledger.trees.slots)
            session.writer.retire_leftovers()
        except BaseException:  # a commit failed (e.g. a full disk): nothing runs yet, so only the journal is open
            session._unsubscribe()
            ledger.close()
            raise
        session.writer.start()
        return session

    async def close(self) -> None:
        """Abort the running tool calls (each settles), kill every running job (waiting at most the budget), commit
        what the writer holds, close the journal."""
        if self._closed:
            return
        self._closed = True
        await self.harness.abort_all()
        clock = self.job_table.clock
        await self.job_table.quit(deadline_for(clock.now_ms(), None, self.budget_ms))
        if self._kernel is not None:
            await self._kernel.close()
        await self.writer.close()
        self._unsubscribe()
        self._ledger.close()

    async def __aenter__(self) -> Session:
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
        return str(header["id"]) if isinstance(header, Mapping) else self.dir.name

    @property
    def journal(self) -> Journal:
        """The journal the session commits to (tests observe its commits)."""
        return self._ledger.journal

    @property
    def artifact_dir(self) -> Path:
        """Where BoundedOutput artifacts of this session go."""
        return self.dir / store.ARTIFACTS_NAME

    @property
    def budget_ms(self) -> int:
        """The blocking budget, `toolBlockingBudgetMs`."""
        return self.settings.tool_blocking_budget_ms

    # ---- commits -------------------------------------------------------------------------------------------------

    def entry_record(self, kind: str, content: JSON) -> dict[str, JSON]:
        """A new entry record; its parent is set at commit time to the leaf it follows."""
        return self._ledger.entry_record(kind, content)

    def commit(self, records: Sequence[Record]) -> Commit:
        """One durable commit; then the trees fold it and the job table observes each entry (the rewind order)."""
        return self._ledger.commit(records)

    def _check_open(self) -> None:
        if self._closed:
            raise SessionClosedError(f"session {self.id} is closed")

    def append(self, kind: str, content: JSON) -> Entry:
        """Append a conversation entry (user, assistant, notice) at the leaf; it becomes the leaf."""
        self._check_open()
        record = self.entry_record(kind, content)
        self.commit([record])
        return self._ledger.trees.entries[record["id"]]

    # ---- reading -------------------------------------------------------------------------------------------------

    @property
    def leaf(self) -> str | None:
        """The current leaf entry (None: before every entry)."""
        return self._ledger.trees.leaf

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
                lines.append(f"{job_id} {value.get('kind', 'job')}: {value.get('title', '')}")
            lines.append("</running-jobs>")
        return "\n".join(lines) + "\n"

    # ---- the job table's listener --------------------------------------------------------------------------------

    def job_started(self, job: Job) -> None:
        """JobListener: a start becomes a node (through the writer; nobody waits)."""
        self.writer.submit(JobStarted(job.id, job_document(job)))

    def job_ended(self, job: Job, end: object) -> None:
        """JobListener: an end retires the node; a user-bash run's end records its `eukhe.bash` row."""
        self.writer.submit(JobEnded(job.id))
        if job.spec.kind == "bash":
            self.writer.submit(EntryRecord("notice", bash_row(job)))

    # ---- user bash -----------------------------------------------------------------------------------------------

    async def execute_bash_and_wait(self, command: str, budget_ms: int | None = None) -> BashSettled | BashDetached:
        """Run `command` as a job; settled within the budget, else `detached: {job, budgetMs}` with the output so
        far (the job goes on; its end records its `eukhe.bash` row)."""
        self._check_open()
        budget = blocking_span(budget_ms, self.budget_ms)
        return await bash_and_wait(
            command,
            self.cwd,
            truncation=self.settings.truncation,
            artifact_dir=self.artifact_dir,
            table=self.job_table,
            budget_ms=budget,
            options=self._bash_options,
        )

    # ---- the Python kernel ---------------------------------------------------------------------------------------

    async def ipython(self, code: str, budget_ms: int | None = None) -> CellSettled | CellDetached:
        """Run a Python cell on the session's kernel; settled within the budget, else detached as a cell job."""
        self._check_open()
        budget = blocking_span(budget_ms, self.budget_ms)
        if self._kernel is None:
            self._kernel = SessionKernel(
                truncation=self.settings.truncation,
                artifact_dir=self.artifact_dir,
                cwd=self.cwd,
                table=self.job_table,
                launch=installed_kernel_launch,
            )
        return await self._kernel.ipython(code, budget)

    # ---- rewind --------------------------------------------------------------------------------------------------

    def _check_target(self, entry_id: str | None) -> None:
        self._check_open()
        if entry_id is not None and entry_id not in self._ledger.trees.entries:
            raise UnknownEntryError(entry_id)

    async def _stop(self, killed: Sequence[Job]) -> tuple[tuple[str, ...], tuple[str, ...]]:
        clock = self.job_table.clock
        deadline = deadline_for(clock.now_ms(), None, self.budget_ms)
        stopped: list[str] = []
        stopping: list[str] = []
        for job in killed:
            verdict = await wait_until(job, deadline)
            (stopped if isinstance(verdict, Settled) else stopping).append(job.id)
        return tuple(stopped), tuple(stopping)

    async def navigate_tree(self, entry_id: str | None) -> RewindResult:
        """Move the leaf to `entry_id` (None: before every entry) and stop the jobs started after it."""
        self._check_target(entry_id)
        self.commit([{"t": "leaf", "id": entry_id}])
        killed = self.job_table.rewind_to(entry_id)
        stopped, stopping = await self._stop(killed)
        return RewindResult(entry_id, stopped, stopping, self.id)

    async def fork(self, entry_id: str | None, *, session_id: str | None = None) -> RewindResult:
        """A new session holding the branch up to `entry_id` (written through a private staging dir), which this
        object continues in; the jobs started after the entry are stopped, the others keep running there."""
        self._check_target(entry_id)
        killed = self.job_table.rewind_to(entry_id)
        killed_ids = {job.id for job in killed}
        sid = session_id or store.new_session_id()
        header = {
            "t": "session",
            "id": sid,
            "cwd": str(self.cwd),
            "settings": self.settings.as_json(),
            "forkedFrom": {"session": self.id, "entry": entry_id},
        }
        path = self._ledger.trees.path_to(entry_id)
        copied: list[Record] = [
            {"t": "entry", "id": entry.id, "parent": entry.parent, "kind": entry.kind, "content": entry.content}
            for entry in path
        ]
        carried = [
            {"t": "doc", "op": "put", "type": doc_type, "key": key, "value": value}
            for (doc_type, key), value in self.state_after(entry_id).documents.items()
            if doc_type != JOB_DOC_TYPE
        ]
        nodes = self.view_state().of_type(JOB_DOC_TYPE)
        kept = [
            {"t": "doc", "op": "put", "type": JOB_DOC_TYPE, "key": job_id, "value": value}
            for job_id, value in nodes.items()
            if job_id not in killed_ids and (job := self.job_table.get(job_id)) is not None and job.running
        ]
        commits: list[list[Record]] = [[header], [*copied, {"t": "leaf", "id": entry_id}, *carried, *kept]]
        directory = store.write_staged_session(self.root, sid, commits)
        self._switch_to(directory)
        stopped, stopping = await self._stop(killed)
        return RewindResult(entry_id, stopped, stopping, sid)

    def _switch_to(self, directory: Path) -> None:
        """Continue in another session dir (a fork's): the same jobs and tools, its journal and trees."""
        ledger, _ = Ledger.load(directory / store.JOURNAL_NAME)
        ledger.entry_listeners.append(self.job_table.observe)
        old, self._ledger, self.dir = self._ledger, ledger, directory
        self.harness.retarget(self.artifact_dir)
        old.close()
