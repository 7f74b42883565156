"""A session's `@remote` functions (spec S3 "@remote" 2-4): the kernel's functions offered as tools.

`SessionRemote` is `session.remote`. It serves the kernel's `remote.register` host requests (each decoded strictly
as a `RemoteRegistration`; a second registration of a name replaces the first) and keeps what the running kernel
registered: a kernel that ends takes its functions with it. Each function is tool `remote/<name>`, reached through
the Harness's one `dyn` entry (this is a `DynamicSource`), never in the roster of built-in tools.

A call goes to the running kernel as request `call` on its call lane (it never starts a kernel, never waits for a
cell) and waits on the session's clock at most its bound: its `budget_ms` within the session's blocking budget.
The answer is the result, or a `RemoteCallError`: `not_running`, `unreachable` (at once when the kernel stops or
restarts before it replies), `unknown`, `timeout` (a sync function's thread goes on in the kernel; an `async def`
is cancelled), `failed` (the kernel's reason: `bad_arguments`, `raised`, `unencodable`, `over_limit`,
`cancelled`). Answer texts keep the session's output limits: a result whose JSON text passes them comes as that
text's bounded window (`output`, with the notice and the artifact holding it whole), and a longer error message
is cut the same way.
"""

from __future__ import annotations

import asyncio
import builtins
import itertools
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any

from eukhe.clock import wait_within
from eukhe.core.gate import Admission
from eukhe.core.job import blocking_span
from eukhe.harness.dyn import DynamicTool
from eukhe.harness.tool import ToolExecutionApi
from eukhe.kernel.errors import RemoteCallError
from eukhe.kernel.manager import KernelManager
from eukhe.output import BoundedOutput, BoundedResult
from eukhe.records.base import convert, encode
from eukhe.records.remote import (
    TOOL_PREFIX,
    RemoteCallAnswer,
    RemoteFunction,
    RemoteRegistration,
)

if TYPE_CHECKING:
    from eukhe.session.session import Session

JSON = Any
REGISTER = "remote.register"
"""The host request a kernel announces a function with."""


@dataclass(frozen=True, slots=True)
class _Registered:
    """A registration and the kernel that made it (the manager's count of kernels started, at the time)."""

    registration: RemoteRegistration
    kernel: int


def row_of(registration: RemoteRegistration) -> RemoteFunction:
    """A registration as `remote.list` shows it."""
    return RemoteFunction(
        name=registration.name,
        tool=TOOL_PREFIX + registration.name,
        doc=registration.doc,
        schema=registration.schema,
        module=registration.module,
        qualname=registration.qualname,
    )


