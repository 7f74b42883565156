"""A skill's files as eukhe lists and reads them (`eukhe.skills.files`), both ways `eukhe.beneath` opens a path
(`openat2` and the component walk): regular files only, no symlink followed, no FIFO waited on, a cap; a project's
skill directory reached from the working directory following no symlink, a user's as laid out."""

from __future__ import annotations

import errno
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from eukhe.beneath import NotRegularError, TooLargeError, use_openat2
from eukhe.skills.files import SkillDir
from tests.skills_support import SECRET, write_hostile_files, write_secret, write_skill


@pytest.fixture(params=[True, False], ids=["openat2", "walk"])
def opening(request: pytest.FixtureRequest) -> Iterator[None]:
    use_openat2(None if request.param else False)  # None: openat2 where this kernel has it
    try:
        yield
    finally:
        use_openat2(None)


@pytest.mark.usefixtures("opening")
def test_only_the_regular_files_are_listed_and_nothing_else_is_read(tmp_path: Path) -> None:
    secret = write_secret(tmp_path / "home")
    skill = write_skill(tmp_path / "project" / ".agents" / "skills", "tricky", files={"scripts/run.py": "x = 1\n"})
    write_hostile_files(skill, secret)
    (skill / "__pycache__").mkdir()
    (skill / "__pycache__" / "a.pyc").write_bytes(b"\0")
    (skill / "big.bin").write_bytes(b"b" * 11)
    place = SkillDir(str(skill), str(tmp_path / "project"))
    assert place.files() == ["SKILL.md", "big.bin", "scripts/run.py"]
    assert place.read("scripts/run.py") == b"x = 1\n"
    with pytest.raises(TooLargeError):
        place.read("big.bin", cap=10)
    for linked in ("notes.txt", "zero", "keys/id_ed25519", "scripts/key"):
        with pytest.raises(OSError) as refused:
            place.read(linked)
        assert refused.value.errno == errno.ELOOP
        assert SECRET not in str(refused.value)
    with pytest.raises(NotRegularError):
        place.read("pipe")  # never waits for a writer


@pytest.mark.usefixtures("opening")
def test_a_projects_skill_is_reached_following_no_symlink_and_a_users_as_laid_out(tmp_path: Path) -> None:
    real = write_skill(tmp_path / "real", "shared", files={"a.txt": "a\n"})
    project = tmp_path / "project"
    (project / ".agents" / "skills").mkdir(parents=True)
    linked = project / ".agents" / "skills" / "shared"
    linked.symlink_to(real, target_is_directory=True)
    with pytest.raises(OSError) as refused:
        SkillDir(str(linked), str(project)).files()
    assert refused.value.errno in (errno.ELOOP, errno.ENOTDIR)
    user_root = tmp_path / "user" / ".agents" / "skills"
    user_root.mkdir(parents=True)
    (user_root / "shared").symlink_to(real, target_is_directory=True)
    assert SkillDir(str(user_root / "shared")).files() == ["SKILL.md", "a.txt"]


def test_a_fifo_skill_file_is_refused_without_a_writer(tmp_path: Path) -> None:
    skill = write_skill(tmp_path, "piped")
    os.unlink(skill / "SKILL.md")
    os.mkfifo(skill / "SKILL.md")
    with pytest.raises(NotRegularError):
        SkillDir(str(skill)).read("SKILL.md")
