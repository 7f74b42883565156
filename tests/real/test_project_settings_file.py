"""A project's `.eukhe/settings.json` lies where a confined job can write (it can make `.eukhe/` where there is
none): eukhe reads it only as a regular file of at most 1 MiB, following no symlink and never blocking. A FIFO (a
read would wait forever), a symlink to `/dev/zero` (endless), a symlink to a secret, a symlinked `.eukhe` and a file
over the cap are each refused at `session create` with `bad_setting`, naming the file and why, and promptly (the
CLI's timeout is the only clock here); once the file is a plain one again, sessions start there."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.real.conftest import DaemonEnv
from tests.skills_support import SECRET, write_secret

pytestmark = pytest.mark.real

DEADLINE_S = 60.0
"""How long a `session create` may take: only a read that blocks comes near it."""


def fifo(settings: Path, secret: Path) -> None:
    os.mkfifo(settings)


def dev_zero(settings: Path, secret: Path) -> None:
    settings.symlink_to("/dev/zero")


def secret_link(settings: Path, secret: Path) -> None:
    settings.symlink_to(secret)


def linked_dir(settings: Path, secret: Path) -> None:
    elsewhere = secret.parent.parent / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "settings.json").write_text(json.dumps({"truncation": "off"}))
    settings.parent.rmdir()
    settings.parent.symlink_to(elsewhere, target_is_directory=True)


def over_cap(settings: Path, secret: Path) -> None:
    settings.write_text(json.dumps({"truncation": "off"}) + " " * (1 << 20))


CASES: dict[str, tuple[Callable[[Path, Path], None], str]] = {
    "fifo": (fifo, "not a regular file"),
    "dev-zero": (dev_zero, "a symlink"),
    "secret": (secret_link, "a symlink"),
    "eukhe-dir-link": (linked_dir, "a symlink"),
    "over-cap": (over_cap, "larger than 1 MiB"),
}


@pytest.mark.parametrize("case", list(CASES))
def test_a_project_settings_file_that_is_no_regular_file_is_refused_at_once_by_name(
    world: DaemonEnv, case: str
) -> None:
    make, why = CASES[case]
    home = Path(world.env["HOME"])
    secret = write_secret(home)
    project = world.root / "project"
    (project / ".eukhe").mkdir(parents=True)
    settings = project / ".eukhe" / "settings.json"
    make(settings, secret)
    for _ in range(2):  # the refusal stays (a daemon's worker is not left hanging on the first)
        code, error = world.json_error("session", "create", "--cwd", str(project), timeout=DEADLINE_S)
        assert code != 0 and error["error"] == "bad_setting", error
        assert str(settings) in error["message"] and why in error["message"], error
        assert SECRET not in json.dumps(error)
    if settings.parent.is_symlink():
        settings.parent.unlink()
        settings.parent.mkdir()
    else:
        settings.unlink()
    settings.write_text(json.dumps({"truncation": "off"}))
    session = world.json("session", "create", "--cwd", str(project), timeout=DEADLINE_S)["id"]
    assert world.json("bash", "--session", session, "--", "echo ok")["exit_code"] == 0
