"""Where a parent's children live: the `ChildHost` a `Children` roster asks to start, run and stop a child.

A child is a session of its own, with its own kernel and jobs. `InProcessHost` hosts it in the parent's process (the
Python API without a daemon); the daemon's host gives each child its own worker (`eukhe.daemon.children`).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from eukhe.records.children import RunEnd, RunRequest
from eukhe.records.sandbox import SandboxPolicy

if TYPE_CHECKING:
    from eukhe.children.family import AgentSession


class ChildHost(Protocol):
    """Start a child session in a working directory, run its code, stop it (its session stays on disk)."""

    async def start(self, cwd: Path, sandbox: SandboxPolicy) -> str:
        """Create the child's session in `cwd` under the sandbox policy `sandbox`; its id."""
        ...

    async def run(self, session_id: str, request: RunRequest, on_message: Callable[[str], None]) -> RunEnd:
        """Run the child's code or prompt to its end (or its timeout); a prompt child's `message_parent` texts go
        to `on_message` as it sends them. Cancelled: the cell (or the model request) is interrupted, then
        re-raised."""
        ...

    async def stop(self, session_id: str) -> None:
        """End the child's kernel, jobs (and worker): nothing of it runs after this returns."""
        ...

    async def stopping(self) -> bool:
        """Whether the host itself is going away (a run that failed then was cut by the stop: not the child's end;
        the parent ends it when it reopens)."""
        ...


class InProcessHost:
    """Children as sessions opened in this process (each with its own kernel and jobs), in the parent's sessions
    root; a child stopped here is closed."""

    def __init__(self, session_class: type[AgentSession], root: Path) -> None:
        self._session_class = session_class
        self._root = root
        self._open: dict[str, AgentSession] = {}

    async def start(self, cwd: Path, sandbox: SandboxPolicy) -> str:
        child = await self._session_class.create(cwd, root=self._root, sandbox=sandbox)
        self._open[child.id] = child
        return child.id

    async def run(self, session_id: str, request: RunRequest, on_message: Callable[[str], None]) -> RunEnd:
        child = self._open.get(session_id)
        if child is None:  # a child of a session reopened in another process: its run is not here
            child = await self._session_class.open(session_id, root=self._root)
            self._open[session_id] = child
        return await child.run_as_child(request, on_message)

    async def stop(self, session_id: str) -> None:
        child = self._open.pop(session_id, None)
        if child is not None:
            await child.close()

    async def stopping(self) -> bool:
        return False  # in this process, the parent's close cancels the runs first
