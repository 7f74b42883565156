"""Real host processes: `kill -9` of a host mid-call, then reopen; and the modes of everything a session makes
(S2 "A tool call" 4, jobs 5; "Local access" 3).

The host is a child Python process running a Session. After `kill -9` the journal reads (a torn last line is
skipped), the interrupted call settles from what is durable (its BoundedOutput artifact), and the job node the dead
process left is retired. The modes test runs a host with umask 0, so any file or directory made without its mode
at creation would show it.
"""

from __future__ import annotations

import asyncio
import os
import signal
import stat
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from eukhe.core.jobdocs import JOB_DOC_TYPE
from eukhe.session import Session
from tests.real.process_support import end_job_group, job_group

pytestmark = pytest.mark.real

HOST = textwrap.dedent(
    """
    import asyncio, sys
    from pathlib import Path
    from eukhe.core.bound import On, OutputLimits
    from eukhe.harness.tool import NoToolArgs, ToolRegistration
    from eukhe.records.sandbox import UNCONFINED
    from eukhe.session import Session, SessionSettings

    async def main() -> None:
        root, work, pidfile = Path(sys.argv[1]), sys.argv[2], sys.argv[3]
        settings = SessionSettings.bounded_by(On(OutputLimits(1000, 50)))
        session = await Session.create(work, root=root, session_id="crash", settings=settings, sandbox=UNCONFINED)
        session.append("user", "go")
        await session.execute_bash_and_wait(f"echo $$ > {pidfile}; exec sleep 600", budget_ms=0)
        await session.writer.idle()
        reported = asyncio.Event()

        async def execute(args, api):
            for index in range(20000):
                api.output(f"line {index:06d}\\n")
            api.publish_progress()
            reported.set()
            await asyncio.Event().wait()

        session.harness.register(ToolRegistration("big", NoToolArgs, execute))
        call = asyncio.ensure_future(session.harness.call("big", {}, call_id="c1"))
        await reported.wait()
        print("READY", flush=True)
        await call

    asyncio.run(main())
    """
)


def test_kill_9_of_the_host_mid_call_then_reopen_settles_from_what_is_durable(tmp_path: Path) -> None:
    root = tmp_path / "sessions"
    work = tmp_path / "work"
    work.mkdir()
    pidfile = tmp_path / "job.pid"
    host = subprocess.Popen(
        [sys.executable, "-c", HOST, str(root), str(work), str(pidfile)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert host.stdout is not None
        assert host.stdout.readline().strip() == "READY"
        host.send_signal(signal.SIGKILL)
        host.wait(timeout=10)
    finally:
        if host.poll() is None:
            host.kill()
            host.wait()
        if host.stdout is not None:
            host.stdout.close()
    job_pid = int(pidfile.read_text())
    left = job_group(job_pid)
    try:
        journal = root / "crash" / "main.jsonl"
        with open(journal, "ab") as handle:
            handle.write(b'{"seq":77,"records":[{"t":"ent')  # as if the crash tore a commit
        artifacts = list((root / "crash" / "artifacts").glob("output-c1*"))
        assert len(artifacts) == 1
        durable = artifacts[0].read_bytes()
        assert durable.startswith(b"line 000000\n")

        async def reopen() -> None:
            session = await Session.open("crash", root=root)
            assert session.last_read is not None
            assert len(session.last_read.diagnostics) == 1
            slot = session.view_state().slots["c1"]
            assert slot.status == "done"
            assert slot.outcome == "interrupted"
            (result,) = [e for e in session.entries() if e.kind == "tool_result"]
            output = result.content["output"]
            assert result.content["status"] == "interrupted"
            assert output["bytes_kept"] + output["bytes_dropped"] == len(durable)
            assert durable.endswith(output["text"].encode())
            assert output["artifact"] == str(artifacts[0])
            assert session.view_state().of_type(JOB_DOC_TYPE) == {}  # the old process's job node is retired
            assert "running-jobs" not in session.system_prompt()
            await session.close()

        asyncio.run(reopen())
    finally:
        end_job_group(left)  # the dead host's job: its own group, not ours to leave behind


MODES_HOST = textwrap.dedent(
    """
    import asyncio, os, sys
    from pathlib import Path
    from eukhe.core.bound import On, OutputLimits
    from eukhe.harness.tool import NoToolArgs, ToolRegistration
    from eukhe.session import Session, SessionSettings

    os.umask(0)

    async def main() -> None:
        settings = SessionSettings.bounded_by(On(OutputLimits(100, 5)), tool_blocking_budget_ms=5000)
        session = await Session.create(sys.argv[1], settings=settings)
        first = session.append("user", "go")

        async def execute(args, api):
            return b"x" * 5000

        session.harness.register(ToolRegistration("big", NoToolArgs, execute))
        await session.harness.call("big", {})
        await session.execute_bash_and_wait("head -c 5000 /dev/zero", budget_ms=5000)
        await session.fork(first.id)
        session.append("user", "in the fork")
        await session.close()
        reopened = await Session.open(session.id)
        await reopened.close()

    asyncio.run(main())
    """
)


def test_every_file_a_session_makes_is_0600_and_every_dir_0700_even_under_umask_0(tmp_path: Path) -> None:
    agent = tmp_path / "home" / "agent"
    work = tmp_path / "work"
    work.mkdir()
    env = {**os.environ, "EUKHE_CODING_AGENT_DIR": str(agent)}
    env.pop("EUKHE_SESSION_DIR", None)
    subprocess.run([sys.executable, "-c", MODES_HOST, str(work)], env=env, check=True, timeout=60)
    made = [tmp_path / "home", *sorted((tmp_path / "home").rglob("*"))]
    files = [p for p in made if p.is_file()]
    assert len([p for p in files if p.name == "main.jsonl"]) == 2  # the session and its fork
    assert len([p for p in files if p.parent.name == "artifacts"]) >= 2  # the call's and the job's
    wrong = {
        str(p.relative_to(tmp_path)): oct(stat.S_IMODE(p.lstat().st_mode))
        for p in made
        if stat.S_IMODE(p.lstat().st_mode) != (0o700 if p.is_dir() else 0o600)
    }
    assert wrong == {}
