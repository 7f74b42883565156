"""A session's Python kernel (S2 "Jobs" 4, S3): `SessionKernel`, a part of a session (`SessionPart`), and
`KernelSession`, the session with that part (`ipython`, `kernel`, `remote`: it delegates to the part).

One kernel per session, started by its first cell: a `KernelManager` (Local: on the installed kernel venv, in the
session's working dir; or Wrapped, by the transport the session started with), output bounded by the session's
Truncation with artifacts in its artifact dir, its cells' `rlm.fs` requests served here, and the `CellJobs` that
turn cells past their budget into jobs of the session's job table. A Local kernel's `bash()` process groups are kept
in the journal, so a reopen after a crash reaps what the old kernel left. The children's session
(`eukhe.children.family`) adds its part beside this one.
"""

from __future__ import annotations

import contextlib
import inspect
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Unpack

from eukhe.core.cell_packages import VenvSetting
from eukhe.core.gate import Admission
from eukhe.fs import REQUESTS as FS_REQUESTS
from eukhe.kernel.cells import CellJobs
from eukhe.kernel.launch import KernelLaunch, confined_launch, installed_kernel_launch, with_skills, with_snapshot
from eukhe.kernel.manager import HostHandler, KernelManager
from eukhe.kernel.remote import REGISTER as REMOTE_REGISTER
from eukhe.kernel.remote import SessionRemote
from eukhe.kernel.transport import path_map_of, wrapped_launch
from eukhe.kernel.workspace_venv import WorkspaceVenv
from eukhe.procs import kill_group, start_ticks
from eukhe.records.jobs import Detached, Settled
from eukhe.records.journal import DocPut, DocRetire, JournalRecord
from eukhe.session.session import (
    LiveListener,
    PartsMaker,
    Session,
    SessionMade,
    SessionPart,
    StartListener,
)
from eukhe.store.journal import JournalError

SNAPSHOT_NAME = "kernel-namespace.pickle"
"""The namespace snapshot file (written by the kernel, read by the next one), in the session's kernel directory."""

KERNEL_DIR_NAME = "kernel"
"""The one directory of the session's own that its kernel may write, confined or not: the snapshot's."""

KERNEL_GROUP_DOC = "eukhe.kernel_group"
"""A state document per live `bash()` process group of a Local kernel (key: the group id)."""

Launch = Callable[[], KernelLaunch | Awaitable[KernelLaunch]]


