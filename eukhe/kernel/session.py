"""A session with a Python kernel (S2 "Jobs" 4, S3): the session layer's `Session` plus `ipython`.

One kernel per session, started by its first cell: a `KernelManager` (Local: on the installed kernel venv, in the
session's working dir; or Wrapped, by the transport the session started with), output bounded by the session's
Truncation with artifacts in its artifact dir, its cells' `rlm.fs` requests served here, and the `CellJobs` that
turn cells past their budget into jobs of the session's job table. A Local kernel's `bash()` process groups are kept
in the journal, so a reopen after a crash reaps what the old kernel left. This is the session the public API
(`eukhe.api`) and the daemon's workers host.
"""

from __future__ import annotations

import contextlib
import inspect
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from eukhe.core.gate import Admission
from eukhe.core.job import blocking_span
from eukhe.fs import REQUESTS as FS_REQUESTS
from eukhe.kernel.cells import CellJobs
from eukhe.kernel.launch import KernelLaunch, confined_launch, installed_kernel_launch, with_snapshot
from eukhe.kernel.manager import HostHandler, KernelManager
from eukhe.kernel.remote import REGISTER as REMOTE_REGISTER
from eukhe.kernel.remote import SessionRemote
from eukhe.kernel.transport import path_map_of, wrapped_launch
from eukhe.procs import kill_group, start_ticks
from eukhe.records.jobs import Detached, Settled
from eukhe.records.journal import DocPut, DocRetire, JournalRecord
from eukhe.session.session import Session, StartListener
from eukhe.store.journal import JournalError

SNAPSHOT_NAME = "kernel-namespace.pickle"
"""The namespace snapshot file (written by the kernel, read by the next one), in the session's kernel directory."""

KERNEL_DIR_NAME = "kernel"
"""The one directory of the session's own that its kernel may write, confined or not: the snapshot's."""

KERNEL_GROUP_DOC = "eukhe.kernel_group"
"""A state document per live `bash()` process group of a Local kernel (key: the group id)."""

Launch = Callable[[], KernelLaunch | Awaitable[KernelLaunch]]


class KernelSession(Session):
    """A session whose `ipython` runs cells on its own Python kernel."""

    local_launch: Launch = staticmethod(installed_kernel_launch)
    """How a Local kernel starts (the installed kernel venv; tests give another)."""

    def kernel_launch(self) -> KernelLaunch | Awaitable[KernelLaunch]:
        """How this session's kernel starts: Local, or wrapped by the transport the session started with; each
        with the session's namespace snapshot file (a wrapped kernel: when a mount holds it)."""
        transport = self.kernel_transport
        if transport is None:
            return self._local_launch()
        self.snapshot_path.parent.mkdir(mode=0o700, exist_ok=True)
        return wrapped_launch(transport, self.cwd, snapshot=str(self.snapshot_path))

    async def _local_launch(self) -> KernelLaunch:
        planned = self.local_launch()
        launch = await planned if inspect.isawaitable(planned) else planned
        self.snapshot_path.parent.mkdir(mode=0o700, exist_ok=True)
        launch = with_snapshot(launch, str(self.snapshot_path))
        if not self.sandbox.confined:
            return launch
        return confined_launch(launch, self.sandbox, writable=[str(self.snapshot_path.parent)])

    @property
    def snapshot_path(self) -> Path:
        """Where the kernel writes its namespace snapshot when idle culling stops it (the session's directory)."""
        return self.dir / KERNEL_DIR_NAME / SNAPSHOT_NAME

    _cells: CellJobs | None = None

    def host_handlers(self) -> dict[str, HostHandler]:
        """The host requests the kernel's cells may make, by type: the file tools (`fs.read` ... `fs.glob`) and
        `remote.register` (`@rlm.remote`)."""
        handlers: dict[str, HostHandler] = dict.fromkeys(FS_REQUESTS, self._serve_files)
        handlers[REMOTE_REGISTER] = self.remote.serve_register
        return handlers

    _remote: SessionRemote | None = None

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.harness.add_dynamic(self.remote)  # `dyn` reaches `remote/<name>` from the start (not_running, unknown)

    @property
    def remote(self) -> SessionRemote:
        """The kernel's `@rlm.remote` functions: `list()`, `await call(name, args, budget_ms)`; each is tool
        `remote/<name>` behind the harness's `dyn` entry."""
        if self._remote is None:
            self._remote = SessionRemote(self)
        return self._remote

    async def _serve_files(self, admission: Admission) -> Any:
        """An `fs.*` request from a cell, served in the session's working dir (relative paths start at the
        kernel's current directory when it asked). A wrapped kernel's paths are sandbox paths: mapped to the
        host's and back, and refused `outside` when no mount holds them on the host disk."""
        transport = self.kernel_transport
        path_map = None if transport is None else path_map_of(transport)
        return await self.files.serve(
            admission.kind, admission.params, path_map=path_map, sandbox_cwd=admission.cwd, kernel=True
        )

    @property
    def cells(self) -> CellJobs:
        """The session's kernel and its cell jobs (the kernel starts with the first cell)."""
        if self._cells is None:
            manager = KernelManager(
                truncation=self.settings.bound,
                artifact_dir=self.artifact_dir,
                cwd=self.cwd,
                handlers=self.host_handlers(),
                launch=self.kernel_launch,
                clock=self.job_table.clock,
            )
            manager.on_child_group = self._kernel_group
            self._cells = CellJobs(manager, self.job_table)
        return self._cells

    def _kernel_group(self, pgid: int, started: bool) -> None:
        """A Local kernel's `bash()` group started or ended: kept as a state document, so a restarted host still
        reaps what the kernel left (S3 sandbox 8). A wrapped or confined kernel's pids are not the host's: it reaps
        its own (a confined kernel's pid namespace ends with it)."""
        if self.kernel_transport is not None or self.sandbox.confined:
            return
        record: JournalRecord
        if started:
            record = DocPut(type=KERNEL_GROUP_DOC, key=str(pgid), value={"start_ticks": start_ticks(pgid)})
        else:
            record = DocRetire(type=KERNEL_GROUP_DOC, key=str(pgid))
        with contextlib.suppress(JournalError):  # a full disk: the group is still reaped from memory at the end
            self.commit([record])

    def _after_reopen(self) -> None:
        """Reap the `bash()` groups an old host's kernel left (its process gone, they may live on), then forget
        them. A group whose leader's pid now names another process (its start time differs) is left alone."""
        leftovers = self.view_state().of_type(KERNEL_GROUP_DOC)
        for key, value in leftovers.items():
            pgid = int(key)
            recorded = value.get("start_ticks") if isinstance(value, dict) else None
            now = start_ticks(pgid)
            if now is None or now == recorded:
                kill_group(pgid)
        if leftovers:
            self.commit([DocRetire(type=KERNEL_GROUP_DOC, key=key) for key in leftovers])

    @property
    def kernel(self) -> KernelManager | None:
        """The session's kernel manager, once a cell made one."""
        return None if self._cells is None else self._cells.manager

    async def ipython(
        self, code: str, budget_ms: int | None = None, *, on_start: StartListener | None = None
    ) -> Settled | Detached:
        """Run a Python cell on the session's kernel; settled within the budget, else detached as a cell job.
        Cancelling the call cancels the cell through its owner (it is interrupted), then re-raises."""
        self.check_open()
        answer = await self.cells.ipython(code, blocking_span(budget_ms, self.budget_ms), on_start=on_start)
        return await self.recorded(answer)

    async def _close_hosted(self) -> None:
        if self._cells is not None:
            await self._cells.close()
            await self._cells.manager.close()
