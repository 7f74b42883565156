"""A session with a Python kernel (S2 "Jobs" 4, S3): the session layer's `Session` plus `ipython`.

One kernel per session, started by its first cell: a `KernelManager` (Local transport, in the session's working
dir, output bounded by the session's Truncation with artifacts in its artifact dir, on the installed kernel venv)
and the `CellJobs` that turn cells past their budget into jobs of the session's job table. This is the session the
public API (`eukhe.api`) and the daemon's workers host.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from eukhe.core.gate import Admission
from eukhe.core.job import blocking_span
from eukhe.fs import REQUESTS as FS_REQUESTS
from eukhe.kernel.cells import CellJobs
from eukhe.kernel.launch import KernelLaunch, installed_kernel_launch
from eukhe.kernel.manager import HostHandler, KernelManager
from eukhe.kernel.transport import path_map_of, wrapped_launch
from eukhe.records.jobs import Detached, Settled
from eukhe.session.session import Session, StartListener

Launch = Callable[[], KernelLaunch | Awaitable[KernelLaunch]]


class KernelSession(Session):
    """A session whose `ipython` runs cells on its own Python kernel."""

    local_launch: Launch = staticmethod(installed_kernel_launch)
    """How a Local kernel starts (the installed kernel venv; tests give another)."""

    def kernel_launch(self) -> KernelLaunch | Awaitable[KernelLaunch]:
        """How this session's kernel starts: Local, or wrapped by the transport the session started with."""
        transport = self.kernel_transport
        if transport is None:
            return self.local_launch()
        return wrapped_launch(transport, self.cwd)

    _cells: CellJobs | None = None

    def host_handlers(self) -> dict[str, HostHandler]:
        """The host requests the kernel's cells may make, by type: the file tools (`fs.read` ... `fs.glob`)."""
        return dict.fromkeys(FS_REQUESTS, self._serve_files)

    async def _serve_files(self, admission: Admission) -> Any:
        """An `fs.*` request from a cell, served in the session's working dir (relative paths start at the
        kernel's current directory when it asked). A wrapped kernel's paths are sandbox paths: mapped to the
        host's and back, and refused `outside` when no mount holds them on the host disk."""
        transport = self.kernel_transport
        path_map = None if transport is None else path_map_of(transport)
        return await self.files.serve(admission.kind, admission.params, path_map=path_map, sandbox_cwd=admission.cwd)

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
            )
            self._cells = CellJobs(manager, self.job_table)
        return self._cells

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
        return await self.cells.ipython(code, blocking_span(budget_ms, self.budget_ms), on_start=on_start)

    async def _close_hosted(self) -> None:
        if self._cells is not None:
            await self._cells.close()
            await self._cells.manager.close()
