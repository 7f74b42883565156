"""One entry for the file tools' requests: `run` takes arguments already decoded (a daemon worker's), `serve` decodes
a kernel's params strictly once, runs the tool and answers plain values.

`serve(context, "fs.read", {"path": "x"})` returns the answer as builtin values (dicts, lists, tuples); any
refusal, also of params of the wrong shape (`bad_request`), is an `FsError`, which `refusal` turns into its record
(`reason`, `path`, `message`, `version`). The host-request handler, the daemon's workers and the Python API all go
through these same functions.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import msgspec

from eukhe.fs.context import FsContext
from eukhe.fs.editing import edit
from eukhe.fs.errors import FsError, Reason
from eukhe.fs.globbing import glob
from eukhe.fs.grepping import grep
from eukhe.fs.reading import read, read_for_kernel
from eukhe.fs.writing import write
from eukhe.records.base import Record
from eukhe.records.fs import EditArgs, FsRefusal, GlobArgs, GrepArgs, KernelReadArgs, ReadArgs, WriteArgs

REQUESTS: dict[str, tuple[type[Record], Callable[[FsContext, Any], Record]]] = {
    "fs.read": (ReadArgs, read),
    "fs.write": (WriteArgs, write),
    "fs.edit": (EditArgs, edit),
    "fs.grep": (GrepArgs, grep),
    "fs.glob": (GlobArgs, glob),
}
"""The host request types this module serves, with their argument record and handler."""

KERNEL_REQUESTS: dict[str, tuple[type[Record], Callable[[FsContext, Any], Record]]] = {
    **REQUESTS,
    "fs.read": (KernelReadArgs, read_for_kernel),
}
"""The same for a kernel cell's host requests: its `fs.read` may ask for an answer by reference."""


def decode_args(kind: str, params: object, *, kernel: bool = False) -> Record:
    """The typed arguments of one request (`kernel`: a cell's); unknown keys, missing keys and wrong types are
    `bad_request`."""
    requests = KERNEL_REQUESTS if kernel else REQUESTS
    if kind not in requests:
        raise FsError(Reason.BAD_REQUEST, None, f"no file tool serves {kind!r}")
    record_type, _ = requests[kind]
    try:
        return msgspec.convert(params, record_type, strict=True)
    except msgspec.ValidationError as error:
        raise FsError(Reason.BAD_REQUEST, None, f"{kind}: {error}") from error


def run(context: FsContext, kind: str, args: Record, *, kernel: bool = False) -> Record:
    """Run the request `kind` on its decoded arguments (a daemon op's record, e.g. `FsReadArgs`, is its tool's
    arguments plus the session it names); its answer record."""
    _, handler = (KERNEL_REQUESTS if kernel else REQUESTS)[kind]
    return handler(context, args)


def serve(context: FsContext, kind: str, params: object, *, kernel: bool = False) -> dict[str, Any]:
    """Run the request `kind` (`fs.read` ... `fs.glob`) with `params` (`kernel`: a cell's host request), decoded
    once; its answer as builtin values (`msgspec.to_builtins`: what the json module writes as it is)."""
    args = decode_args(kind, params, kernel=kernel)
    answer: dict[str, Any] = msgspec.to_builtins(run(context, kind, args, kernel=kernel))
    return answer


def refusal(error: FsError) -> FsRefusal:
    """An `FsError` as its record."""
    return FsRefusal(reason=error.reason.value, path=error.path, message=error.message, version=error.version)
