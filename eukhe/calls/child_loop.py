"""A prompt child's run (spec S3 "A subagent's workspace"): a model works on the prompt with the session's tools.

The loop is a shell over the core's decisions (`eukhe.core.agent`): it asks the model (`ChatModel`, with its
retries), reads what the reply asks for, runs each tool call through the session's `ToolCalls` (journaled, bounded,
in the child's working directory and sandbox; the model reads exactly the text MCP shows), and steps the core's loop
until it ends: `answer(value)` or a reply without a tool call (answered), its turns or timeout spent (stalled), the
model failed (failed, `model_error`). A reply the child cannot use, an unknown tool or arguments that do not decode
become an error result the model reads, and the loop goes on.

The conversation is the child session's journal: the system message (a `notice` entry), the prompt (`user`), each
assistant message with its usage (`assistant`), and each tool call's start and settle (the Harness's records).
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
from collections.abc import Callable
from dataclasses import asdict
from typing import Any

from eukhe.calls.catalog import CALL_TOOLS
from eukhe.calls.descriptions import CHILD_DESCRIPTIONS, DESCRIPTIONS
from eukhe.calls.model import ChatModel, ModelFailedError, NotJson
from eukhe.calls.runner import ToolCalls
from eukhe.calls.texts import error_text
from eukhe.children.family import AgentSession
from eukhe.children.run import NO_TIMEOUT_MS
from eukhe.clock import wait_within
from eukhe.core import agent as core
from eukhe.core.bound import Off
from eukhe.core.skills import CATALOG_MAX_BYTES, catalog_text, offered
from eukhe.errors import EukheError, InputError, error_code, error_details
from eukhe.harness.tool import ToolExecutionApi, ToolRegistration
from eukhe.records.base import Record
from eukhe.records.children import AnswerTool, ChildError, ChildUsage, MessageParentTool, RunEnd, RunRequest
from eukhe.records.schema import object_schema
from eukhe.records.settings import ModelProvider
from eukhe.skills import discover

CHILD_TOOLS = (
    "bash",
    "ipython",
    "read",
    "write",
    "edit",
    "grep",
    "glob",
    "jobs_list",
    "jobs_wait",
    "jobs_cancel",
    "jobs_write",
    "jobs_signal",
)
"""The session tools a prompt child has (a child does not spawn children of its own)."""
MESSAGE_PARENT = "message_parent"
ANSWER = "answer"

ROLE = (
    "You are a subagent: another agent, your parent, gave you the task in the next message. You work in session "
    "{session}, in the working directory {cwd} (relative paths start there), with your own shell (bash), Python "
    "kernel (ipython), file tools and jobs; every call runs in your session, bounded, under your sandbox. Your "
    "tools: {tools}. Write what your parent should read into files in your working directory: your parent reads "
    "them (when you work in an isolated copy, it gets your files back path by path when you end). Tell your parent "
    "something while you work with message_parent. End with answer(value), or reply without a tool call: your "
    "reply is then your answer."
)


def tool_specs() -> list[dict[str, Any]]:
    """The child's tools as Chat Completions function tools: the records and descriptions `eukhe mcp` lists, then
    `message_parent` and `answer`."""
    rows: list[tuple[str, type[Record], str]] = [
        (name, CALL_TOOLS[name].args, DESCRIPTIONS[name]) for name in CHILD_TOOLS
    ]
    rows += [
        (MESSAGE_PARENT, MessageParentTool, CHILD_DESCRIPTIONS[MESSAGE_PARENT]),
        (ANSWER, AnswerTool, CHILD_DESCRIPTIONS[ANSWER]),
    ]
    return [
        {"type": "function", "function": {"name": name, "description": text, "parameters": object_schema(args)}}
        for name, args, text in rows
    ]


TOOL_SPECS = tool_specs()
OFFERED = frozenset([*CHILD_TOOLS, MESSAGE_PARENT, ANSWER])


def introduction(session: AgentSession) -> str:
    """The system prompt's part that does not change during the run: what the child is, its working directory, its
    tools, and the catalog of the skills offered there."""
    role = ROLE.format(session=session.id, cwd=session.cwd, tools=", ".join(sorted(OFFERED)))
    try:
        catalog = catalog_text(offered(discover(session.cwd).verdicts), CATALOG_MAX_BYTES)
    except (EukheError, OSError):
        catalog = ""
    return role + ("\n\n" + catalog.rstrip("\n") if catalog else "")


def system_prompt(session: AgentSession, intro: str) -> str:
    """The system prompt as it stands: the introduction, then the session's own (its working directory, and the
    running-jobs section exactly while a job runs: spec S2 jobs 7)."""
    return intro + "\n\n" + session.system_prompt()


SAID = frozenset({"notice", "user", "assistant"})
"""The kinds of the entries that hold the conversation's messages (`{"message": ...}`)."""


def child_usage(usage: core.Usage) -> ChildUsage:
    return ChildUsage(**asdict(usage))