class SessionKernel:
    """A session's Python kernel, as its part: the cells and their jobs, the host requests its cells make, the
    `@rlm.remote` functions, and what a reopen reaps and a close ends.

    `launch` starts a Local kernel (the installed kernel venv); `handlers` are the host requests a layer above
    serves (by type), beside the file tools and `remote.register`."""

    def __init__(
        self,
        session: Session,
        *,
        launch: Launch = installed_kernel_launch,
        handlers: Mapping[str, HostHandler] | None = None,
    ) -> None:
        self.session = session
        self._launch = launch
        self._handlers = dict(handlers or {})
        self._cells: CellJobs | None = None
        self.remote = SessionRemote(session, lambda: self.kernel)
        """The kernel's `@rlm.remote` functions: `list()`, `await call(name, args, budget_ms)`; each is tool
        `remote/<name>` behind the harness's `dyn` entry."""
        session.harness.add_dynamic(self.remote)  # `dyn` reaches `remote/<name>` from the start (not_running)

    def kernel_launch(self) -> KernelLaunch | Awaitable[KernelLaunch]:
        """How this session's kernel starts: Local, or wrapped by the transport the session started with; each
        with the session's namespace snapshot file (a wrapped kernel: when a mount holds it)."""
        transport = self.session.kernel_transport
        if transport is None:
            return self._local_launch()
        self.snapshot_path.parent.mkdir(mode=0o700, exist_ok=True)
        return wrapped_launch(transport, self.session.cwd, snapshot=str(self.snapshot_path))

    async def _local_launch(self) -> KernelLaunch:
        planned = self._launch()
        launch = await planned if inspect.isawaitable(planned) else planned
        launch = await with_skills(launch, self.session.cwd)
        self.snapshot_path.parent.mkdir(mode=0o700, exist_ok=True)
        launch = with_snapshot(launch, str(self.snapshot_path))
        launch = replace(launch, env=self.session.launch_environment(launch.env))
        sandbox = self.session.sandbox
        if not sandbox.confined:
            return launch
        return confined_launch(launch, sandbox, writable=[str(self.snapshot_path.parent)])

    @property
    def snapshot_path(self) -> Path:
        """Where the kernel writes its namespace snapshot when idle culling stops it (the session's directory)."""
        return self.session.dir / KERNEL_DIR_NAME / SNAPSHOT_NAME

    def host_handlers(self) -> dict[str, HostHandler]:
        """The host requests the kernel's cells may make, by type: the file tools (`fs.read` ... `fs.glob`),
        `remote.register` (`@rlm.remote`), and those of the layers above."""
        handlers: dict[str, HostHandler] = dict.fromkeys(FS_REQUESTS, self._serve_files)
        handlers[REMOTE_REGISTER] = self.remote.serve_register
        return {**handlers, **self._handlers}

    async def _serve_files(self, admission: Admission) -> object:
        """An `fs.*` request from a cell, served in the session's working dir (relative paths start at the
        kernel's current directory when it asked). A wrapped kernel's paths are sandbox paths: mapped to the
        host's and back, and refused `outside` when no mount holds them on the host disk."""
        transport = self.session.kernel_transport
        path_map = None if transport is None else path_map_of(transport)
        return await self.session.files.serve(
            admission.kind, admission.params, path_map=path_map, sandbox_cwd=admission.cwd, kernel=True
        )

    @property
    def cells(self) -> CellJobs:
        """The session's kernel and its cell jobs (the kernel starts with the first cell)."""
        if self._cells is None:
            session = self.session
            manager = KernelManager(
                truncation=session.settings.bound,
                artifact_dir=session.artifact_dir,
                cwd=session.cwd,
                handlers=self.host_handlers(),
                launch=self.kernel_launch,
                clock=session.job_table.clock,
            )
            manager.on_child_group = self._kernel_group
            if session.kernel_transport is None:  # a Local kernel sees the host's paths: it can import from .venv
                venv = WorkspaceVenv(session.cwd, VenvSetting(session.settings.workspace_venv))
                manager.before_cell = venv.before_cell
                manager.error_hint = venv.hint
            self._cells = CellJobs(manager, session.job_table)
        return self._cells

    @property
    def kernel(self) -> KernelManager | None:
        """The session's kernel manager, once a cell made one."""
        return None if self._cells is None else self._cells.manager

    def _kernel_group(self, pgid: int, started: bool) -> None:
        """A Local kernel's `bash()` group started or ended: kept as a state document, so a restarted host still
        reaps what the kernel left (S3 sandbox 8). A wrapped or confined kernel's pids are not the host's: it reaps
        its own (a confined kernel's pid namespace ends with it)."""
        if self.session.kernel_transport is not None or self.session.sandbox.confined:
            return
        record: JournalRecord
        if started:
            record = DocPut(type=KERNEL_GROUP_DOC, key=str(pgid), value={"start_ticks": start_ticks(pgid)})
        else:
            record = DocRetire(type=KERNEL_GROUP_DOC, key=str(pgid))
        with contextlib.suppress(JournalError):  # a full disk: the group is still reaped from memory at the end
            self.session.commit([record])

    async def ipython(
        self,
        code: str,
        budget_ms: int | None = None,
        *,
        on_start: StartListener | None = None,
        on_live: LiveListener | None = None,
        job_id: str | None = None,
    ) -> Settled | Detached:
        """Run a Python cell on the session's kernel; settled within the budget, else detached as a cell job (under
        `job_id` when it is free). `on_live` hears what holds the cell's output so far. Cancelling the call cancels
        the cell through its owner (it is interrupted), then re-raises."""
        session = self.session
        session.check_open()
        answer = await self.cells.ipython(
            code, session.budget_ms, timeout_ms=budget_ms, on_start=on_start, on_live=on_live, job_id=job_id
        )
        return await session.recorded(answer)

    # ---- as a part of the session --------------------------------------------------------------------------------

    def after_reopen(self) -> None:
        """Reap the `bash()` groups an old host's kernel left (its process gone, they may live on), then forget
        them. A group whose leader's pid now names another process (its start time differs) is left alone."""
        leftovers = self.session.view_state().of_type(KERNEL_GROUP_DOC)
        for key, value in leftovers.items():
            pgid = int(key)
            recorded = value.get("start_ticks") if isinstance(value, dict) else None
            now = start_ticks(pgid)
            if now is None or now == recorded:
                kill_group(pgid)
        if leftovers:
            self.session.commit([DocRetire(type=KERNEL_GROUP_DOC, key=key) for key in leftovers])

    def rewinding(self, entry_id: str | None) -> Callable[[], None]:
        """A rewind leaves the kernel as it is (its cell jobs are the session's jobs, stopped as they are)."""
        return _nothing

    def records_left_behind(self, fork_id: str) -> list[JournalRecord]:
        """A fork takes nothing of the kernel's (its cell jobs are the session's jobs)."""
        return []

    async def close(self) -> None:
        """End the cells and the kernel."""
        if self._cells is not None:
            await self._cells.close()
            await self._cells.manager.close()


def _nothing() -> None:
    """Nothing to do."""


def kernel_parts(session: Session) -> Sequence[SessionPart]:
    """The parts of a session with a Python kernel: its `SessionKernel`."""
    return [SessionKernel(session)]


class KernelSession(Session):
    """A session whose `ipython` runs cells on its own Python kernel: a `Session` with a `SessionKernel` part (by
    default `kernel_parts`), whose face this class is."""

    def __init__(self, *, parts: PartsMaker | None = None, **made: Unpack[SessionMade]) -> None:
        super().__init__(parts=kernel_parts if parts is None else parts, **made)
        self.python = self.part(SessionKernel)
        """The session's kernel part."""

    @property
    def remote(self) -> SessionRemote:
        """The kernel's `@rlm.remote` functions (`SessionKernel.remote`)."""
        return self.python.remote

    @property
    def cells(self) -> CellJobs:
        """The session's kernel and its cell jobs (`SessionKernel.cells`)."""
        return self.python.cells

    @property
    def kernel(self) -> KernelManager | None:
        """The session's kernel manager, once a cell made one."""
        return self.python.kernel

    @property
    def snapshot_path(self) -> Path:
        """Where the kernel writes its namespace snapshot (`SessionKernel.snapshot_path`)."""
        return self.python.snapshot_path

    async def ipython(
        self,
        code: str,
        budget_ms: int | None = None,
        *,
        on_start: StartListener | None = None,
        on_live: LiveListener | None = None,
        job_id: str | None = None,
    ) -> Settled | Detached:
        """Run a Python cell on the session's kernel (`SessionKernel.ipython`)."""
        return await self.python.ipython(code, budget_ms, on_start=on_start, on_live=on_live, job_id=job_id)
