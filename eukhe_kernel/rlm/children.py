"""`rlm.spawn`, `rlm.list_subagents`, `rlm.collect`, `rlm.delete` and `rlm.answer`: children, as host requests.

A child is a session of its own whose run is `code`, one cell in its own kernel (its answer is what it passes to
`rlm.answer`, else its last expression's value), or `prompt`, worked on by a model with the child's own tools (its
answer is what the model passes to its `answer` tool, else its last reply). Each call blocks until the host answers
(`collect` at most its timeout and the session's blocking budget). Answers are `Answer`s (dicts readable by attribute).
"""

from __future__ import annotations

import json
from typing import Any

from eukhe_kernel.api import host_request_sync
from eukhe_kernel.rlm.answers import Answer


def _ask(kind: str, params: dict[str, Any]) -> Any:
    return host_request_sync(kind, params)


def spawn(
    name: str,
    code: str | None = None,
    workspace: str = "shared",
    timeout_ms: int | None = None,
    *,
    prompt: str | None = None,
    model: str | None = None,
) -> Answer:
    """Start child `name` running `code`, or a model working on `prompt` with the child session's tools (the user's
    `model` setting; `model` names another model); `workspace="isolated"` gives it a copy of this directory, handed
    back path by path when it ends (conflicts keep this side's content). Exactly one of code and prompt. Its roster
    row."""
    params: dict[str, Any] = {"name": name, "code": code, "workspace": workspace, "timeout_ms": timeout_ms}
    if prompt is not None:
        params["prompt"] = prompt
    if model is not None:
        params["model"] = model
    return Answer(_ask("children.spawn", params))


def list_subagents() -> list[Answer]:
    """The roster: each child's `name`, `session`, `status`, `workspace`, `cwd` and `handback`."""
    return [Answer(row) for row in _ask("children.list", {})["children"]]


def collect(names: list[str] | str | None = None, timeout_ms: int | None = None) -> list[Answer]:
    """Wait for the named children (default: all) at most `timeout_ms` and the blocking budget; their reports:
    `name`, `status`, `answer`, `error`, `handback`."""
    wanted = [names] if isinstance(names, str) else names
    return [
        Answer(report) for report in _ask("children.collect", {"names": wanted, "timeout_ms": timeout_ms})["reports"]
    ]


def delete(name: str) -> Answer:
    """End child `name` (its run is cancelled if it still runs), hand it back, take it off the roster; its report."""
    return Answer(_ask("children.delete", {"name": name}))


def answer(value: Any) -> None:
    """This child's answer (in a child's run): any JSON value; another value is sent as its repr."""
    try:
        sendable = json.loads(json.dumps(value, allow_nan=False))
    except (TypeError, ValueError):
        sendable = repr(value)
    _ask("child.answer", {"value": sendable})
