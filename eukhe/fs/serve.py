"""One entry for the kernel's `fs.*` host requests: decode the params strictly, run the tool, encode the answer.

`serve(context, "fs.read", {"path": "x"})` returns the answer as plain JSON values; any refusal, also of params of the
wrong shape (`bad_request`), is an `FsError`, which `refusal` turns into its record (`reason`, `path`, `message`,
`version`). The host-request handler, the CLI and the Python API all go through these same functions.
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


def serve(context: FsContext, kind: str, params: object, *, kernel: bool = False) -> dict[str, Any]:
    """Run the request `kind` (`fs.read` ... `fs.glob`) with `params` (`kernel`: a cell's host request); its answer
    as JSON values."""
    args = decode_args(kind, params, kernel=kernel)
    _, handler = (KERNEL_REQUESTS if kernel else REQUESTS)[kind]
    answer: dict[str, Any] = msgspec.json.decode(msgspec.json.encode(handler(context, args)))
    return answer


def refusal(error: FsError) -> FsRefusal:
    """An `FsError` as its record."""
    return FsRefusal(reason=error.reason.value, path=error.path, message=error.message, version=error.version)
