"""The `ipython` tool of a session (S2 "Jobs" 4, S3): one kernel per session, started at its first cell.

`SessionKernel` owns the session's `KernelManager` (Local transport, in the session's working dir, output bounded
by the session's Truncation with artifacts in its artifact dir; `launch=installed_kernel_launch` runs it on the
installed kernel venv) and the `CellJobs` that turn cells past their
budget into jobs of the session's job table. `ipython_result` is the one JSON shape of an answer (the daemon's and
`eukhe ipython --json`'s): the keys of `eukhe bash --json` plus `result` and `error`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import Any

from eukhe.core.limits import Truncation
from eukhe.jobs.table import JobTable
from eukhe.kernel.cells import CellDetached, CellJobs, CellSettled
from eukhe.kernel.launch import KernelLaunch, kernel_launch
from eukhe.kernel.manager import HostHandler, KernelManager


class SessionKernel:
    """A session's Python kernel and its cell jobs."""

    def __init__(
        self,
        *,
        truncation: Truncation,
        artifact_dir: Path | None,
        cwd: Path,
        table: JobTable,
        handlers: Mapping[str, HostHandler] | None = None,
        launch: Callable[[], KernelLaunch | Awaitable[KernelLaunch]] = kernel_launch,
    ) -> None:
        self.manager = KernelManager(
            truncation=truncation, artifact_dir=artifact_dir, cwd=cwd, handlers=handlers, launch=launch
        )
        self.cells = CellJobs(self.manager, table)

    async def ipython(self, code: str, budget_ms: int) -> CellSettled | CellDetached:
        """Run one cell: settled within `budget_ms`, else detached as a cell job."""
        return await self.cells.ipython(code, budget_ms)

    async def close(self) -> None:
        """Stop the cancels under way, then kill the kernel."""
        await self.cells.close()
        await self.manager.close()


def ipython_result(outcome: CellSettled | CellDetached) -> dict[str, Any]:
    """An `ipython` answer as JSON: `status` (settled, detached), the bounded-output keys, `job`, `result`, `error`."""
    return outcome.as_json()
