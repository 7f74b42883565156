"""The Wrapped transport on real wrappers (spec S3 "Where the sandbox runs"): the named test
`kernel_transport_runs_a_real_stub_under_a_wrapper`, under `setsid -w sh -c 'exec "$@"' sh`, bubblewrap (the
workspace bind-mounted at another path) and `ssh -T` to an sshd on 127.0.0.1 (command "shell").

Each time the kernel is set in the user's settings file, the sandbox's Python has no eukhe (the host sends the stub
over stdin), and the test checks: the kernel's cwd is the sandbox path of the session's; its environment (its own
entries, the named host variable, a host path mapped); `fs.read` takes sandbox paths and answers them (the host
reads its own); a path outside every mount, `~`, and a symlink in a mount that points out of every mount (with `..`
after it too) are refused `outside`; and a kill (closing stdin) leaves no process of the kernel.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from eukhe.api import Session, Settled
from tests.real.kernel_support import run
from tests.real.sandboxes import SANDBOX_PYTHON, wrapped_kernels, wrapper

pytestmark = pytest.mark.real

PROBE = (
    "import os, sys\n"
    "probe = {'cwd': os.getcwd(), 'owner': os.environ.get('EUKHE_KERNEL_OWNER'), 'lang': os.environ.get('LANG'),\n"
    "         'agent': os.environ.get('EUKHE_CODING_AGENT_DIR'), 'secret': os.environ.get('EUKHE_TEST_SECRET'),\n"
    "         'python': sys.executable, 'leads_group': os.getpgid(0) == os.getpid()}\n"
    "probe"
)
REFUSED = (
    "def reason(path):\n"
    "    try:\n"
    "        rlm.fs.read(path)\n"
    "    except rlm.FsError as error:\n"
    "        return (error.reason, error.version)\n"
    "    return 'read'\n"
    "[reason(p) for p in ({paths!r})]"
)


async def cell(session: Session, code: str) -> Any:
    answer = await session.ipython(code, budget_ms=60_000)
    assert isinstance(answer, Settled), answer
    assert answer.error is None, answer.error
    assert answer.result is not None
    return eval(answer.result)


@pytest.mark.parametrize("kind", ["setsid", "bwrap", "ssh"])
def test_kernel_transport_runs_a_real_stub_under_a_wrapper(
    kind: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    host = tmp_path / "host"
    (host / "sub").mkdir(parents=True)
    (host / "a.txt").write_text("alpha\n")
    (host / "sub" / "b.txt").write_text("beta\n")
    (host / "escape").symlink_to("/etc")  # in a mount, pointing out of every mount
    agent = host / ".agent"  # the agent dir inside the mount: its path is mapped into the kernel's env
    agent.mkdir()
    monkeypatch.setenv("EUKHE_CODING_AGENT_DIR", str(agent))
    monkeypatch.setenv("LANG", "C.UTF-8")
    monkeypatch.setenv("EUKHE_TEST_SECRET", "host only")
    with wrapper(kind, tmp_path, host) as (setting, sandbox):
        setting.update(python=SANDBOX_PYTHON, env=["LANG"])
        (agent / "settings.json").write_text(json.dumps({"kernel_transport": setting}))

        async def scenario() -> None:
            session = await Session.create(host, root=tmp_path / "sessions")
            try:
                assert session.kernel_transport is not None
                probe = await cell(session, PROBE)
                assert probe["cwd"] == sandbox
                assert probe["owner"] == "stdin"
                assert probe["lang"] == "C.UTF-8"
                assert probe["agent"] == f"{sandbox}/.agent"
                assert probe["python"] == SANDBOX_PYTHON
                assert probe["leads_group"] is True
                if kind == "bwrap":
                    assert probe["secret"] is None  # the sandbox's own environment, not the host's
                read = await cell(session, "a = rlm.fs.read('sub/b.txt')\n(a.absolute, a.text)")
                assert read == (f"{sandbox}/sub/b.txt", "beta\n")
                wrote = await cell(session, f"rlm.fs.write({sandbox + '/c.txt'!r}, 'gamma').absolute")
                assert wrote == f"{sandbox}/c.txt"
                assert (host / "c.txt").read_text() == "gamma"
                outside = ["/etc/passwd", "~/x", str(host / "a.txt"), "escape/passwd", "escape/../a.txt"]
                refused = await cell(session, REFUSED.format(paths=tuple(outside)))
                assert refused == [("outside", "transport@1")] * len(outside)
                assert await cell(session, "rlm.fs.read('a.txt').text") == "alpha\n"
                # A synchronous cell that ignores interrupts holds the kernel's loop: the kill still ends it.
                held = await session.ipython(
                    "import time\nwhile True:\n    try:\n        time.sleep(1)\n    except KeyboardInterrupt:\n"
                    "        pass",
                    budget_ms=100,
                )
                assert held.to_json()["status"] == "detached"
                assert wrapped_kernels()
            finally:
                await session.close()
            deadline = time.monotonic() + 20
            while wrapped_kernels() and time.monotonic() < deadline:
                time.sleep(0.05)  # bounded wait for the real kernel's end after its stdin closed
            assert wrapped_kernels() == []

        run(scenario())


def test_a_cwd_outside_every_mount_stops_the_start_with_an_error_naming_both(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    agent = tmp_path / "agent"
    agent.mkdir()
    monkeypatch.setenv("EUKHE_CODING_AGENT_DIR", str(agent))
    setting = {"argv_prefix": ["setsid", "-w"], "path_map": [{"sandbox": "/work", "host": str(tmp_path / "other")}]}
    (agent / "settings.json").write_text(json.dumps({"kernel_transport": setting}))
    work = tmp_path / "work"
    work.mkdir()

    async def scenario() -> None:
        session = await Session.create(work, root=tmp_path / "sessions")
        try:
            with pytest.raises(Exception) as refused:
                await session.ipython("1")
            assert str(work) in str(refused.value)
            assert f"{tmp_path / 'other'} -> /work" in str(refused.value)
            assert (await session.execute_bash_and_wait("echo bash runs")).output.text == "bash runs\n"
        finally:
            await session.close()

    run(scenario())