def _usage(kept: Any) -> core.Usage:
    """An assistant entry's usage as the journal keeps it (one model call if it is not readable)."""
    try:
        return core.Usage(**kept) if isinstance(kept, dict) else core.Usage(model_calls=1)
    except TypeError:
        return core.Usage(model_calls=1)


class _ChildTools:
    """`message_parent` and `answer` on the child session's Harness (journaled like every call)."""

    def __init__(self, session: AgentSession, on_message: Callable[[str], None]) -> None:
        self.answered = False
        self.value: Any = None
        self._on_message = on_message
        harness = session.harness
        harness.register(ToolRegistration(MESSAGE_PARENT, MessageParentTool, self._message, truncation=Off()))
        harness.register(ToolRegistration(ANSWER, AnswerTool, self._answer, truncation=Off()))

    async def _message(self, args: MessageParentTool, api: ToolExecutionApi) -> str:
        self._on_message(args.text)
        return "sent to your parent"

    async def _answer(self, args: AnswerTool, api: ToolExecutionApi) -> str:
        self.answered, self.value = True, args.value
        return "answer taken: your work ends here"


class ChildLoop:
    """One prompt child's conversation with its model."""

    def __init__(self, session: AgentSession, request: RunRequest, on_message: Callable[[str], None]) -> None:
        if request.prompt is None or request.provider is None or not request.api_key:
            raise InputError("bad_args", "a prompt run takes its prompt, provider and api_key", field="provider")
        self.session = session
        self.request = request
        self.provider: ModelProvider = request.provider
        self.calls = ToolCalls.of(session)
        self.own = _ChildTools(session, on_message)
        self.usage = core.Usage()
        self.loop = core.start(self.provider.max_turns)
        self.messages: list[dict[str, Any]] = []
        self.intro = ""

    async def run(self) -> RunEnd:
        """The whole run: the loop within the child's timeout (stalled past it)."""
        model = ChatModel(self.provider, self.request.api_key or "", self.session.job_table.clock)
        talk = asyncio.ensure_future(self._talk(model))
        try:
            budget = NO_TIMEOUT_MS if self.request.timeout_ms is None else self.request.timeout_ms
            if not await wait_within(self.session.job_table.clock, talk, budget):
                talk.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await talk
                if not self.loop.ended:
                    self.loop = core.step(self.loop, core.Event.TIMED_OUT)
                message = f"the run did not end within its timeout of {self.request.timeout_ms} ms"
                return self._end(RunEnd(status="stalled", error=ChildError(reason="stalled", message=message)))
            return talk.result()
        finally:
            if not talk.done():
                talk.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await talk
            await model.close()

    def _end(self, end: RunEnd) -> RunEnd:
        return RunEnd(status=end.status, answer=end.answer, error=end.error, usage=child_usage(self.usage))

    def _say(self, kind: str, message: dict[str, Any], **more: Any) -> None:
        """Keep a message of the conversation, in memory and in the session's journal (durable with the next
        commit: the next tool call's settle, or the run's end)."""
        self.messages.append(message)
        self.session.commit([self.session.entry_record(kind, {"message": message, **more})], sync=False)

    async def _talk(self, model: ChatModel) -> RunEnd:
        ended = await self._resume()
        if ended is not None:
            return ended
        while not self.loop.ended:
            self.messages[0] = {"role": "system", "content": system_prompt(self.session, self.intro)}  # jobs now
            try:
                body = await model.complete(self.messages, TOOL_SPECS)
            except ModelFailedError as failure:
                self.loop = core.step(self.loop, core.Event.MODEL_FAILED)
                said = f"HTTP {failure.status}" if failure.status is not None else "no HTTP answer"
                message = f"the model failed after {failure.attempts} attempts ({said}): {failure.message}"
                error = ChildError(reason="model_error", message=message, http_status=failure.status)
                return self._end(RunEnd(status="failed", error=error))
            reply = core.read_reply(body) if not isinstance(body, NotJson) else core.Unusable(body.problem)
            usage = core.usage_of(body) if not isinstance(body, NotJson) else core.Usage(model_calls=1)
            self.usage = self.usage.plus(usage)
            if isinstance(reply, core.Unusable):
                self._unusable(reply, usage)
                continue
            if isinstance(reply, core.Replied):
                self._say("assistant", reply.message, usage=asdict(usage))
                self.loop = core.step(self.loop, core.Event.REPLIED)
                return self._end(RunEnd(status="answered", answer=reply.text))
            ids = [f"call-{secrets.token_hex(6)}" for _ in reply.calls]  # journaled first: a resume finds each
            self._say("assistant", reply.message, usage=asdict(usage), calls=ids)
            self.loop = core.step(self.loop, core.Event.TOOLS_ASKED)
            ended = await self._act([(asked, call_id, None) for asked, call_id in zip(reply.calls, ids, strict=True)])
            if ended is not None:
                return ended
        message = f"the model replied {self.loop.turns} times (max_turns) without an answer"
        return self._end(RunEnd(status="stalled", error=ChildError(reason="stalled", message=message)))

    async def _act(self, calls: list[tuple[core.AskedCall, str | None, dict[str, Any] | None]]) -> RunEnd | None:
        """Run a reply's tool calls in order (a call whose result the journal has is not run again: the model reads
        that result); the answer if one was `answer`, else None once they all ran."""
        for asked, call_id, result in calls:
            if result is None:
                await self._run_call(asked, call_id)
            else:
                self._took(asked, result)
            if self.own.answered:
                self.loop = core.step(self.loop, core.Event.ANSWER_CALLED)
                return self._end(RunEnd(status="answered", answer=self.own.value))
        self.loop = core.step(self.loop, core.Event.TOOLS_RAN)
        return None

    def _took(self, asked: core.AskedCall, result: dict[str, Any]) -> None:
        """A call's result from the journal, as the model read it."""
        self.usage = self.usage.plus(core.Usage(tool_calls=1))
        output = result.get("output")
        text = output.get("text", "") if isinstance(output, dict) else ""
        self.messages.append({"role": "tool", "tool_call_id": asked.id, "content": str(text)})
        if asked.name == ANSWER and result.get("status") == "returned":
            arguments = core.read_arguments(asked.arguments)
            self.own.answered, self.own.value = True, arguments.get("value") if isinstance(arguments, dict) else None

    async def _resume(self) -> RunEnd | None:
        """Start the conversation, or take it up from the session's journal (a child whose worker died mid-loop):
        its messages, turns and usage; the calls of its last reply that have no result run now. The end, if the
        journal already holds it (an answer)."""
        self.intro = introduction(self.session)
        entries = self.session.branch()
        said = [e for e in entries if e.kind in SAID and isinstance(e.content, dict) and "message" in e.content]
        if not said:
            self._say("notice", {"role": "system", "content": system_prompt(self.session, self.intro)})
            self._say("user", {"role": "user", "content": self.request.prompt})
            return None
        results = {
            str(e.content.get("call")): e.content
            for e in entries
            if e.kind == "tool_result" and isinstance(e.content, dict)
        }
        for entry in said:
            message, content = entry.content["message"], entry.content
            self.messages.append(message)
            if entry.kind != "assistant":
                continue
            self.usage = self.usage.plus(_usage(content.get("usage")))
            reply = core.read_reply({"choices": [{"message": message}]})
            if isinstance(reply, core.Replied) and "unusable" not in content:
                self.loop = core.step(self.loop, core.Event.REPLIED)
                return self._end(RunEnd(status="answered", answer=reply.text))
            self.loop = core.step(self.loop, core.Event.TOOLS_ASKED)
            if not isinstance(reply, core.ToolsAsked):  # an unusable reply: the next entry tells the model so
                self.loop = core.step(self.loop, core.Event.TOOLS_RAN)
                continue
            ids = content.get("calls") if isinstance(content.get("calls"), list) else []
            ids = [*ids, *([None] * (len(reply.calls) - len(ids)))]
            ended = await self._act(
                [(asked, call_id, results.get(str(call_id))) for asked, call_id in zip(reply.calls, ids, strict=False)]
            )
            if ended is not None:
                return ended
        return None

    def _unusable(self, reply: core.Unusable, usage: core.Usage) -> None:
        """A reply the child cannot use counts a turn; the model is told what was wrong with it."""
        self.loop = core.step(self.loop, core.Event.TOOLS_ASKED)
        self._say("assistant", {"role": "assistant", "content": ""}, usage=asdict(usage), unusable=reply.problem)
        text = f"[your last reply could not be used: {reply.problem}. Reply with tool calls, or with your answer]"
        self._say("user", {"role": "user", "content": text})
        self.loop = core.step(self.loop, core.Event.TOOLS_RAN)

    async def _run_call(self, asked: core.AskedCall, call_id: str | None) -> None:
        """Run one tool call the model asked for; the model reads its text (or why it was refused)."""
        self.usage = self.usage.plus(core.Usage(tool_calls=1))
        text = await self._call_text(asked, call_id)
        self.messages.append({"role": "tool", "tool_call_id": asked.id, "content": text})

    async def _call_text(self, asked: core.AskedCall, call_id: str | None) -> str:
        if asked.name not in OFFERED:
            return error_text("unknown_tool", f"no tool named {asked.name!r}; yours: {', '.join(sorted(OFFERED))}")
        arguments = core.read_arguments(asked.arguments)
        if isinstance(arguments, str):
            return error_text("bad_tool_arguments", f"{asked.name}: {arguments}")
        try:
            if asked.name in (MESSAGE_PARENT, ANSWER):
                result = await self.session.harness.call(asked.name, arguments, call_id=call_id, raise_failure=True)
                return result.output.text
            return (await self.calls.call(asked.name, arguments, call_id=call_id)).text
        except EukheError as error:
            details = error_details(error)
            reason = details.get("reason") if details is not None else None
            return error_text(error_code(error), str(error), reason if isinstance(reason, str) else None)


async def run_prompt(session: AgentSession, request: RunRequest, on_message: Callable[[str], None]) -> RunEnd:
    """A prompt child's run (the `PromptRun` plugged into `eukhe.children.run`)."""
    return await ChildLoop(session, request, on_message).run()
