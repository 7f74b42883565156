"""Interactive jobs through the daemon: an agent drives a python REPL, answers a prompt and Ctrl-C's a server over
MCP (`bash` with `tty`, `jobs_write`, `jobs_signal`); the CLI does the same (`eukhe bash --tty`, `eukhe jobs
write`, `eukhe jobs signal`), and a person attaches to the same job from a real terminal (`eukhe jobs attach`),
types into it, and detaches with Ctrl-], leaving it running.

Every wait is on real output, bounded by deadlines only a hang reaches.
"""

from __future__ import annotations

import os
import pty
import select
import signal
import subprocess
import sys
import time
from typing import Any

import pytest

from tests.real.conftest import DaemonEnv
from tests.real.test_mcp_server import mcp_server, run, text_of, workdir

pytestmark = pytest.mark.real

DEADLINE_S = 60.0
PY = sys.executable
SERVER = f"{PY} -u -c \"import time; print('serving on 8000'); [time.sleep(0.05) for _ in iter(int, 1)]\""


def test_tty_an_agent_drives_a_repl_answers_a_prompt_and_ctrl_cs_a_server_over_mcp(world: DaemonEnv) -> None:
    cwd = workdir(world)

    async def scenario() -> None:
        async with mcp_server(world, "--cwd", str(cwd), "--sandbox", "off") as server:

            async def write_until(job: str, text: str, wanted: str) -> str:
                deadline = time.monotonic() + DEADLINE_S
                result = await server.call("jobs_write", {"job": job, "input": text, "budget_ms": 2_000})
                seen = [text_of(result)]
                while wanted not in seen[-1]:
                    assert time.monotonic() < deadline, seen
                    assert not result.is_error, seen
                    result = await server.call("jobs_write", {"job": job, "input": "", "budget_ms": 2_000})
                    seen.append(text_of(result))
                return seen[-1]

            started = await server.call("bash", {"command": f"{PY} -q", "tty": True, "budget_ms": 300})
            assert not started.is_error and started.structured_content is not None
            repl = started.structured_content["job"]
            assert started.structured_content["status"] == "detached"
            await write_until(repl, "", ">>>")
            text = await write_until(repl, "6*7\n", "42")
            assert f"[job {repl} runs on" in text
            text = await write_until(repl, "\u0004", "exit 0")

            prompt = await server.call(
                "bash", {"command": 'read -p "continue? [y/N] " a; echo "answered $a"', "tty": True, "budget_ms": 300}
            )
            assert prompt.structured_content is not None
            asking = prompt.structured_content["job"]
            await write_until(asking, "", "continue? [y/N]")
            text = await write_until(asking, "y\n", "exit 0")
            assert "answered y" in text

            serving = await server.call(
                "bash", {"command": SERVER, "tty": True, "cols": 100, "rows": 30, "budget_ms": 0}
            )
            assert serving.structured_content is not None
            daemon = serving.structured_content["job"]
            await write_until(daemon, "", "serving on 8000")
            sent = await server.call("jobs_signal", {"job": daemon, "signal": "INT"})
            assert not sent.is_error and text_of(sent) == f"[SIGINT sent to job {daemon}]"
            ended = await server.call("jobs_wait", {"job": daemon})
            assert ended.structured_content is not None
            assert ended.structured_content["exit_code"] == 130
            assert "KeyboardInterrupt" in text_of(ended)

            plain = await server.call("bash", {"command": "sleep 30", "budget_ms": 0})
            assert plain.structured_content is not None
            refused = await server.call("jobs_write", {"job": plain.structured_content["job"], "input": "x"})
            assert refused.is_error and text_of(refused).startswith("job_has_no_terminal")
            bad = await server.call("jobs_signal", {"job": plain.structured_content["job"], "signal": "STOP"})
            assert bad.is_error and text_of(bad).startswith("unknown_signal")
            await server.call("jobs_cancel", {"job": plain.structured_content["job"]})

    run(scenario)


def cli_write(world: DaemonEnv, session: str, job: str, text: str, wanted: str) -> dict[str, Any]:
    deadline = time.monotonic() + DEADLINE_S
    answer = world.json("jobs", "write", "--session", session, job, text, "--budget-ms", "2000")
    while wanted not in (answer.get("screen") or ""):
        assert time.monotonic() < deadline, answer
        answer = world.json("jobs", "write", "--session", session, job, "", "--budget-ms", "2000")
    result: dict[str, Any] = answer
    return result


def read_terminal(fd: int, wanted: bytes, seen: bytearray) -> None:
    """Read the attached terminal until `wanted` shows (appending to `seen`), within DEADLINE_S."""
    deadline = time.monotonic() + DEADLINE_S
    while wanted not in seen:
        left = deadline - time.monotonic()
        assert left > 0, bytes(seen)
        readable, _, _ = select.select([fd], [], [], left)
        if readable:
            try:
                chunk = os.read(fd, 1 << 16)
            except OSError:
                chunk = b""
            assert chunk, f"the terminal closed before {wanted!r}: {bytes(seen)!r}"
            seen += chunk


def test_tty_the_cli_drives_a_job_and_a_person_attaches_types_and_detaches(world: DaemonEnv) -> None:
    cwd = workdir(world)
    session = world.json("session", "create", "--cwd", str(cwd), "--sandbox", "off")["id"]
    started = world.json("bash", "--session", session, "--tty", "--budget-ms", "300", "--", PY, "-q")
    assert started["status"] == "detached" and started["screen"] is not None
    job = started["job"]
    answer = cli_write(world, session, job, "6*7\n", "42")
    assert answer["status"] == "written" and answer["view"] == "scrollback"
    listed = world.json("jobs", "list", "--session", session)["jobs"]
    assert [row["tty"] for row in listed] == [True]

    main, side = pty.openpty()
    attach = subprocess.Popen(
        [PY, "-m", "eukhe.cli.main", "jobs", "attach", "--session", session, job],
        stdin=side,
        stdout=side,
        stderr=side,
        env=world.env,
        start_new_session=True,
    )
    world.spawned.add(attach)
    os.close(side)
    seen = bytearray()
    try:
        read_terminal(main, b">>>", seen)  # the job's screen, drawn at once
        os.write(main, b"6*100+7\r")  # Enter, as a terminal in raw mode sends it
        read_terminal(main, b"607", seen)
        os.write(main, b"\x1d")  # Ctrl-]: detach
        read_terminal(main, b"detached from job", seen)
        assert attach.wait(timeout=DEADLINE_S) == 0
    finally:
        if attach.poll() is None:
            os.killpg(attach.pid, signal.SIGKILL)
        os.close(main)
    answer = cli_write(world, session, job, "1+1\n", "2")  # the job runs on after the detach
    assert "607" in world.json("jobs", "wait", "--session", session, job, "--timeout-ms", "0")["screen"]
    sent = world.json("jobs", "signal", "--session", session, job, "KILL")
    assert sent["signal"] == "KILL"
    ended = world.json("jobs", "wait", "--session", session, job)
    assert ended["status"] == "settled"
    refused = world.cli("jobs", "write", "--session", session, job, "x", "--json")
    assert refused.returncode != 0 and "job_ended" in refused.stdout
