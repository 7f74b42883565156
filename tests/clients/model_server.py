"""A scripted model server on 127.0.0.1 for the real MCP clients: the Anthropic Messages API as Claude Code calls it
and the OpenAI Responses API as Codex calls it, both streamed as server-sent events.

A test gives a script: a function of what the model read so far that answers the model's next turn, a call of one of
the MCP server's tools (by the server's own tool name, with its arguments) or a last text. The turn is decided from
each request's own history, so a client's retry gets the same answer. What the model read of each call is what the
client sent back as its result (Claude Code: the `tool_result` block's content; Codex: the `function_call_output`
item's output, or in code mode what the `exec` program passed on), recorded once per call with the time the call
went out and the time its result came in. A request that is not the conversation (a title, a token count, a model
list) gets a harmless answer and is only logged.

The clients name an MCP server's tools `mcp__SERVER__TOOL`: Claude Code as flat tools (deferred behind its
`ToolSearch` tool unless tool search is off: the script's first turn then loads them; while the server still
connects, the search waits a while for it, and is made again until one loads them), Codex as the namespace
`mcp__SERVER`, or, for a model in code mode, inside one JavaScript tool, `exec`, whose program calls them.
"""

from __future__ import annotations

import itertools
import json
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass(frozen=True, slots=True)
class Call:
    """The model's turn that calls one of the MCP server's tools (by the server's name for it) with these arguments."""

    tool: str
    arguments: dict[str, Any]


@dataclass(frozen=True, slots=True)
class Say:
    """The model's last turn: a text, no tool call."""

    text: str


Turn = Call | Say


@dataclass(frozen=True, slots=True)
class Image:
    """An image the client passed to the model: its MIME type and its base64 data."""

    mime_type: str
    data: str


@dataclass(frozen=True, slots=True)
class Read:
    """What the model read of one tool call: the client's result for it, as texts and images in order (`raw`: as the
    client sent it), and when the call went out and its result came in (monotonic seconds)."""

    call: Call
    texts: tuple[str, ...]
    images: tuple[Image, ...]
    is_error: bool
    raw: Any
    sent_at: float
    received_at: float

    @property
    def text(self) -> str:
        """The texts of the result, joined by newlines."""
        return "\n".join(self.texts)


Script = Callable[[Sequence[Read]], Turn]


def calls(*steps: Call | Callable[[Sequence[Read]], Call], end: str = "done") -> Script:
    """A script that makes these calls in order (a step may be a function of what was read so far), then says `end`."""

    def script(read: Sequence[Read]) -> Turn:
        if len(read) >= len(steps):
            return Say(end)
        step = steps[len(read)]
        return step if isinstance(step, Call) else step(read)

    return script


@dataclass(frozen=True, slots=True)
class Seen:
    """A request the server got: method, path, JSON body (None when not JSON), when (monotonic seconds)."""

    method: str
    path: str
    body: Any
    at: float


@dataclass(frozen=True, slots=True)
class Answer:
    """An HTTP answer: status, content type, body; `call_id` when it carries a tool call (its send time is noted)."""

    body: bytes
    content_type: str = "application/json"
    status: int = 200
    call_id: str | None = None


@dataclass
class Conversation:
    """One request of the conversation: the tool names the client offers (a namespace's as `NAMESPACE__NAME`), the
    results its history holds in order, each (the id of the call it answers, the result as the client sent it,
    whether the client marked it an error), whether the server's tools are to be loaded by a tool search first, and
    whether the client says the server is still connecting (its tools not listed yet)."""

    tools: list[str]
    results: list[tuple[str, Any, bool]] = field(default_factory=list)
    searchable: bool = False
    connecting: bool = False


TOOL_SEARCH = "ToolSearch"
"""Claude Code's tool that loads deferred tools (`select:NAME,...`); for Codex, its client-side `tool_search`."""

CONNECTING = "MCP servers are still connecting"
"""How Claude Code's request lists the MCP servers that have not connected yet, one name a line."""

CODE_TOOL = "functions__exec"
"""Codex's code-mode tool, as `OpenAI.conversation` lists it."""


def sse(events: Sequence[tuple[str, dict[str, Any]]], call_id: str | None = None) -> Answer:
    """A whole event stream, sent at once (the clients read it as it comes; it is short)."""
    text = "".join(f"event: {name}\ndata: {json.dumps(data)}\n\n" for name, data in events)
    return Answer(text.encode(), "text/event-stream", call_id=call_id)


