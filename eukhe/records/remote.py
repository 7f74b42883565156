"""The records of `@remote` (spec S3 "@remote"; docs/remote.md): a kernel function the host offers as a tool.

- `RemoteRegistration`: the params of the kernel's `remote.register` host request (decoded strictly by the host).
- `RemoteFunction`: one function as `remote.list` and `session.remote.list()` show it, with its tool name.
- `RemoteCallAnswer`: the answer of `remote.call`, with exactly one of `result` (the function's JSON result),
  `output` (that result's JSON text, bounded by the session's limits, when it did not fit them) or `error`
  (`RemoteCallFailure`: the kind of `RemoteCallError` and its message).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

import msgspec
from msgspec import UNSET, UnsetType

from eukhe.records.base import Record
from eukhe.records.output import OutputWindow

REMOTE_NAME = r"^[A-Za-z_][A-Za-z0-9_.-]{0,63}$"
"""A remote function's name (the kernel stub refuses any other at decoration)."""
RemoteName = Annotated[str, msgspec.Meta(pattern=REMOTE_NAME)]
TOOL_PREFIX = "remote/"
"""A remote function is tool `remote/<name>`, reachable through the `dyn` entry only."""

RemoteCallErrorKind = Literal["not_running", "unreachable", "unknown", "timeout", "failed"]
"""How a remote call failed:

- `not_running`: the session's kernel is not running (no cell started it, or it ended);
- `unreachable`: the kernel stopped or restarted before it replied (answered at once, not at the bound);
- `unknown`: no function of that name is registered in the running kernel;
- `timeout`: no reply within the call's bound (a sync function's thread goes on; the kernel serves the rest);
- `failed`: the function ran and failed; `reason` says how (`bad_arguments`, `raised`, `unencodable`,
  `over_limit`, `cancelled`).
"""


class RemoteRegistration(Record):
    """What the kernel announces of a function (`remote.register`): its name, where it lives, its docstring and the
    JSON Schema of its keyword arguments, derived from its type hints."""

    name: RemoteName
    module: str
    qualname: str
    doc: str | None
    schema: dict[str, Any]


class RemoteFunction(Record):
    """One registered function of the running kernel."""

    name: str
    tool: str
    doc: str | None
    schema: dict[str, Any]
    module: str
    qualname: str


class RemoteList(Record):
    """`remote.list`: the functions the session's running kernel offers, by name."""

    functions: list[RemoteFunction]


class RemoteCallFailure(Record):
    """A failed remote call: the kind of `RemoteCallError`, its message (bounded by the session's limits) and, for
    `failed`, the kernel's reason."""

    kind: RemoteCallErrorKind
    message: str
    reason: str | None = None


class RemoteCallAnswer(Record):
    """`remote.call`: `{"result": ...}`, `{"output": {...}}` (the result's JSON text, past the session's limits:
    its window, notice and artifact), or `{"error": {"kind", "message", "reason"}}`."""

    result: Any | UnsetType = UNSET
    output: OutputWindow | UnsetType = UNSET
    error: RemoteCallFailure | UnsetType = UNSET
