"""Secrets stay out of a confined session's environment (docs/sandbox.md, "The environment"): variables that look
like secrets, planted in the daemon's environment, reach no confined bash job, terminal, cell or child, while a
harmless variable and one `sandbox.env_passthrough` names do; with `--sandbox off` they all reach a job (the user's
own environment), so the test can fail. Real bubblewrap, a real daemon, the CLI as a user runs it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.real.conftest import DaemonEnv
from tests.real.tools import need_tools

pytestmark = pytest.mark.real

MODEL_KEY = "LLM_ACCESS"
"""The variable the user's `model` setting names for prompt children's key: no rule would call it a secret."""
SECRETS = [
    "MY_API_KEY",
    "GITHUB_TOKEN",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_REGION",
    "DB_PASSWORD",
    "SOME_CREDENTIAL_FILE",
    "ANTHROPIC_API_KEY",
    "EUKHE_MCP_TOKEN",
    MODEL_KEY,
]
HARMLESS = "EUKHE_TEST_HARMLESS"
PASSED = "MY_PASSED_TOKEN"
"""Looks like a secret, and the user's `env_passthrough` names it."""
NAMES = [*SECRETS, HARMLESS, PASSED]
BASH = f'for v in {" ".join(NAMES)}; do [ -n "${{!v+x}}" ] && echo "present $v"; done; echo checked'
PYTHON = f"import os\nsorted(name for name in {NAMES!r} if name in os.environ)"


def planted(world: DaemonEnv) -> Path:
    """The world with every variable planted in the environment the daemon starts with, and the user's settings
    naming the model key's variable and the passthrough; a project directory to work in."""
    need_tools("bwrap")
    for name in NAMES:
        world.env[name] = f"value-of-{name}"
    world.agent_dir.mkdir(parents=True, exist_ok=True)
    settings = {
        "sandbox": {"env_passthrough": [PASSED]},
        "model": {"base_url": "http://127.0.0.1:9/v1", "name": "m", "api_key_env": MODEL_KEY},
    }
    (world.agent_dir / "settings.json").write_text(json.dumps(settings))
    project = world.root / "project"
    project.mkdir()
    return project


def present_in_bash(world: DaemonEnv, session: str, *tty: str) -> list[str]:
    answer = world.json("bash", "--session", session, *tty, "--", BASH)
    text = str(answer["output"]["text"])
    assert "checked" in text, answer
    return sorted(line.split()[1] for line in text.splitlines() if line.startswith("present "))


def test_a_confined_sessions_jobs_terminals_cells_and_children_get_no_secret(world: DaemonEnv) -> None:
    project = planted(world)
    session = world.json("session", "create", "--cwd", str(project))["id"]
    shown = world.json("session", "show", session)["sandbox"]
    assert (shown["mode"], shown["env_passthrough"]) == ("workspace_write", [PASSED])
    wanted = sorted([HARMLESS, PASSED])
    assert present_in_bash(world, session) == wanted
    assert present_in_bash(world, session, "--tty") == wanted
    cell = world.json("ipython", "--session", session, "-c", PYTHON)
    assert cell["result"] == repr(wanted), cell
    world.json("spawn", "--session", session, "--name", "kid", "-c", PYTHON)
    (report,) = world.json("children", "collect", "--session", session, "--timeout-ms", "60000")["reports"]
    assert (report["status"], report["answer"]) == ("answered", wanted), report


def test_an_unconfined_sessions_jobs_get_the_users_environment_but_eukhes_own_secret(world: DaemonEnv) -> None:
    project = planted(world)
    session = world.json("session", "create", "--cwd", str(project), "--sandbox", "off")["id"]
    assert present_in_bash(world, session) == sorted(name for name in NAMES if name != "EUKHE_MCP_TOKEN")


def test_a_bad_env_passthrough_is_refused_naming_the_entry(world: DaemonEnv) -> None:
    need_tools("bwrap")
    world.agent_dir.mkdir(parents=True, exist_ok=True)
    project = world.root / "project"
    project.mkdir()
    for names, said in ((["OK", "not a name"], "variable's name"), (["EUKHE_MCP_TOKEN"], "eukhe's own secret")):
        (world.agent_dir / "settings.json").write_text(json.dumps({"sandbox": {"env_passthrough": names}}))
        code, error = world.json_error("session", "create", "--cwd", str(project))
        assert code != 0 and error["error"] == "bad_setting", error
        assert f"sandbox.env_passthrough[{len(names) - 1}] " in error["message"] and said in error["message"], error


def test_a_project_may_narrow_env_passthrough_but_not_widen_it(world: DaemonEnv) -> None:
    project = planted(world)
    (project / ".eukhe").mkdir()
    project_file = project / ".eukhe" / "settings.json"
    project_file.write_text(json.dumps({"sandbox": {"env_passthrough": [PASSED, "MY_API_KEY"]}}))
    done = world.cli("session", "create", "--cwd", str(project), "--json")
    assert done.returncode == 0, done.stderr
    created = json.loads(done.stdout)
    (notice,) = created["notices"]
    assert "sandbox.env_passthrough" in notice and "MY_API_KEY" in notice and str(project_file) in notice
    assert present_in_bash(world, created["id"]) == sorted([HARMLESS, PASSED])  # the user's policy, whole
    project_file.write_text(json.dumps({"sandbox": {"env_passthrough": []}}))
    narrowed = world.json("session", "create", "--cwd", str(project))
    assert narrowed["notices"] == []
    assert world.json("session", "show", narrowed["id"])["sandbox"]["env_passthrough"] == []
    assert present_in_bash(world, narrowed["id"]) == [HARMLESS]
