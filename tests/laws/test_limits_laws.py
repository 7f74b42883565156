"""Laws of `eukhe.core.limits`: which mechanism holds each limit, what the prelude does, and the verdict on a run."""

from __future__ import annotations

import itertools
import subprocess

from hypothesis import given
from hypothesis import strategies as st

from eukhe.core import limits as core
from eukhe.core.limits import Controller, Counters, Ended, Group, Limit, Machine, Mechanism, Settings

GROUPS = (
    Group(Controller.PIDS, 2, "/cg2/s"),
    Group(Controller.MEMORY, 2, "/cg2/s"),
    Group(Controller.PIDS, 1, "/cg1/pids/s"),
    Group(Controller.MEMORY, 1, "/cg1/memory/s"),
)
ALL_GROUP_SETS = [tuple(combo) for n in range(len(GROUPS) + 1) for combo in itertools.combinations(GROUPS, n)]
SETTINGS = [Settings(p, m, t) for p in (None, 0, 100) for m in (None, 0, 256) for t in (None, 0, 10)]


def machines() -> list[Machine]:
    return [
        Machine(root, 4096, groups, 50, tmpfs)
        for root in (True, False)
        for groups in ALL_GROUP_SETS
        for tmpfs in (True, False)
    ]


def test_each_limit_holds_by_the_strongest_mechanism_the_machine_offers() -> None:
    """Over every machine and setting: a group bounds the session together (v2 over v1); without one, processes
    are an rlimit unless eukhe is root (the kernel never applies RLIMIT_NPROC to root: `none`, said so), memory is
    an rlimit; the private /tmp is a tmpfs where eukhe may mount one, else the file size is an rlimit; a 0 is
    `off` (and no mount)."""
    for machine, settings in itertools.product(machines(), SETTINGS):
        plan = core.plan(settings, machine)
        for limit in Limit:
            enforced = plan.of(limit)
            value = core.resolved(settings, machine.memory_total_mb).of(limit)
            if value == 0:
                assert enforced.mechanism is Mechanism.OFF
                assert limit is not Limit.TMP or core.tmpfs_size_mb(plan) is None
                continue
            controller = {Limit.PROCESSES: Controller.PIDS, Limit.MEMORY: Controller.MEMORY}.get(limit)
            versions = {group.version for group in machine.groups if group.controller is controller}
            if versions:
                expected = Mechanism.CGROUP_V2 if 2 in versions else Mechanism.CGROUP_V1
            elif limit is Limit.PROCESSES and machine.root:
                expected = Mechanism.NONE
            elif limit is Limit.TMP and machine.tmpfs:
                expected = Mechanism.TMPFS
            else:
                expected = Mechanism.RLIMIT
            assert enforced.mechanism is expected, (machine, settings, limit)
            assert enforced.value == value


def test_a_group_in_the_plan_is_written_its_limit_and_joined() -> None:
    """Every group the plan uses gets its limit written and its `cgroup.procs` joined by the prelude."""
    for machine, settings in itertools.product(machines(), SETTINGS):
        plan = core.plan(settings, machine)
        prelude = core.prelude(plan)
        for group in plan.groups:
            assert any(path.startswith(group.path + "/") for path, _ in plan.writes)
            assert f"{group.path}/cgroup.procs" in prelude
        if not plan.groups and not plan.rlimits:
            assert prelude == ()


def test_the_rlimit_for_processes_counts_the_users_tasks_too() -> None:
    """RLIMIT_NPROC is per user: its value is the user's tasks now plus the session's allowance."""
    plan = core.plan(Settings(max_processes=100), Machine(False, 4096, (), user_tasks=37))
    assert ("-u", 137) in plan.rlimits


def test_memory_defaults_to_half_the_machine() -> None:
    assert core.resolved(Settings(), 8192).max_memory_mb == 4096
    assert core.resolved(Settings(), 64).max_memory_mb == core.MIN_MEMORY_MB
    assert core.resolved(Settings(), 0).max_memory_mb == 0  # unknown memory: no default limit


