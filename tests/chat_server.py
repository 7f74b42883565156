"""A scripted OpenAI Chat Completions server on 127.0.0.1 for prompt children's tests (no network, no model).

Each test gives a script: a function of the request's body (and the request number) that answers a `Scripted`
(status, JSON body or raw bytes, headers), or `HOLD` to keep the request open until the client goes (the server then
sets `closed`, the event a cancel test waits on). Every request is kept (`requests`: path, headers, body).
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Scripted:
    """One answer: status, a JSON body (or raw bytes), headers."""

    body: Any = None
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    raw: bytes | None = None


HOLD = object()
"""The script's answer that keeps the request open until the client closes the connection."""


@dataclass
class Seen:
    """A request the server got."""

    path: str
    headers: dict[str, str]
    body: Any
    at: float


Script = Callable[[Any, int], "Scripted | object"]


def reply(
    content: str | None = None, *calls: tuple[str, dict[str, Any] | str], usage: tuple[int, int] = (10, 5)
) -> Scripted:
    """A 200 completion: `content`, and tool calls `(name, arguments)` (a string is sent as the arguments' text)."""
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if calls:
        message["tool_calls"] = [
            {
                "id": f"call_{index}",
                "type": "function",
                "function": {"name": name, "arguments": args if isinstance(args, str) else json.dumps(args)},
            }
            for index, (name, args) in enumerate(calls)
        ]
    prompt, completion = usage
    body = {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls" if calls else "stop"}],
        "usage": {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion},
    }
    return Scripted(body)


class ChatServer:
    """The server: `url` is its base URL (`.../v1`); `script` answers each request."""

    def __init__(self, script: Script) -> None:
        self.script = script
        self.requests: list[Seen] = []
        self.closed = threading.Event()
        self.holding = threading.Event()
        self._lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            disable_nagle_algorithm = True  # the headers and the body are two writes: no delayed-ACK stall between

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                length = int(self.headers.get("content-length", "0"))
                data = self.rfile.read(length)
                try:
                    body = json.loads(data)
                except ValueError:
                    body = None
                with server._lock:
                    server.requests.append(Seen(self.path, dict(self.headers.items()), body, time.monotonic()))
                    number = len(server.requests)
                answer = server.script(body, number)
                if answer is HOLD:
                    server.holding.set()
                    self.connection.settimeout(60)
                    try:
                        while self.connection.recv(1024):
                            pass
                    except OSError:
                        pass
                    server.closed.set()
                    self.close_connection = True
                    return
                assert isinstance(answer, Scripted)
                payload = answer.raw if answer.raw is not None else json.dumps(answer.body).encode()
                self.send_response(answer.status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(payload)))
                for key, value in answer.headers.items():
                    self.send_header(key, value)
                self.end_headers()
                self.wfile.write(payload)

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, name="chat-server", daemon=True)

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}/v1"

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()


@contextmanager
def chat_server(script: Script) -> Iterator[ChatServer]:
    """A running scripted server, stopped at the end."""
    server = ChatServer(script)
    server.start()
    try:
        yield server
    finally:
        server.stop()


def turns(*answers: Scripted | object) -> Script:
    """A script that answers the requests in order (the last answer repeats)."""

    def script(body: Any, number: int) -> Scripted | object:
        return answers[min(number, len(answers)) - 1]

    return script