class SessionRemote:
    """`session.remote`: the running kernel's `@rlm.remote` functions, listed and called."""

    def __init__(self, session: Session, manager: Callable[[], KernelManager | None]) -> None:
        self._session = session
        self._manager_now = manager  # the session's kernel manager, once a cell made one
        self._functions: dict[str, _Registered] = {}
        self._calls = itertools.count(1)

    # ---- what the kernel registered -------------------------------------------------------------------------

    def _manager(self) -> KernelManager | None:
        manager = self._manager_now()
        return manager if manager is not None and manager.takes_calls else None

    def _live(self) -> dict[str, RemoteRegistration]:
        """The registrations of the running kernel (none when no kernel runs)."""
        manager = self._manager()
        if manager is None:
            return {}
        current = manager.kernels_started
        return {name: found.registration for name, found in self._functions.items() if found.kernel == current}

    def list(self) -> list[RemoteFunction]:
        """The running kernel's functions, by name (empty when no kernel runs)."""
        return [row_of(registration) for _, registration in sorted(self._live().items())]

    async def serve_register(self, admission: Admission) -> JSON:
        """The kernel's `remote.register` host request: keep the function (replacing one of the same name)."""
        registration = convert(admission.params, RemoteRegistration, code="bad_remote", what=REGISTER)
        manager = self._manager_now()
        replaced = registration.name in self._live()
        self._functions[registration.name] = _Registered(registration, manager.kernels_started if manager else 0)
        return {"tool": TOOL_PREFIX + registration.name, "replaced": replaced}

    # ---- calls ----------------------------------------------------------------------------------------------

    async def invoke(self, name: str, args: Mapping[str, JSON] | None = None, budget_ms: int | None = None) -> JSON:
        """Call function `name` with keyword arguments `args`; its JSON result, as the kernel sent it. Waits at
        most `budget_ms` within the session's blocking budget. Raises RemoteCallError (its message bounded by the
        session's limits)."""
        try:
            return await self._invoke(name, dict(args or {}), budget_ms)
        except RemoteCallError as error:
            raise self._bounded_error(error) from None

    async def _invoke(self, name: str, args: dict[str, JSON], budget_ms: int | None) -> JSON:
        session = self._session
        session.check_open()
        manager = self._manager()
        if manager is None:
            raise RemoteCallError("not_running", "the session's Python kernel is not running: a cell starts it")
        registration = self._live().get(name)
        if registration is None:
            known = ", ".join(sorted(self._live())) or "none"
            raise RemoteCallError("unknown", f"no remote function {name!r} in the running kernel (known: {known})")
        span = blocking_span(budget_ms, session.budget_ms)
        call_id, future = await manager.start_call(name, registration.module, registration.qualname, args)
        try:
            answered = await wait_within(session.job_table.clock, future, span)
        except asyncio.CancelledError:
            manager.abandon_call(call_id)
            raise
        if not answered:
            manager.abandon_call(call_id)
            raise RemoteCallError(
                "timeout",
                f"remote function {name!r} did not answer within {span} ms (a sync function goes on in its own "
                f"thread; the kernel serves the next cells and calls)",
            )
        return future.result()

    async def call(
        self, name: str, args: Mapping[str, JSON] | None = None, budget_ms: int | None = None
    ) -> RemoteCallAnswer:
        """Call function `name`: `RemoteCallAnswer` with `result`, or `output` (the result's JSON text, bounded,
        when it passes the session's limits). Raises RemoteCallError (`.kind`; `.answer()`: as the daemon says it)."""
        value = await self.invoke(name, args, budget_ms)
        window = self._bound(encode(value), f"remote-{name}")
        if not window.truncated:
            return RemoteCallAnswer(result=value)
        return RemoteCallAnswer(output=window.to_record())

    async def answer(
        self, name: str, args: Mapping[str, JSON] | None = None, budget_ms: int | None = None
    ) -> RemoteCallAnswer:
        """`call`, with a RemoteCallError as the answer's `error` (the daemon's `remote.call`)."""
        try:
            return await self.call(name, args, budget_ms)
        except RemoteCallError as error:
            return error.answer()

    def _bound(self, data: bytes, prefix: str) -> BoundedResult:
        session = self._session
        output = BoundedOutput(
            session.settings.bound, session.artifact_dir, artifact_prefix=f"{prefix}-{next(self._calls)}"
        )
        output.write(data)
        return output.close()

    def _bounded_error(self, error: RemoteCallError) -> RemoteCallError:
        """The error with its message within the session's limits (the notice names the artifact holding it)."""
        window = self._bound(error.message.encode("utf-8", "surrogateescape"), "remote-error")
        if not window.truncated:
            return error
        text = window.text.decode("utf-8", "replace")
        return RemoteCallError(error.kind, f"{text}\n{window.notice}", reason=error.reason)

    # ---- the `dyn` entry's source ---------------------------------------------------------------------------

    def dynamic_tool(self, name: str) -> DynamicTool | None:
        """Tool `remote/<name>`: a registered function, or an unknown one whose call answers `unknown` (or
        `not_running`) like any call."""
        if not name.startswith(TOOL_PREFIX):
            return None
        function = name[len(TOOL_PREFIX) :]
        registration = self._live().get(function)
        schema = registration.schema if registration is not None else {}
        doc = (registration.doc or "") if registration is not None else ""
        return DynamicTool(name, schema, partial(self._execute, function), doc)

    def dynamic_tools(self) -> builtins.list[DynamicTool]:
        """The running kernel's functions, as tools `remote/<name>`."""
        return [
            DynamicTool(row.tool, row.schema, partial(self._execute, row.name), row.doc or "") for row in self.list()
        ]

    async def _execute(self, function: str, args: dict[str, JSON], api: ToolExecutionApi) -> str:
        """A `dyn` call of `remote/<function>`: the result's JSON text (the call's output, bounded by the harness);
        a RemoteCallError fails the call, with `{"error": ...}` as its details."""
        try:
            value = await self.invoke(function, args)
        except RemoteCallError as error:
            api.details(error.answer().to_json())
            raise
        return encode(value).decode("utf-8")
