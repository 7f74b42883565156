"""A throwaway MCP server over stdio that answers results of a shape and size a test asks for, to learn what a real
client does with a tool result independently of eukhe: how much text reaches the model, whether it passes
`structuredContent` or `content`, images, resource links.

JSON-RPC is written by hand here (a line a message, as MCP's stdio transport says) so that every message the client
sends, `initialize` with its `clientInfo` and capabilities first, is logged exactly as it came (`--log FILE`, one
JSON a line). Tools:

- `sized {size, alphabet}`: one text block of exactly `size` characters (`text(size, alphabet)`), no
  `structuredContent`, no output schema.
- `both {}`: a text block `CONTENT-TEXT` and `structuredContent` `{"value": "STRUCTURED-VALUE"}` (with an output
  schema, as the specification wants when both are sent).
- `picture {}`: a text block, a 1x1 PNG as `image`, and a `resource_link`.

    python -m tests.clients.probe_server --log FILE [--tasks]

`--tasks` advertises the tasks capability and marks every tool as one a task may run, to see whether a client asks
for tasks.
"""

from __future__ import annotations

import argparse
import base64
import json
import struct
import sys
import zlib
from pathlib import Path
from typing import Any, TextIO

ALPHABETS = {
    "ascii": "abcdefghij",
    "utf8-2": "éàüößñçøåæ",
    "utf8-3": "中文字符测试数据完整",
    "utf8-4": "😀😁😂🤣😃😄😅😆😉😊",
}
"""The characters a sized text is made of, by name: one to four bytes in UTF-8 (the last two in UTF-16 too)."""

CONTENT_TEXT = "CONTENT-TEXT"
STRUCTURED_VALUE = "STRUCTURED-VALUE"
PICTURE_TEXT = "PICTURE-TEXT"
LINK_URI = "file:///tmp/probe-link.txt"


def text(size: int, alphabet: str) -> str:
    """A text of exactly `size` characters: `<` and `>` at its two ends, and between them lines of 99 characters of
    the alphabet each numbered at its start, so a cut can be placed in it."""
    if size < 2:
        return "<>"[:size]
    chars = ALPHABETS[alphabet]
    body: list[str] = []
    line = 0
    while sum(map(len, body)) < size - 2:
        line += 1
        body.append(f"{line:06d}" + (chars * 10)[: 99 - 6 - 1] + "\n")
    return "<" + "".join(body)[: size - 2] + ">"


def png_1x1() -> bytes:
    """A valid 1x1 red PNG, made here."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    header = struct.pack(">IIBBBBB", 1, 1, 8, 2, 0, 0, 0)
    pixels = zlib.compress(b"\x00\xff\x00\x00")
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", pixels) + chunk(b"IEND", b"")


def tools(tasks: bool) -> list[dict[str, Any]]:
    sized = {
        "name": "sized",
        "description": "A text of the size asked.",
        "inputSchema": {
            "type": "object",
            "properties": {"size": {"type": "integer"}, "alphabet": {"type": "string", "enum": list(ALPHABETS)}},
            "required": ["size"],
        },
    }
    both = {
        "name": "both",
        "description": "A text and a structured value.",
        "inputSchema": {"type": "object", "properties": {}},
        "outputSchema": {"type": "object", "properties": {"value": {"type": "string"}}, "required": ["value"]},
    }
    picture = {
        "name": "picture",
        "description": "A text, an image and a resource link.",
        "inputSchema": {"type": "object", "properties": {}},
    }
    listed = [sized, both, picture]
    if tasks:
        for tool in listed:
            tool["execution"] = {"taskSupport": "optional"}
    return listed


def call(name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    """The result of one tool call."""
    if name == "sized":
        body = text(int(arguments["size"]), str(arguments.get("alphabet", "ascii")))
        return {"content": [{"type": "text", "text": body}]}
    if name == "both":
        return {"content": [{"type": "text", "text": CONTENT_TEXT}], "structuredContent": {"value": STRUCTURED_VALUE}}
    if name == "picture":
        image = base64.b64encode(png_1x1()).decode()
        link = {"type": "resource_link", "uri": LINK_URI, "name": "probe-link", "mimeType": "text/plain", "size": 5}
        picture = {"type": "image", "data": image, "mimeType": "image/png"}
        return {"content": [{"type": "text", "text": PICTURE_TEXT}, picture, link]}
    raise KeyError(name)


def answer(message: dict[str, Any], tasks: bool) -> dict[str, Any] | None:
    """The response to one message (None for a notification)."""
    if "id" not in message or "method" not in message:
        return None
    ident, method, params = message["id"], message["method"], message.get("params") or {}
    if method == "initialize":
        capabilities: dict[str, Any] = {"tools": {}, "resources": {}}
        if tasks:
            capabilities["tasks"] = {"list": {}, "cancel": {}, "requests": {"tools": {"call": {}}}}
        result: dict[str, Any] = {
            "protocolVersion": params.get("protocolVersion", "2025-06-18"),
            "capabilities": capabilities,
            "serverInfo": {"name": "probe", "version": "1"},
        }
    elif method == "tools/list":
        result = {"tools": tools(tasks)}
    elif method == "tools/call":
        try:
            result = call(params["name"], params.get("arguments") or {})
        except KeyError as error:
            return {"jsonrpc": "2.0", "id": ident, "error": {"code": -32602, "message": f"unknown: {error}"}}
    elif method in ("resources/list",):
        result = {"resources": []}
    elif method in ("resources/templates/list",):
        result = {"resourceTemplates": []}
    elif method in ("prompts/list",):
        result = {"prompts": []}
    elif method == "ping":
        result = {}
    else:
        return {"jsonrpc": "2.0", "id": ident, "error": {"code": -32601, "message": f"Method not found: {method}"}}
    return {"jsonrpc": "2.0", "id": ident, "result": result}


def serve(stdin: TextIO, stdout: TextIO, log: Path, tasks: bool) -> None:
    with log.open("a") as logged:
        for line in stdin:
            if not line.strip():
                continue
            logged.write(line if line.endswith("\n") else line + "\n")
            logged.flush()
            reply = answer(json.loads(line), tasks)
            if reply is not None:
                stdout.write(json.dumps(reply) + "\n")
                stdout.flush()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--log", type=Path, required=True)
    parser.add_argument("--tasks", action="store_true")
    args = parser.parse_args()
    serve(sys.stdin, sys.stdout, args.log, args.tasks)
    return 0


if __name__ == "__main__":
    sys.exit(main())