def to_json(value: Any, call_id: str | None = None) -> Answer:
    return Answer(json.dumps(value).encode(), call_id=call_id)


class Anthropic:
    """The Messages API as Claude Code uses it: `POST /v1/messages` (streamed or not) and its token count."""

    @staticmethod
    def conversation(body: dict[str, Any], prefix: str) -> Conversation | None:
        """The conversation a request carries, or None when it offers none of the server's tools (a side request)."""
        tools = [tool.get("name", "") for tool in body.get("tools") or [] if isinstance(tool, dict)]
        found = Conversation(tools)
        said = json.dumps([body.get("system"), body.get("messages")])
        named = prefix in said  # deferred tools are listed by name
        found.connecting = Anthropic.connecting(said, prefix)
        found.searchable = TOOL_SEARCH in tools and (named or found.connecting)
        if not any(name.startswith(prefix) for name in tools) and not found.searchable:
            return None
        for message in body.get("messages") or []:
            for block in message.get("content") if isinstance(message.get("content"), list) else []:
                if block.get("type") == "tool_result":
                    result = (block.get("tool_use_id", ""), block.get("content"), bool(block.get("is_error")))
                    found.results.append(result)
        return found

    @staticmethod
    def connecting(said: str, prefix: str) -> bool:
        """Whether the request says the server is still connecting (an interactive session sends its first turn
        without waiting for it; its tool search waits a few seconds for the server, then searches its tools)."""
        server = prefix.removeprefix("mcp__").removesuffix("__")
        return CONNECTING in said and f"\\n{server}\\n" in said  # a line of its own, in the request's JSON

    @staticmethod
    def parts(content: Any) -> tuple[tuple[str, ...], tuple[Image, ...]]:
        if isinstance(content, str):
            return (content,), ()
        texts: list[str] = []
        images: list[Image] = []
        for block in content or []:
            if block.get("type") == "text":
                texts.append(block["text"])
            elif block.get("type") == "image":
                source = block.get("source") or {}
                images.append(Image(source.get("media_type", ""), source.get("data", "")))
            else:
                texts.append(json.dumps(block))
        return tuple(texts), tuple(images)

    @staticmethod
    def answer(body: dict[str, Any], turn: Turn, call_id: str, tool: str | None) -> Answer:
        """The model's turn: a `tool_use` block of the client's tool `tool`, or a text."""
        if isinstance(turn, Call):
            assert tool is not None
            arguments = {"query": f"select:{turn.tool}"} if tool == TOOL_SEARCH else turn.arguments
            block: dict[str, Any] = {"type": "tool_use", "id": call_id, "name": tool, "input": {}}
            delta = {"type": "input_json_delta", "partial_json": json.dumps(arguments)}
            whole = {**block, "input": arguments}
            stop = "tool_use"
        else:
            block = {"type": "text", "text": ""}
            delta = {"type": "text_delta", "text": turn.text}
            whole = {"type": "text", "text": turn.text}
            stop = "end_turn"
        sent = call_id if isinstance(turn, Call) else None
        usage = {"input_tokens": 10, "output_tokens": 5}
        message = {"id": f"msg_{call_id}", "type": "message", "role": "assistant", "model": body.get("model", "")}
        if not body.get("stream"):
            whole_message = {**message, "content": [whole], "stop_reason": stop, "stop_sequence": None, "usage": usage}
            return to_json(whole_message, sent)
        return sse(
            [
                ("message_start", {"type": "message_start", "message": {**message, "content": [], "usage": usage}}),
                ("content_block_start", {"type": "content_block_start", "index": 0, "content_block": block}),
                ("content_block_delta", {"type": "content_block_delta", "index": 0, "delta": delta}),
                ("content_block_stop", {"type": "content_block_stop", "index": 0}),
                ("message_delta", {"type": "message_delta", "delta": {"stop_reason": stop}, "usage": usage}),
                ("message_stop", {"type": "message_stop"}),
            ],
            sent,
        )


