"""A session's file tools: `read`, `write`, `edit`, `grep`, `glob` on its working directory.

The CLI (`eukhe fs ...`), the Python API (`session.files`) and the kernel's `fs.*` host requests all come through
here, so they answer the same: the session's output limits bound every answer (the same notice and artifact as any
output), and a refusal is an `FsError` with its reason. The tools block on the disk (and ripgrep), so each runs in a
worker thread. A wrapped kernel's requests carry sandbox paths: its path map and sandbox cwd come with them.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from eukhe.core.pathmap import PathMap
from eukhe.fs import (
    EditAnswer,
    EditArgs,
    FsContext,
    GlobAnswer,
    GlobArgs,
    GrepAnswer,
    GrepArgs,
    ReadAnswer,
    ReadArgs,
    WriteAnswer,
    WriteArgs,
    edit,
    glob,
    grep,
    read,
    serve,
    write,
)

if TYPE_CHECKING:
    from eukhe.session.session import Session


class SessionFiles:
    """The file tools of one session, on its working directory and within its output limits."""

    def __init__(self, session: Session) -> None:
        self._session = session

    def context(self, path_map: PathMap | None = None, sandbox_cwd: str | None = None) -> FsContext:
        """Where the tools run: the session's cwd, limits and artifact dir (and a wrapped kernel's path map)."""
        session = self._session
        return FsContext(
            cwd=session.cwd,
            truncation=session.settings.bound,
            artifact_dir=session.artifact_dir,
            path_map=path_map,
            sandbox_cwd=sandbox_cwd,
            sandbox=session.sandbox.facts(sockets=False) if session.sandbox.confined else None,
        )

    async def read(self, path: str, offset: int | None = None, limit: int | None = None) -> ReadAnswer:
        """A text file's lines (`offset` 1-based, `limit` lines), bounded."""
        return await asyncio.to_thread(read, self.context(), ReadArgs(path=path, offset=offset, limit=limit))

    async def write(self, path: str, content: str) -> WriteAnswer:
        """Create or replace a file, atomically."""
        return await asyncio.to_thread(write, self.context(), WriteArgs(path=path, content=content))

    async def edit(self, patch: str) -> EditAnswer:
        """Apply one multi-file patch, completely or not at all (docs/fs.md)."""
        return await asyncio.to_thread(edit, self.context(), EditArgs(patch=patch))

    async def grep(self, pattern: str, path: str = ".", glob: str | None = None) -> GrepAnswer:
        """Lines matching a regex under `path` (ripgrep when it is on PATH), bounded."""
        return await asyncio.to_thread(grep, self.context(), GrepArgs(pattern=pattern, path=path, glob=glob))

    async def glob(self, pattern: str, path: str = ".") -> GlobAnswer:
        """Files under `path` matching a glob (`**` crosses directories), bounded."""
        return await asyncio.to_thread(glob, self.context(), GlobArgs(pattern=pattern, path=path))

    async def serve(
        self,
        kind: str,
        params: Any,
        *,
        path_map: PathMap | None = None,
        sandbox_cwd: str | None = None,
        kernel: bool = False,
    ) -> dict[str, Any]:
        """One `fs.*` request as plain JSON values (`kernel`: a cell's host request, whose `fs.read` may be answered
        by reference; a wrapped kernel's paths are mapped)."""
        context = self.context(path_map, sandbox_cwd)
        return await asyncio.to_thread(serve, context, kind, params, kernel=kernel)
