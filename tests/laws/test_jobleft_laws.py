"""Laws of what a bash job's shell leaves running (`eukhe.core.jobleft`): what its exit does (every case), which
processes are the job's (free process forests with Hypothesis), and the keeper's report.

The laws: a kill asked never hands processes over, nor does a run that cannot; nothing left ends the job; members are
live, closed under children, each below a root of the job, and never the host, the sandbox's pid 1 or the keeper;
the host reaps only ended children of its own that were the job's, never the shell; every exit code the keeper can
report reads back as itself, and nothing else reads as a code; the keeper's environment keeps the user's.
"""

from __future__ import annotations

import itertools

from hypothesis import given
from hypothesis import strategies as st

from eukhe.core import jobleft as core
from eukhe.core.job import Exited, Killed
from eukhe.core.jobleft import AfterShell, Confined, Proc, Unconfined

HOST = 1
INIT = 1
GROUPS = (10, 11, 12)


@st.composite
def forests(draw: st.DrawFn) -> list[Proc]:
    """A snapshot: processes 2.. each with a parent among the earlier ones (or pid 1: the host, or a sandbox's pid
    1), a group, alive or not, marked or not, and its pid inside (2 is the keeper's)."""
    count = draw(st.integers(0, 14))
    procs = [Proc(1, 0, draw(st.sampled_from(GROUPS)))]
    for pid in range(2, count + 2):
        parent = draw(st.integers(1, pid - 1))
        procs.append(
            Proc(
                pid,
                parent,
                draw(st.sampled_from(GROUPS)),
                alive=draw(st.booleans()),
                marked=draw(st.booleans()),
                inner_pid=draw(st.sampled_from((None, 2, 3, 4))),
                start=pid,
            )
        )
    return procs


kins = st.one_of(
    st.builds(Unconfined, st.just(HOST), st.sampled_from(GROUPS)), st.builds(Confined, st.just(INIT), st.booleans())
)


def ancestors(procs: list[Proc], pid: int) -> list[Proc]:
    """`pid`'s own record and each of its ancestors' in the snapshot, nearest first."""
    every = {proc.pid: proc for proc in procs}
    chain = []
    while pid in every and pid not in {proc.pid for proc in chain}:
        chain.append(every[pid])
        pid = every[pid].parent
    return chain


def never(proc: Proc, kin: core.Kin) -> bool:
    if isinstance(kin, Unconfined):
        return proc.pid == kin.host
    keeper = kin.keeper and proc.parent == kin.init and proc.inner_pid == core.KEEPER_INNER_PID
    return proc.pid == kin.init or keeper


@given(forests(), kins)
def test_left_members_are_live_and_never_the_host_pid_1_or_the_keeper(procs: list[Proc], kin: core.Kin) -> None:
    every = {proc.pid: proc for proc in procs}
    for pid in core.members(procs, kin):
        assert every[pid].alive
        assert not never(every[pid], kin)


@given(forests(), kins)
def test_left_members_are_closed_under_children(procs: list[Proc], kin: core.Kin) -> None:
    found = core.members(procs, kin)
    for proc in procs:
        parent_counts = proc.parent in found or any(
            p.pid == proc.parent and core.is_root(p, kin) for p in procs
        )  # the keeper is no member, but its children (the command's shell and what it started) are the job's
        if proc.alive and parent_counts and not never(proc, kin):
            assert proc.pid in found, proc


@given(forests(), kins)
def test_left_members_are_each_below_a_root_of_the_job(procs: list[Proc], kin: core.Kin) -> None:
    for pid in core.members(procs, kin):
        assert any(core.is_root(proc, kin) for proc in ancestors(procs, pid)), pid


@given(forests(), kins)
def test_left_live_roots_are_members(procs: list[Proc], kin: core.Kin) -> None:
    found = core.members(procs, kin)
    for proc in procs:
        if core.is_root(proc, kin) and proc.alive and not never(proc, kin):
            assert proc.pid in found


