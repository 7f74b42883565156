"""The five file tools, served on the host over a session's working directory.

`read`, `write`, `edit`, `grep` and `glob` each take an `FsContext` (the session's cwd, output bound, artifact dir,
and for a wrapped kernel its path map and sandbox cwd) and their argument record, and return their answer record or
raise `FsError`. `serve` is the same over plain JSON values, for host requests. docs/fs.md is the reference.

They block (disk I/O, ripgrep): from asyncio code, run them in a worker thread.
"""

from __future__ import annotations

from eukhe.fs.context import FsContext
from eukhe.fs.editing import edit
from eukhe.fs.errors import VERSION, FsError, Reason
from eukhe.fs.globbing import glob
from eukhe.fs.grepping import grep, ripgrep
from eukhe.fs.reading import read
from eukhe.fs.serve import REQUESTS, refusal, serve
from eukhe.fs.writing import write
from eukhe.records.fs import (
    EditAnswer,
    EditArgs,
    EditChange,
    FsRefusal,
    GlobAnswer,
    GlobArgs,
    GrepAnswer,
    GrepArgs,
    ReadAnswer,
    ReadArgs,
    WriteAnswer,
    WriteArgs,
)

__all__ = [
    "REQUESTS",
    "VERSION",
    "EditAnswer",
    "EditArgs",
    "EditChange",
    "FsContext",
    "FsError",
    "FsRefusal",
    "GlobAnswer",
    "GlobArgs",
    "GrepAnswer",
    "GrepArgs",
    "ReadAnswer",
    "ReadArgs",
    "Reason",
    "WriteAnswer",
    "WriteArgs",
    "edit",
    "glob",
    "grep",
    "read",
    "refusal",
    "ripgrep",
    "serve",
    "write",
]
