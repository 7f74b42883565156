"""The artifact collection's removal step on real files and real flocks: an artifact a writer holds (its shared
flock, as `BoundedOutput` takes it) is never unlinked, also when the writer took its lock after the listing; nor is
a running job's spill file, within the limits or past them."""

from __future__ import annotations

import fcntl
import os
import time
from collections.abc import Iterable, Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

import pytest

from eukhe.core import retention
from eukhe.core.bound import On, OutputLimits
from eukhe.output import BoundedOutput
from eukhe.records.settings import Upkeep
from eukhe.store import artifacts, dirs

pytestmark = pytest.mark.real


@contextmanager
def writer_lock(path: Path) -> Iterator[None]:
    """A writer of `path` holding its shared flock, on a descriptor of its own (as `BoundedOutput` holds it)."""
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CLOEXEC)
    try:
        fcntl.flock(fd, fcntl.LOCK_SH)
        yield
    finally:
        os.close(fd)


def old_artifact(root: Path, name: str = "output-1.log") -> Path:
    """An artifact of session `s1` under sessions root `root`, a month old."""
    directory = root / "s1" / dirs.ARTIFACTS_NAME
    directory.mkdir(parents=True)
    path = directory / name
    path.write_bytes(b"x" * 100)
    month_ago = time.time() - 30 * 86_400
    os.utime(path, (month_ago, month_ago))
    return path


def test_the_removal_keeps_an_artifact_whose_writer_holds_its_shared_lock(tmp_path: Path) -> None:
    path = old_artifact(tmp_path)
    with writer_lock(path):
        assert artifacts.remove_unless_written(str(path)) is False
        assert path.exists()
    assert artifacts.remove_unless_written(str(path)) is True  # the writer is done: now it goes
    assert not path.exists()


def test_a_collection_keeps_and_does_not_report_an_artifact_whose_writer_locked_it_after_the_listing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The collection lists the artifacts and checks which are being written; a writer that takes its lock after
    that (here: right after the plan is made, the last step before the removals) still keeps its file."""
    path = old_artifact(tmp_path)
    planned = retention.plan
    writer = ExitStack()
    plans: list[tuple[retention.Removal, ...]] = []

    def plan_then_a_writer_locks(
        found: Iterable[retention.Artifact], policy: retention.Policy, now_ms: int
    ) -> tuple[retention.Removal, ...]:
        removals = planned(found, policy, now_ms)
        plans.append(removals)
        writer.enter_context(writer_lock(path))
        return removals

    monkeypatch.setattr(retention, "plan", plan_then_a_writer_locks)
    upkeep = Upkeep(artifact_max_total_bytes=0, artifact_max_age_days=7)
    with writer:
        report = artifacts.collect(tmp_path, (), upkeep, int(time.time() * 1000), dry_run=False)
    assert [[r.artifact.path for r in removals] for removals in plans] == [[str(path)]], "the policy removes it"
    assert report.kept_being_written == 0  # at the listing, nobody wrote it
    assert path.exists(), "an artifact whose writer holds its lock is not unlinked"
    assert report.removed == []
    assert report.bytes_freed == 0 and report.errors == []


@pytest.mark.parametrize("past_the_limits", [False, True])
def test_a_collection_never_removes_the_spill_file_of_a_running_job(tmp_path: Path, past_the_limits: bool) -> None:
    directory = tmp_path / "s1" / dirs.ARTIFACTS_NAME
    output = BoundedOutput(On(OutputLimits(100, 10)), directory, artifact_prefix="job-1", spill=True)
    output.write(b"x\n" * (1000 if past_the_limits else 3))
    (path,) = directory.iterdir()
    month_ago = time.time() - 30 * 86_400
    os.utime(path, (month_ago, month_ago))
    upkeep = Upkeep(artifact_max_total_bytes=1, artifact_max_age_days=1)  # everything is over both limits
    report = artifacts.collect(tmp_path, (), upkeep, int(time.time() * 1000), dry_run=False)
    assert path.exists() and report.removed == [] and report.kept_being_written == 1
    result = output.close()
    assert path.exists() == past_the_limits and result.artifact == (path if past_the_limits else None)
    report = artifacts.collect(tmp_path, (), upkeep, int(time.time() * 1000), dry_run=False)
    assert [removed.path for removed in report.removed] == ([str(path)] if past_the_limits else [])
