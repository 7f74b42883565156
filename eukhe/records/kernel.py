"""The kernel protocol's records (S3 "The protocol"; docs/kernel-protocol.md): the frames the host reads after the
gate, and the requests it writes.

A frame names its kind in `event` and carries `id` (null for the kernel's own notices). The gate decides on the
line first; the host then decodes the frame strictly as one of these, and a frame that does not fit is a protocol
fault (the kernel is replaced, loudly).
"""

from __future__ import annotations

from typing import Any, Literal, get_args

from eukhe.records.base import Record


class ReadyFrame(Record, tag="ready", tag_field="event"):
    """The kernel's handshake: its protocol version, pid and Python version, and the directory a venv of its Python
    has under `lib/` (`python3.11`; a kernel that does not say is taken for CPython of its version)."""

    protocol: int
    pid: int
    python: str
    id: None = None
    lib: str | None = None


class StdoutFrame(Record, tag="stdout", tag_field="event"):
    """Output on stdout, tagged with its cell (null: untagged raw output)."""

    id: str | None
    text: str


class StderrFrame(Record, tag="stderr", tag_field="event"):
    """Output on stderr, tagged with its cell (null: untagged raw output)."""

    id: str | None
    text: str


class DisplayFrame(Record, tag="display", tag_field="event"):
    """A rich display of the cell: a MIME bundle."""

    id: str | None
    data: dict[str, Any]
    metadata: dict[str, Any]


class ResultFrame(Record, tag="result", tag_field="event"):
    """The repr of a cell's trailing expression, and its MIME bundle when it has more than its repr (an image,
    Markdown, HTML)."""

    id: str | None
    repr: str
    data: dict[str, Any] | None = None


class ErrorFrame(Record, tag="error", tag_field="event"):
    """A cell's exception."""

    id: str | None
    ename: str
    evalue: str
    traceback: list[str]


class DoneFrame(Record, tag="done", tag_field="event"):
    """A host request to the kernel ended: a cell (`status` ok, error, interrupted), an interrupt (`found`) or a
    remote call (`result`, or `reason` and `message`)."""

    id: str | None
    status: str
    found: bool | None = None
    reason: str | None = None
    result: Any = None
    message: str | None = None


class DiagnosticFrame(Record, tag="diagnostic", tag_field="event"):
    """A kernel notice for the host's log."""

    id: str | None
    message: str


class ProcessFrame(Record, tag="process", tag_field="event"):
    """A `bash()` child's process group started or was waited for (the host reaps the started ones)."""

    id: str | None
    pgid: int
    state: Literal["started", "ended"]


KernelEvent = (
    ReadyFrame
    | StdoutFrame
    | StderrFrame
    | DisplayFrame
    | ResultFrame
    | ErrorFrame
    | DoneFrame
    | DiagnosticFrame
    | ProcessFrame
)

KERNEL_EVENT_RECORDS: dict[str, type[KernelEvent]] = {
    tag: frame for frame in get_args(KernelEvent) if isinstance(tag := frame.__struct_config__.tag, str)
}
"""Each kernel event's record by its `event` tag: a frame converts to its own record at once (msgspec caches what it
knows of a record, not of a union, which it would work out again on every frame)."""


class ExecuteRequest(Record, tag="execute", tag_field="request", omit_defaults=True):
    """Run a cell; first put the `site_dirs` at the end of `sys.path` (again: their new `.pth` files are read and
    the import caches dropped), when the host names any."""

    id: str
    code: str
    site_dirs: list[str] | None = None


class InterruptRequest(Record, tag="interrupt", tag_field="request"):
    """Interrupt the running cell, or `target` (also one not started yet)."""

    id: str
    target: str | None


class ShutdownRequest(Record, tag="shutdown", tag_field="request"):
    """Stop: the kernel kills its `bash()` groups, sends what is pending, writes its namespace snapshot when
    `snapshot` (idle culling; the next kernel of the session reads it back), answers and exits."""

    id: str
    snapshot: bool = False


class CallRequest(Record, tag="call", tag_field="request"):
    """Call the `@rlm.remote` function `name` (registered from `module`.`function`) with keyword arguments `args`,
    on the kernel's call lane (never behind a cell)."""

    id: str
    name: str
    module: str
    function: str
    args: dict[str, Any]


class HostReplyError(Record):
    """Why a host request failed: a catalogue code, a message, and what the handler adds (a file tool's `reason`,
    `path` and `version`)."""

    code: str
    message: str
    details: dict[str, Any] | None = None


class HostReplyOk(Record, tag="host_reply", tag_field="request"):
    """The one reply to an accepted host request."""

    id: str | int
    status: Literal["ok"]
    result: Any


class HostReplyRefused(Record, tag="host_reply", tag_field="request"):
    """The one reply to a refused or failed host request (`duplicate`: a used id; the kernel drops it)."""

    id: str | int
    status: Literal["error", "duplicate"]
    error: HostReplyError