@given(forests(), st.sampled_from(GROUPS))
def test_left_unconfined_roots_are_the_group_and_the_hosts_marked_children(procs: list[Proc], group: int) -> None:
    kin = Unconfined(HOST, group)
    for proc in procs:
        expected = proc.pid != HOST and (proc.group == group or (proc.parent == HOST and proc.marked))
        assert core.is_root(proc, kin) is expected
        assert core.needs_mark(proc, kin) is (proc.alive and proc.parent == HOST and proc.group != group)


@given(forests(), kins, st.integers(1, 16), st.dictionaries(st.integers(1, 16), st.integers(1, 16)))
def test_left_reaps_only_ended_children_of_the_host_that_were_the_jobs_never_the_shell(
    procs: list[Proc], kin: core.Kin, leader: int, known: dict[int, int]
) -> None:
    every = {proc.pid: proc for proc in procs}
    reaped = core.reapable(procs, kin, leader, known)
    if isinstance(kin, Confined):
        assert reaped == frozenset()  # the sandbox's pid 1 reaps its namespace
        return
    found = core.members(procs, kin)
    groups = {kin.group} | {every[pid].group for pid in found}
    for pid in reaped:
        proc = every[pid]
        assert not proc.alive and proc.parent == kin.host and pid != leader
        assert proc.group in groups or known.get(pid) == proc.start
    for proc in procs:  # and every such zombie is reaped
        if not proc.alive and proc.parent == kin.host and proc.pid != leader and known.get(proc.pid) == proc.start:
            assert proc.pid in reaped


def test_left_after_shell_over_every_case() -> None:
    for kill_asked, left, can in itertools.product((False, True), repeat=3):
        verdict = core.after_shell(kill_asked=kill_asked, left=left, can_hand_over=can)
        assert (verdict is AfterShell.HANDS_OVER) is (left and not kill_asked and can)
        assert (verdict is AfterShell.ENDS) is (not left)
        assert (verdict is AfterShell.ENDS_THEM) is (left and (kill_asked or not can))


def test_left_the_shells_job_and_the_left_job_each_end_as_asked() -> None:
    for code in (None, 0, 1, 130, 255, -9):
        assert core.shell_end(code, kill_asked=True) == Killed()
        assert core.shell_end(code, kill_asked=False) == Exited(0 if code is None else code if code >= 0 else 137)
    assert core.left_end(kill_asked=True) == Killed()
    assert core.left_end(kill_asked=False) == Exited(core.LEFT_CODE)


def test_left_every_code_the_keeper_reports_reads_back() -> None:
    for code in range(256):
        assert core.reported_code(b"%d\n" % code) == code
        assert core.reported_code(b"%d" % code) is None  # not a whole line yet


@given(st.binary(max_size=12))
def test_left_a_report_that_is_no_code_reads_as_none(data: bytes) -> None:
    line, newline, _ = data.partition(b"\n")
    if not (newline and line.isdigit() and len(line) <= 3):
        assert core.reported_code(data) is None


env_names = st.sampled_from(("PATH", "HOME", "BASH_ENV", "LANG", "X"))


@given(st.dictionaries(env_names, st.text(max_size=8)), st.integers(3, 1000), st.integers(3, 1000))
def test_left_the_keeper_reads_its_preamble_first_and_keeps_the_users_bash_env(
    env: dict[str, str], report_fd: int, preamble_fd: int
) -> None:
    made = core.keeper_env(env, report_fd, preamble_fd)
    assert made["BASH_ENV"] == f"/dev/fd/{preamble_fd}"
    assert made[core.KEEPER_ENV] == f"{report_fd} {preamble_fd}"
    assert made.get(core.USER_BASH_ENV) == env.get("BASH_ENV")
    assert {k: v for k, v in made.items() if k not in ("BASH_ENV", core.KEEPER_ENV, core.USER_BASH_ENV)} == {
        k: v for k, v in env.items() if k != "BASH_ENV"
    }
