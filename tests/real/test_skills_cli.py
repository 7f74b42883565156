"""`eukhe skills list|show` and the Python API's `list_skills`/`show_skill` on real skill folders: discovery in the
four roots, the precedence, each field rule's diagnostic, and a typed error for an unknown name."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from eukhe.api import UnknownSkillError, list_skills, show_skill
from tests.real.conftest import DaemonEnv
from tests.skills_support import (
    SECRET,
    UNREADABLE_SKILLS,
    write_hostile_files,
    write_secret,
    write_skill,
    write_unreadable_skill_files,
)

pytestmark = pytest.mark.real


@pytest.fixture
def project(world: DaemonEnv) -> Path:
    home = Path(world.env["HOME"])
    home.mkdir(exist_ok=True)
    path = world.root / "project"
    path.mkdir()
    return path


def rows(world: DaemonEnv, project: Path) -> dict[str, list[dict[str, object]]]:
    listing = world.json("skills", "list", "--cwd", str(project))
    assert listing["cwd"] == str(project)
    found: dict[str, list[dict[str, object]]] = {}
    for row in listing["skills"]:
        found.setdefault(str(row["name"]), []).append(row)
    return found


def test_a_project_skill_is_listed_as_the_projects_and_shown(world: DaemonEnv, project: Path) -> None:
    skill = write_skill(
        project / ".agents" / "skills",
        "pdf-tools",
        {"name": "pdf-tools", "description": "Fill PDF forms.", "license": "MIT", "metadata": {"version": "1"}},
        body="# PDF tools\nRun scripts/fill.py.\n",
        files={"scripts/fill.py": "print('x')\n"},
    )
    [row] = rows(world, project)["pdf-tools"]
    assert row["status"] == "offered" and row["offered"] is True
    assert row["scope"] == "project" and row["project"] is True
    assert row["path"] == str(skill / "SKILL.md") and row["dir"] == str(skill)
    assert row["description"] == "Fill PDF forms." and row["python"] is False and row["diagnostics"] == []
    assert row["license"] == "MIT" and row["metadata"] == {"version": "1"}
    shown = world.cli("skills", "show", "pdf-tools", "--cwd", str(project))
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout == "# PDF tools\nRun scripts/fill.py.\n"
    text = world.cli("skills", "list", "--cwd", str(project))
    assert "pdf-tools  [project; offered]" in text.stdout and "1 offered of 1 found" in text.stdout


def test_the_users_skill_wins_over_the_projects_and_the_listing_says_so(world: DaemonEnv, project: Path) -> None:
    home = Path(world.env["HOME"])
    user = write_skill(home / ".agents" / "skills", "shared")
    agent = write_skill(world.agent_dir / "skills", "shared")
    project_skill = write_skill(project / ".agents" / "skills", "shared")
    claude = write_skill(project / ".claude" / "skills", "shared")
    write_skill(world.agent_dir / "skills", "mine")
    write_skill(project / ".claude" / "skills", "old-style", files={"pyproject.toml": "[project]\nname='x'\n"})
    found = rows(world, project)
    assert [(r["scope"], r["status"], r["dir"]) for r in found["shared"]] == [
        ("user", "offered", str(user)),
        ("user", "shadowed", str(agent)),
        ("project", "shadowed", str(project_skill)),
        ("project", "shadowed", str(claude)),
    ]
    assert all(r["shadowed_by"] == str(user / "SKILL.md") for r in found["shared"][1:])
    assert found["mine"][0]["scope"] == "user" and found["mine"][0]["project"] is False
    assert found["old-style"][0]["status"] == "offered" and found["old-style"][0]["python"] is True
    text = world.cli("skills", "list", "--cwd", str(project)).stdout
    assert f"shared  [project; shadowed by {user / 'SKILL.md'}]" in text


def test_the_home_directory_as_cwd_lists_each_skill_once(world: DaemonEnv, project: Path) -> None:
    home = Path(world.env["HOME"])
    write_skill(home / ".agents" / "skills", "here")
    [row] = rows(world, home)["here"]
    assert (row["scope"], row["status"]) == ("user", "offered")


INVALID: list[tuple[str, str, str | None]] = [
    # (the frontmatter's YAML, the field the diagnostic names, a word of its message)
    ("name: other-name\ndescription: d\n", "name", "directory"),
    ("name: Bad--Name\ndescription: d\n", "name", "single"),
    ("description: d\n", "name", "string"),
    ("name: {n}\ndescription: ''\n", "description", "1-1024"),
    ("name: {n}\n", "description", "string"),
    ("name: {n}\ndescription: " + "d" * 1025 + "\n", "description", "1025"),
    ("name: {n}\ndescription: d\ncompatibility: " + "c" * 501 + "\n", "compatibility", "at most 500"),
    ("name: {n}\ndescription: d\nmetadata:\n  version: 1.0\n", "metadata", "quote it"),
    ("name: {n}\ndescription: d\nmetadata: [a]\n", "metadata", "mapping"),
    ("name: {n}\ndescription: d\nlicense: 3\n", "license", "string"),
    ("name: {n}\ndescription: d\nallowed-tools: {{a: 1}}\n", "allowed-tools", "tool names"),
    ("name: [unclosed\n", None, "cannot be read"),
    ("- a list\n", None, "mapping"),
]


@pytest.mark.parametrize(("front", "field", "word"), INVALID, ids=[f"{f}-{w}" for _, f, w in INVALID])
def test_an_invalid_skill_is_not_offered_and_its_diagnostic_names_file_and_field(
    world: DaemonEnv, project: Path, front: str, field: str | None, word: str
) -> None:
    skill = write_skill(
        project / ".agents" / "skills", "broken", front.replace("{n}", "broken").replace("{{", "{").replace("}}", "}")
    )
    [row] = rows(world, project)["broken"]
    assert row["status"] == "invalid" and row["offered"] is False
    errors = [d for d in row["diagnostics"] if d["severity"] == "error"]  # type: ignore[union-attr]
    assert [(d["file"], d["field"]) for d in errors] == [(str(skill / "SKILL.md"), field)]
    assert word in errors[0]["message"]
    code, error = world.json_error("skills", "show", "broken", "--cwd", str(project))
    assert code == 1 and error["error"] == "unknown_skill"


def test_a_skill_without_frontmatter_is_invalid_and_an_unknown_field_only_warns(
    world: DaemonEnv, project: Path
) -> None:
    root = project / ".agents" / "skills"
    (root / "plain").mkdir(parents=True)
    (root / "plain" / "SKILL.md").write_text("# no frontmatter\n")
    write_skill(root, "extra", {"name": "extra", "description": "d", "argument-hint": "[file]"})
    (root / "no-skill-md").mkdir()  # a directory without SKILL.md is no skill
    found = rows(world, project)
    assert set(found) == {"plain", "extra"}
    assert found["plain"][0]["diagnostics"][0]["field"] is None  # type: ignore[index]
    assert found["extra"][0]["status"] == "offered"
    assert [(d["field"], d["severity"]) for d in found["extra"][0]["diagnostics"]] == [  # type: ignore[union-attr]
        ("argument-hint", "warning")
    ]


def test_an_unknown_name_and_a_missing_cwd_exit_non_zero(world: DaemonEnv, project: Path) -> None:
    code, error = world.json_error("skills", "show", "nothing", "--cwd", str(project))
    assert code == 1 and error["error"] == "unknown_skill" and "nothing" in error["message"]
    plain = world.cli("skills", "show", "nothing", "--cwd", str(project))
    assert plain.returncode == 1 and "no skill named 'nothing'" in plain.stderr
    code, error = world.json_error("skills", "list", "--cwd", str(project / "gone"))
    assert code == 1 and error["error"] == "working_dir_error" and error["field"] == "cwd"


def test_the_python_api_lists_and_shows_skills(
    world: DaemonEnv, project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOME", world.env["HOME"])
    monkeypatch.setenv("EUKHE_CODING_AGENT_DIR", str(world.agent_dir))
    write_skill(project / ".agents" / "skills", "api-skill", body="body text\n")
    listing = list_skills(project)
    assert [(row.name, row.status, row.project) for row in listing.skills] == [("api-skill", "offered", True)]
    shown = show_skill("api-skill", project)
    assert (shown.name, shown.scope, shown.body) == ("api-skill", "project", "body text\n")
    with pytest.raises(UnknownSkillError) as raised:
        show_skill("nope", project)
    assert raised.value.code == "unknown_skill" and raised.value.known == ["api-skill"]


def test_a_skills_symlinks_fifos_and_devices_are_never_read_and_nothing_hangs(world: DaemonEnv, project: Path) -> None:
    """What a confined job can put in a project's skills root: SKILL.md files that are a symlink to a secret, a
    FIFO, a symlink to /dev/zero or over the cap (each skill invalid, saying why), files of a valid skill that are
    such links or a FIFO (never listed nor read), and a skill directory that is a symlink out of the project. The
    listing answers at once (a hang is the CLI's timeout) and nowhere holds the secret."""
    home = Path(world.env["HOME"])
    secret = write_secret(home)
    root = project / ".agents" / "skills"
    made = write_unreadable_skill_files(root, secret)
    good = write_skill(root, "good", body="# Good\nbody\n")
    write_hostile_files(good, secret)
    outside = write_skill(world.root / "elsewhere", "far", files={"copy.txt": "not the project's\n"})
    (root / "far").symlink_to(outside, target_is_directory=True)
    (project / ".claude" / "skills").mkdir(parents=True)
    (project / ".claude" / "skills" / "good").symlink_to(good, target_is_directory=True)  # the same skill: once
    users = write_skill(world.agent_dir / "skills", "users-own")
    (users / "notes.txt").symlink_to(secret)
    user_md = world.agent_dir / "skills" / "user-md-secret"
    user_md.mkdir()
    (user_md / "SKILL.md").symlink_to(secret)

    done = world.cli("skills", "list", "--cwd", str(project), "--json", timeout=60)
    assert done.returncode == 0, done.stderr
    assert SECRET not in done.stdout + done.stderr
    found: dict[str, list[dict[str, object]]] = {}
    for row in json.loads(done.stdout)["skills"]:
        found.setdefault(str(row["name"]), []).append(row)
    assert set(found) == {"far", "good", "user-md-secret", "users-own", *UNREADABLE_SKILLS}
    assert [row["status"] for row in found["good"]] == ["offered"]  # its symlink in .claude/skills is itself
    assert found["users-own"][0]["status"] == "offered"

    def why(name: str) -> str:
        [row] = found[name]
        assert row["status"] == "invalid", row
        [diagnostic] = row["diagnostics"]  # type: ignore[misc]
        return str(diagnostic["message"])  # type: ignore[index]

    assert "SKILL.md: a symlink: not followed" in why("md-secret")
    assert "SKILL.md: a symlink: not followed" in why("md-private")
    assert "SKILL.md: a symlink: not followed" in why("md-zero")
    assert "SKILL.md: a symlink: not followed" in why("user-md-secret")  # the user's roots read the same way
    assert "SKILL.md: not a regular file" in why("md-fifo")
    assert "SKILL.md: larger than 1048576 bytes" in why("md-huge")
    assert "its directory is a symlink" in why("far")
    for name in ("md-secret", "md-private", "far"):
        code, error = world.json_error("skills", "show", name, "--cwd", str(project))
        assert code == 1 and error["error"] == "unknown_skill"
    shown = world.cli("skills", "show", "good", "--cwd", str(project), timeout=60)
    assert (shown.returncode, shown.stdout) == (0, "# Good\nbody\n")
    text = world.cli("skills", "list", "--cwd", str(project), timeout=60)
    assert text.returncode == 0 and SECRET not in text.stdout
    assert made["md-fifo"].joinpath("SKILL.md").is_fifo()  # still there, never opened for a writer to fill
