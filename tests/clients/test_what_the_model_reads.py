"""What a model reads of eukhe's answers through the real clients: Claude Code (`claude -p`) and Codex (`codex exec`,
with a model it does not know, and with its default bundled model, which it drives in code mode), each against
`eukhe mcp` over stdio (started by the client from the README's config) and over HTTP (`eukhe mcp --http`), with a
scripted model (tests/clients/model_server.py) whose log holds what each tool result was when it reached the model.

One client run per client and transport makes the whole list of calls in sequence (the script takes the detached
job's id from what the model read): a settled bash, a bash that detaches at its 500 ms budget then `jobs_wait` on its
job, a flood, 45,000 random bytes, escapes and a progress bar, a read, an edit, a refused read, and a picture.

What the model must read: eukhe's rendered text (the `[exit N]` line, the detach hint naming `jobs_wait`, the
read's range line, eukhe's own truncation notice and its last lines), never the JSON answer record (clients show a
model `structuredContent` instead of the text when both are there), and no client's own truncation marker (eukhe
cuts each result to the client's room).
"""

from __future__ import annotations

import base64
import re
import secrets
import shutil
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.clients.clients import CLAUDE, CODEX, CODEX_CODE_MODE, Client, run_client
from tests.clients.configs import TOKEN_ENV, Http, McpServer, Stdio, readme_stdio
from tests.clients.model_server import Call, Read, Script, calls, model_server
from tests.clients.probe_server import png_1x1
from tests.npm_tools import need_npm_tool
from tests.real.conftest import DaemonEnv
from tests.real.test_mcp_http import http_server

pytestmark = [pytest.mark.real, pytest.mark.clients]

REPO = Path(__file__).resolve().parents[2]

CLIENT_MARKERS = (
    "<persisted-output>",
    "Output too large",
    "exceeds maximum allowed tokens",
    "tokens truncated",
    "chars truncated",
    "…",
)
"""What a client writes where it cut a tool result itself (Claude Code's saved-output preview and token refusal,
Codex's middle cut)."""

PATCH = "*** Begin Patch\n*** Update File: notes.txt\n@@\n-two\n+TWO\n*** End Patch"
RANDOM_BYTES = 45_000
RANDOM_WRITER = f"import random, sys; random.seed(7); sys.stdout.buffer.write(random.randbytes({RANDOM_BYTES}))"
PICTURE_CELL = (
    "import base64\n"
    "class Dot:\n"
    "    def _repr_png_(self):\n"
    f"        return base64.b64decode({base64.b64encode(png_1x1()).decode()!r})\n"
    "Dot()\n"
)


def jobs_wait(read: Sequence[Read]) -> Call:
    """`jobs_wait` on the job the previous call detached as (its id as the model read it)."""
    found = re.search(r"job-[0-9a-f]+", read[-1].text)
    assert found is not None, read[-1].text
    return Call("jobs_wait", {"job": found.group(0)})


STEPS: list[Call | Callable[[Sequence[Read]], Call]] = [
    Call("bash", {"command": "echo hi"}),
    Call("bash", {"command": "sleep 5; echo done", "budget_ms": 500}),
    jobs_wait,
    Call("bash", {"command": "seq 1 200000"}),
    Call("bash", {"command": f"python3 -c '{RANDOM_WRITER}'"}),
    Call("bash", {"command": "printf 'a\\033[31mred\\033[0m\\r50%%\\r100%%\\n'"}),
    Call("read", {"path": "notes.txt"}),
    Call("edit", {"patch": PATCH}),
    Call("read", {"path": "missing.txt"}),
    Call("ipython", {"code": PICTURE_CELL}),
]


@dataclass(frozen=True, slots=True)
class Expect:
    """What the model must read of one step: texts it contains, texts it must not contain."""

    has: tuple[str, ...]
    lacks: tuple[str, ...] = ()