@given(st.lists(st.sampled_from(GROUPS), unique=True), st.booleans())
def test_bwraps_program_is_found_after_the_prelude(groups: list[Group], root: bool) -> None:
    """`after_prelude` finds bwrap's program in a launch's argv whatever the prelude holds (the keyring filter goes
    right after it)."""
    plan = core.plan(Settings(), Machine(root, 4096, tuple(groups), 3))
    argv = [*core.prelude(plan), "/usr/bin/bwrap", "--ro-bind", "/", "/", "--", "bash", "-c", "x -- y"]
    assert argv[core.after_prelude(argv)] == "/usr/bin/bwrap"
    assert core.after_prelude(["/usr/bin/bwrap", "--", "true"]) == 0


def test_the_prelude_sets_each_rlimit_then_runs_the_rest() -> None:
    """The prelude, run for real with a group-free plan: the hard limits are set, then the command runs."""
    plan = core.plan(Settings(max_processes=100, max_memory_mb=512, max_tmp_mb=3), Machine(False, 4096, (), 10))
    done = subprocess.run(
        [*core.prelude(plan), "bash", "-c", "ulimit -Hu; ulimit -Hd; ulimit -Hf; ulimit -Su"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert done.stdout.split() == ["110", str(512 * 1024), str(3 * 1024), "110"]


def test_a_prelude_that_cannot_join_its_group_ends_the_launch_saying_so(tmp_path: object) -> None:
    """A join that fails never runs the command without its limits: exit 125, a line naming the group."""
    plan = core.Plan(
        core.plan(Settings(), Machine(True, 4096)).enforced, (Group(Controller.PIDS, 1, "/nonexistent/g"),)
    )
    done = subprocess.run([*core.prelude(plan), "echo", "ran"], capture_output=True, text=True, check=False)
    assert done.returncode == 125
    assert "ran" not in done.stdout
    assert "/nonexistent/g/cgroup.procs" in done.stderr


def test_count_reads_flat_keyed_files() -> None:
    assert core.count("max 3\n", "max") == 3
    assert core.count("oom_kill_disable 0\nunder_oom 0\noom_kill 2\n", "oom_kill") == 2
    assert core.count("low 0\nhigh 0\nmax 5\noom 1\noom_kill 1\n", "oom_kill") == 1
    assert core.count("", "max") is None


CGROUP_PLAN = core.plan(Settings(100, 256, 10), Machine(True, 4096, GROUPS[2:]))
RLIMIT_PLAN = core.plan(Settings(100, 256, 10), Machine(False, 4096, (), 5))


@given(
    st.tuples(st.integers(0, 3), st.integers(0, 3), st.integers(0, 3), st.integers(0, 3)),
    st.sampled_from([1, 2, 137, 153]),
    st.sampled_from(["", "MemoryError", "BlockingIOError: [Errno 11] Resource temporarily unavailable", "x"]),
)
def test_a_group_limit_is_named_only_when_its_counter_rose(
    counts: tuple[int, int, int, int], code: int, text: str
) -> None:
    """With groups, the counters decide (memory first), never the words; the file size by its signal or words."""
    pids0, pids1, oom0, oom1 = counts
    hit = core.verdict(CGROUP_PLAN, Ended(Counters(pids0, oom0), Counters(pids1, oom1), code, text))
    if oom1 > oom0:
        assert hit is not None and hit.limit is Limit.MEMORY
    elif pids1 > pids0:
        assert hit is not None and hit.limit is Limit.PROCESSES
    elif code == core.SIGXFSZ_EXIT:
        assert hit is not None and hit.limit is Limit.TMP
    else:
        assert hit is None


def test_with_rlimits_the_runs_own_words_name_the_limit() -> None:
    none = Counters()
    said = {
        "Traceback ...\nMemoryError": Limit.MEMORY,
        "bash: fork: retry: Resource temporarily unavailable": Limit.PROCESSES,
        "BlockingIOError: [Errno 11] Resource temporarily unavailable": Limit.PROCESSES,
        "head: error writing 'standard output': File too large": Limit.TMP,
        "bash: line 1:  3 File size limit exceeded  head -c 10M /dev/zero > /tmp/big": Limit.TMP,
        "ls: cannot access 'x': No such file or directory": None,
    }
    for text, limit in said.items():
        hit = core.verdict(RLIMIT_PLAN, Ended(none, none, 1, text))
        assert (None if hit is None else hit.limit) is limit, text


def test_a_limit_that_does_not_hold_is_never_named() -> None:
    """Root without groups: processes are `none`, so no fork failure is blamed on the limit."""
    plan = core.plan(Settings(), Machine(True, 4096))
    hit = core.verdict(plan, Ended(Counters(), Counters(), 1, "bash: fork: Resource temporarily unavailable"))
    assert hit is None


def test_the_hint_names_the_setting_its_value_and_the_mechanism() -> None:
    hit = core.verdict(CGROUP_PLAN, Ended(Counters(0, 0), Counters(0, 1), 137))
    assert hit is not None
    line = hit.line()
    assert line.startswith("limit reached (limits.max_memory_mb = 256, the session's cgroup (v1)): ")
    assert "OOM killer" in line and "raises limits.max_memory_mb" in line


def test_the_tmp_notice_comes_only_past_the_limit() -> None:
    assert core.tmp_notice(CGROUP_PLAN, 10) is None
    notice = core.tmp_notice(CGROUP_PLAN, 11)
    assert notice is not None and "limits.max_tmp_mb = 10" in notice
    off = core.plan(Settings(max_tmp_mb=0), Machine(True, 4096))
    assert core.tmp_notice(off, 10**6) is None


def test_the_tmpfs_is_mounted_exactly_when_eukhe_may_and_a_limit_is_set() -> None:
    """Over every machine and setting: a tmpfs of the limit's size where the machine allows one and the limit is
    not 0; each file stays bounded by RLIMIT_FSIZE either way."""
    for machine, settings in itertools.product(machines(), SETTINGS):
        plan = core.plan(settings, machine)
        value = core.resolved(settings, machine.memory_total_mb).max_tmp_mb
        assert core.tmpfs_size_mb(plan) == (value if machine.tmpfs and value > 0 else None)
        assert (("-f", value * 1024) in plan.rlimits) is (value > 0)


def test_only_cap_sys_admin_may_mount() -> None:
    for bit in range(64):
        assert core.may_mount(1 << bit) is (bit == core.CAP_SYS_ADMIN)
    assert core.may_mount((1 << 41) - 1)  # root's full set
    assert not core.may_mount(0)


TMPFS_PLAN = core.plan(Settings(max_tmp_mb=10), Machine(True, 4096, tmpfs=True))
SPACE_SAID = (
    "head: error writing 'standard output': No space left on device",
    "OSError: [Errno 28] No space left on device: '/tmp/x'",
)


def test_a_full_tmpfs_is_named_and_a_full_disk_elsewhere_is_not_eukhes() -> None:
    """ENOSPC words name `limits.max_tmp_mb` only while the private /tmp is a bounded tmpfs; the file size words
    and SIGXFSZ name it either way; the notice of a counted total never comes with a tmpfs (it refuses instead)."""
    none = Counters()
    for text in SPACE_SAID:
        hit = core.verdict(TMPFS_PLAN, Ended(none, none, 1, text))
        assert hit is not None and hit.limit is Limit.TMP and hit.mechanism is Mechanism.TMPFS, text
        assert hit.line().startswith("limit reached (limits.max_tmp_mb = 10, the private /tmp is a tmpfs")
        assert core.verdict(RLIMIT_PLAN, Ended(none, none, 1, text)) is None, text
    for code, text in ((core.SIGXFSZ_EXIT, ""), (1, "File too large")):
        hit = core.verdict(TMPFS_PLAN, Ended(none, none, code, text))
        assert hit is not None and hit.limit is Limit.TMP
    assert core.verdict(TMPFS_PLAN, Ended(none, none, 1, "No such file or directory")) is None
    assert core.tmp_notice(TMPFS_PLAN, 10**6) is None