class OpenAI:
    """The Responses API as Codex uses it: `POST /v1/responses`, streamed. The tools are in `tools`, or in an
    `additional_tools` input item (a model on Codex's lighter request shape)."""

    @staticmethod
    def conversation(body: dict[str, Any], prefix: str) -> Conversation | None:
        offered = list(body.get("tools") or [])
        for item in body.get("input") or []:
            if isinstance(item, dict) and item.get("type") in ("additional_tools", "tool_search_output"):
                offered += item.get("tools") or []
        tools: list[str] = []
        for tool in offered:
            if isinstance(tool, dict) and tool.get("type") == "namespace":
                tools += [f"{tool.get('name')}__{inner.get('name')}" for inner in tool.get("tools") or []]
            elif isinstance(tool, dict) and tool.get("name"):
                tools.append(tool["name"])
        found = Conversation(tools)
        searchable = any(isinstance(tool, dict) and tool.get("type") == "tool_search" for tool in offered)
        found.searchable = searchable and prefix.rstrip("_") in json.dumps(body.get("input"))
        if not any(name.startswith(prefix) for name in tools) and CODE_TOOL not in tools and not found.searchable:
            return None
        for item in body.get("input") or []:
            if isinstance(item, dict) and item.get("type") in ("function_call_output", "custom_tool_call_output"):
                found.results.append((item.get("call_id", ""), item.get("output"), False))
        return found

    @staticmethod
    def parts(output: Any) -> tuple[tuple[str, ...], tuple[Image, ...]]:
        if isinstance(output, str):
            return (output,), ()
        if isinstance(output, dict) and "content" in output:  # {content, success}
            return OpenAI.parts(output["content"])
        texts: list[str] = []
        images: list[Image] = []
        for item in output or []:
            if item.get("type") in ("input_text", "output_text", "text"):
                texts.append(item["text"])
            elif item.get("type") == "input_image":
                url = str(item.get("image_url", ""))
                mime, _, data = url.removeprefix("data:").partition(";base64,")
                images.append(Image(mime, data))
            else:
                texts.append(json.dumps(item))
        return tuple(texts), tuple(images)

    @staticmethod
    def answer(body: dict[str, Any], turn: Turn, call_id: str, tool: str | None) -> Answer:
        """The model's turn: a function call of the client's tool `tool` (`NAMESPACE__NAME`), a code-mode program
        (`tool` is `CODE_TOOL`), or a text."""
        response = {"id": f"resp_{call_id}", "object": "response", "model": body.get("model", "")}
        middle: list[tuple[str, dict[str, Any]]] = []
        item: dict[str, Any] = {"id": f"item_{call_id}", "status": "completed"}
        if isinstance(turn, Say):
            content = [{"type": "output_text", "text": turn.text, "annotations": []}]
            item.update(type="message", role="assistant", content=content)
            delta = {"type": "response.output_text.delta", "item_id": item["id"], "output_index": 0, "delta": turn.text}
            middle.append(("response.output_text.delta", delta))
        elif tool == TOOL_SEARCH:
            query = turn.tool.rsplit("__", 1)[-1]
            item.update(type="tool_search_call", call_id=call_id, execution="client", arguments={"query": query})
        elif tool == CODE_TOOL:
            item.update(type="custom_tool_call", call_id=call_id, name="exec", input=code_mode_program(turn))
        else:
            assert tool is not None
            namespace, _, name = tool.rpartition("__")
            item.update(type="function_call", call_id=call_id, name=name, arguments=json.dumps(turn.arguments))
            if namespace:
                item["namespace"] = namespace
        usage = {"input_tokens": 10, "output_tokens": 5, "total_tokens": 15}
        done = {**response, "status": "completed", "output": [item], "usage": usage}
        return sse(
            [
                ("response.created", {"type": "response.created", "response": {**response, "status": "in_progress"}}),
                ("response.output_item.added", {"type": "response.output_item.added", "output_index": 0, "item": item}),
                *middle,
                ("response.output_item.done", {"type": "response.output_item.done", "output_index": 0, "item": item}),
                ("response.completed", {"type": "response.completed", "response": done}),
            ],
            call_id if isinstance(turn, Call) else None,
        )


def code_mode_program(turn: Call) -> str:
    """The `exec` program a model in code mode writes to call the tool and read its result: each content block
    passed on as it is (a text as text, an image as an image, another block as its JSON), or the value whole when it
    is not a tool result. `turn.tool` is the client's full name of the tool here."""
    return (
        f"const r = await tools.{turn.tool}({json.dumps(turn.arguments)});\n"
        "if (r && Array.isArray(r.content)) {\n"
        "  for (const b of r.content) {\n"
        "    if (b.type === 'text') text(b.text); else if (b.type === 'image') image(b); else text(b);\n"
        "  }\n"
        "} else { text(r); }\n"
    )


API = type[Anthropic] | type[OpenAI]