def expectations(cwd: Path, job: str) -> list[Expect]:
    """The target, step by step: eukhe's rendered text."""
    return [
        Expect(("hi\n[exit 0]",)),
        Expect(("[still running after 500 ms as job", f'jobs_wait {{"job": "{job}"}}')),
        Expect(("done\n[exit 0]",)),
        Expect(("[output truncated: ", "dropped from the start", "199001\n", "199999\n200000\n[exit 0]")),
        Expect(("\ufffd", "[exit 0]")),
        Expect(("100%\n[exit 0]",), ("\x1b", "\r", "50%")),
        Expect(("one\ntwo\nthree\n", "notes.txt: lines 1-3 of 3]")),
        Expect((f"updated {cwd / 'notes.txt'}",)),
        Expect(("fs_error (not_found)", "missing.txt")),
        Expect(("[image 1: image/png 1x1",)),
    ]


def check_target(client: Client, read: Sequence[Read], cwd: Path) -> None:
    job = re.search(r"job-[0-9a-f]+", read[1].text)
    assert job is not None, read[1].text
    for step, (one, expect) in enumerate(zip(read, expectations(cwd, job.group(0)), strict=True)):
        where = f"step {step} ({one.call.tool}) read {one.text[:2000]!r}"
        assert '"bytes_kept"' not in one.text, f"the answer record: {where}"
        for text in expect.has:
            assert text in one.text, f"{text!r} not in {where}"
        for text in (*expect.lacks, *CLIENT_MARKERS):
            assert text not in one.text, f"{text!r} in {where}"
    if client.name == "claude":
        assert read[8].is_error, "the refused read reaches Claude Code's model as an error"
    # every client passes a result's image content on when the result has no structuredContent (measure.py)
    assert [image.mime_type for image in read[9].images] == ["image/png"], read[9].raw
    assert base64.b64decode(read[9].images[0].data) == png_1x1()


CLIENT_RUNS = 2
"""A client that gave up waiting for eukhe's server to connect (on a loaded machine, past its own connect timeout)
sends its first turn without eukhe's tools, and the model reads nothing: that run is made once more."""


def run_batch(client: Client, server: McpServer, world: DaemonEnv, cwd: Path, *, settings: bool = False) -> list[Read]:
    """One client run making every step in turn; what the model read of each."""
    for _ in range(CLIENT_RUNS):
        script: Script = calls(*STEPS)
        with model_server(script) as model:
            finished = run_client(client, server, world.env, cwd, model.url, claude_settings_file=settings)
            assert not model.failures, model.failures
            read = list(model.read)
        if read:
            break
    assert len(read) == len(STEPS), (finished, [one.text[:300] for one in read])
    assert finished.returncode == 0, finished
    return read


def workspace(world: DaemonEnv) -> Path:
    cwd = world.root / "w"
    cwd.mkdir()
    (cwd / "notes.txt").write_text("one\ntwo\nthree\n")
    return cwd


def uv() -> str:
    found = shutil.which("uv")
    if found is None:
        pytest.skip("needs uv on PATH (the README's config runs eukhe with it)")
    return found


CLIENTS = [
    pytest.param(CLAUDE, id="claude"),
    pytest.param(CODEX, id="codex"),
    pytest.param(CODEX_CODE_MODE, id="codex-code-mode"),
]


@pytest.mark.parametrize("client", CLIENTS)
def test_over_stdio_the_model_reads_eukhes_text(client: Client, world: DaemonEnv) -> None:
    need_npm_tool(client.name)
    cwd = workspace(world)
    world.cli("daemon", "start")  # the daemon has the suite's environment; Codex passes the server only HOME, ...
    # The suite's environment is synced already: a `uv run` that syncs again reinstalls eukhe under a server that
    # another test's `uv run` is starting at the same moment, which then fails to import it.
    world.env["UV_NO_SYNC"] = "1"
    readme = readme_stdio(str(REPO))
    read = run_batch(client, Stdio(uv(), readme.args), world, cwd)
    check_target(client, read, cwd)


@pytest.mark.parametrize("client", CLIENTS)
def test_over_http_the_model_reads_eukhes_text(client: Client, world: DaemonEnv) -> None:
    need_npm_tool(client.name)
    cwd = workspace(world)
    token = secrets.token_urlsafe(24)
    world.env[TOKEN_ENV] = token
    with http_server(world, "--cwd", str(cwd), structured=False, EUKHE_MCP_TOKEN=token) as server:
        read = run_batch(client, Http(server.url, token), world, cwd, settings=client == CLAUDE)
    check_target(client, read, cwd)
