"""`limits.max_tmp_mb` as a tmpfs, for real (docs/sandbox.md "Limits"): where eukhe may mount (root, CAP_SYS_ADMIN),
a session's private /tmp is a tmpfs of that size on the host, so a confined job and the file tools meet one bound;
closing the session releases it (its files kept for a reopen); a mount a dead worker left never keeps a session
from reopening or going.

Every test here is safe if the bound did not hold: the writes are a few MiB past a small limit."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from eukhe import mounts
from eukhe.core import limits as core
from eukhe.sandbox import tmpfs
from tests.real.conftest import DaemonEnv

pytestmark = [
    pytest.mark.real,
    pytest.mark.skipif(
        not core.may_mount(tmpfs.cap_eff()), reason="eukhe may not mount here (neither root nor CAP_SYS_ADMIN)"
    ),
]

LIMIT_MB = 4


@pytest.fixture(autouse=True)
def no_mount_left(tmp_path: Path) -> Iterator[None]:
    """A test that failed midway leaves no mount behind (pytest could not remove its directory)."""
    yield
    mounts.release_below(tmp_path)


@pytest.fixture
def released(world: DaemonEnv) -> Iterator[DaemonEnv]:
    """The world, with whatever is mounted in it unmounted before it goes."""
    yield world
    world.stop()
    mounts.release_below(world.root)


def configure(world: DaemonEnv, **limits: int) -> None:
    world.agent_dir.mkdir(mode=0o700, exist_ok=True)
    (world.agent_dir / "settings.json").write_text(json.dumps({"limits": limits}))


def session_tmp(world: DaemonEnv, session: str) -> Path:
    return world.agent_dir / "sessions" / session / "tmp"


def tmpfs_on(path: Path) -> list[mounts.Mount]:
    return [mount for mount in mounts.at(path) if mount.fstype == "tmpfs"]


def test_the_private_tmp_is_bounded_in_total_for_jobs_and_file_tools(released: DaemonEnv, tmp_path: Path) -> None:
    world = released
    configure(world, max_tmp_mb=LIMIT_MB)
    session = world.json("session", "create", "--cwd", str(tmp_path))["id"]
    first = world.json("bash", "--session", session, "--", "head -c 3M /dev/zero > /tmp/one && echo ok")
    assert first["output"]["text"] == "ok\n", first
    tmp = session_tmp(world, session)
    assert tmpfs_on(tmp), "no tmpfs on the session's private /tmp"

    # Each file is under the limit (RLIMIT_FSIZE is not met): only the total is past it.
    answer = world.json("bash", "--session", session, "--", "head -c 3M /dev/zero > /tmp/two")
    assert answer["exit_code"] != 0, answer
    assert "No space left on device" in answer["output"]["text"], answer
    assert answer["refusal"]["rule"] == "limits.max_tmp_mb", answer
    assert answer["refusal"]["hint"].startswith(f"limit reached (limits.max_tmp_mb = {LIMIT_MB}, the private /tmp is a")
    assert (tmp / "one").stat().st_size + (tmp / "two").stat().st_size <= LIMIT_MB << 20

    source = tmp_path.parent / "source.txt"
    source.write_text("x" * (2 << 20))
    wrote = world.cli("fs", "write", "--session", session, "--json", str(tmp / "three"), str(source))  # its host path
    assert wrote.returncode != 0, wrote.stdout
    assert "No space left on device" in wrote.stdout, wrote.stdout
    assert not (tmp / "three").exists() or (tmp / "three").stat().st_size < 2 << 20

    world.cli("session", "close", session)
    world.stop()
    assert tmpfs_on(tmp) == [], "the tmpfs outlived its session"
    assert (tmp / "one").stat().st_size == 3 << 20  # kept for a reopen

    again = world.json("bash", "--session", session, "--", "stat -c %s /tmp/one; df -k /tmp | tail -1")
    size, df = again["output"]["text"].splitlines()
    assert int(size) == 3 << 20 and df.split()[1] == str(LIMIT_MB * 1024), again
    assert tmpfs_on(tmp)
    world.cli("session", "close", session)
    world.stop()
    assert tmpfs_on(tmp) == []
    world.json("session", "delete", session)
    assert not tmp.parent.exists()


def test_a_mount_a_dead_worker_left_neither_breaks_a_reopen_nor_a_delete(released: DaemonEnv, tmp_path: Path) -> None:
    world = released
    configure(world, max_tmp_mb=LIMIT_MB)
    session = world.json("session", "create", "--cwd", str(tmp_path))["id"]
    world.json("bash", "--session", session, "--", "echo under > /tmp/under")
    world.cli("session", "close", session)
    world.stop()
    tmp = session_tmp(world, session)
    assert tmpfs_on(tmp) == []

    # What a worker killed with the session open leaves: a tmpfs on the directory, with files of its own.
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "stale", str(tmp)], check=True)
    (tmp / "stale").write_text("kept\n")
    reopened = world.json("bash", "--session", session, "--", "cat /tmp/stale /tmp/under")
    assert reopened["output"]["text"] == "kept\nunder\n", reopened
    assert [mount.source for mount in mounts.at(tmp)] == [tmpfs.SOURCE]  # the stale one went, eukhe's is there
    world.cli("session", "close", session)
    world.stop()

    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "stale", str(tmp)], check=True)
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "stale", str(tmp)], check=True)  # even two
    world.json("session", "delete", session)
    assert mounts.below(tmp.parent.parent) == []
    assert not tmp.parent.exists()


def test_a_content_too_large_for_the_tmpfs_is_kept_and_the_mount_skipped(tmp_path: Path) -> None:
    """A reopened session whose /tmp holds more than the limit (it was raised, then lowered) keeps its files: no
    mount then, and the directory is as it was."""
    tmp = tmp_path / "tmp"
    tmp.mkdir(mode=0o700)
    (tmp / "big").write_bytes(b"x" * (2 << 20))
    (tmp / "sub").mkdir()
    (tmp / "sub" / "small").write_text("small")
    assert tmpfs.mount(tmp, 1) is None
    assert tmpfs_on(tmp) == []
    assert (tmp / "big").stat().st_size == 2 << 20 and (tmp / "sub" / "small").read_text() == "small"
    assert sorted(path.name for path in tmp_path.iterdir()) == ["tmp"]

    mount_id = tmpfs.mount(tmp, 4)
    assert mount_id is not None and tmpfs_on(tmp)[-1].id == mount_id
    assert (tmp / "sub" / "small").read_text() == "small"
    tmpfs.release(tmp, mount_id)
    assert tmpfs_on(tmp) == [] and (tmp / "big").stat().st_size == 2 << 20
    assert sorted(path.name for path in tmp_path.iterdir()) == ["tmp"]


def test_mountinfo_paths_are_read_unescaped() -> None:
    line = "45 27 0:40 / /tmp/a\\040b\\134c rw,nosuid - tmpfs eukhe-tmp rw,size=1024k\n"
    assert mounts.mounts(line) == [mounts.Mount(45, "/tmp/a b\\c", "tmpfs", "eukhe-tmp")]


def test_a_fork_gets_a_tmpfs_of_its_own_and_the_old_directory_keeps_its_files(
    released: DaemonEnv, tmp_path: Path
) -> None:
    world = released
    configure(world, max_tmp_mb=LIMIT_MB)
    session = world.json("session", "create", "--cwd", str(tmp_path))["id"]
    world.json("bash", "--session", session, "--", "echo before > /tmp/before")
    forked = world.json("tree", "fork", "--session", session, "none")["session"]
    assert forked != session
    old, new = session_tmp(world, session), session_tmp(world, forked)
    assert tmpfs_on(old) == [] and (old / "before").read_text() == "before\n"
    there = world.json("bash", "--session", forked, "--", "ls -A /tmp; df -k /tmp | tail -1")["output"]["text"]
    assert there.splitlines()[-1].split()[1] == str(LIMIT_MB * 1024), there
    assert "before" not in there.splitlines()[:-1]  # a fork's /tmp starts empty, as it always has
    assert [mount.source for mount in tmpfs_on(new)] == [tmpfs.SOURCE]
    world.cli("session", "close", forked)
    world.stop()
    assert tmpfs_on(new) == [] and tmpfs_on(old) == []