class ModelServer:
    """The server: `url` is its base URL (`http://127.0.0.1:PORT`); `script` decides each turn of the conversation
    with the MCP server named `server`; `read` holds what the model read of each call, in order; `requests` every
    request; `failures` every request the server could not answer (a test asserts there is none)."""

    def __init__(self, script: Script, server: str = "eukhe") -> None:
        self.script = script
        self.prefix = f"mcp__{server}__"
        self.read: list[Read] = []
        self.requests: list[Seen] = []
        self.failures: list[str] = []
        self._asked: dict[str, Call] = {}
        self._sent: dict[str, float] = {}
        self._searched: set[str] = set()
        self._ids = itertools.count(1)
        self._lock = threading.Lock()
        model = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            disable_nagle_algorithm = True

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                self.reply(model.handle("GET", self.path, None))

            def do_POST(self) -> None:
                data = self.rfile.read(int(self.headers.get("content-length", "0")))
                try:
                    body = json.loads(data)
                except ValueError:
                    body = None
                self.reply(model.handle("POST", self.path, body))

            def reply(self, answer: Answer) -> None:
                self.send_response(answer.status)
                self.send_header("content-type", answer.content_type)
                self.send_header("content-length", str(len(answer.body)))
                self.end_headers()
                self.wfile.write(answer.body)
                self.wfile.flush()
                if answer.call_id is not None:
                    with model._lock:
                        model._sent[answer.call_id] = time.monotonic()

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, name="model-server", daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def handle(self, method: str, path: str, body: Any) -> Answer:
        """The answer to one request."""
        now = time.monotonic()
        with self._lock:
            self.requests.append(Seen(method, path, body, now))
        route = path.split("?", 1)[0].rstrip("/")
        try:
            if route.endswith("/messages/count_tokens"):
                return to_json({"input_tokens": 10})
            if route.endswith("/messages") and isinstance(body, dict):
                return self.turn(Anthropic, body, now)
            if route.endswith("/responses") and isinstance(body, dict):
                return self.turn(OpenAI, body, now)
            if route.endswith("/models"):
                return to_json({"object": "list", "data": [], "models": []})
        except Exception as error:  # the client sees a 500; the test sees why
            self.failures.append(f"{method} {path}: {error!r}")
            return Answer(json.dumps({"error": {"message": repr(error)}}).encode(), status=500)
        return Answer(b"{}", status=404)

    def turn(self, api: API, body: dict[str, Any], now: float) -> Answer:
        """The model's next turn in the conversation this request carries (a side request: a short text)."""
        conversation = api.conversation(body, self.prefix)
        call_id = f"call{next(self._ids)}"
        if conversation is None:
            return api.answer(body, Say("ok"), call_id, None)
        with self._lock:
            ours = [result for result in conversation.results if result[0] in self._asked]
            for answered, content, is_error in ours[len(self.read) :]:
                texts, images = api.parts(content)
                sent_at = self._sent.get(answered, now)
                self.read.append(Read(self._asked[answered], texts, images, is_error, content, sent_at, now))
            turn = self.script(self.read[: len(ours)])
            if isinstance(turn, Say):
                return api.answer(body, turn, call_id, None)
            if self.prefix + turn.tool not in conversation.tools and conversation.searchable:
                # the tool is deferred: the model searches for it first (once: a search that does not load it fails,
                # unless the server was still connecting)
                if turn.tool in self._searched and not conversation.connecting:
                    raise KeyError(f"a tool search did not load {self.prefix + turn.tool}")
                self._searched.add(turn.tool)
                return api.answer(body, Call(self.prefix + turn.tool, {}), call_id, TOOL_SEARCH)
            tool = self.client_tool(conversation, turn.tool)
            self._asked[call_id] = turn
            if tool == CODE_TOOL:
                turn = Call(self.prefix + turn.tool, turn.arguments)
            return api.answer(body, turn, call_id, tool)

    def client_tool(self, conversation: Conversation, tool: str) -> str:
        """The client's name of the server's `tool` (or Codex's code-mode tool, which reaches every tool)."""
        if self.prefix + tool in conversation.tools:
            return self.prefix + tool
        if CODE_TOOL in conversation.tools:
            return CODE_TOOL
        raise KeyError(f"the client offers no {self.prefix + tool}: {sorted(conversation.tools)}")

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()


@contextmanager
def model_server(script: Script, server: str = "eukhe") -> Iterator[ModelServer]:
    """A running scripted server, stopped at the end."""
    model = ModelServer(script, server)
    model.start()
    try:
        yield model
    finally:
        model.stop()
