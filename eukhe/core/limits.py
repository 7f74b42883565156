"""Resource limits: how many processes a session's confined processes may be together, how much memory they may
use, and how large the files they write may grow (docs/sandbox.md "Limits").

Everything here is pure: the shell (`eukhe.sandbox.limits`) reads the machine, makes the session's control groups,
and feeds what it found and what a run left behind; this module decides the rest.

Theory of operation.
- `Settings` are the user's (`limits` in the settings file); `resolved` fills the defaults (memory: half of the
  machine's) and keeps 0 as "no limit".
- `plan(settings, machine)` chooses one mechanism per limit from what the machine offers, the strongest first
  (`MECHANISMS` is the table): a control group the session's confined processes are all in (v2, else v1: it bounds
  them together), else a resource limit of each process (`rlimit`: per process, or per user for processes), else
  nothing (`none`: the limit does not hold here, and `docs/sandbox.md` says where that is). The file size limit is
  always an rlimit (`RLIMIT_FSIZE`: per file); where eukhe may mount (`may_mount`: CAP_SYS_ADMIN, which root has),
  the private /tmp is also a tmpfs of that size (`tmpfs`: its total is bounded, a write past it fails with ENOSPC).
- `prelude(plan, procs_files)` is the argv put before bwrap's: a bash that joins the session's groups and sets the
  rlimits, then execs bwrap. So every process of a launch starts inside, and none can leave (the groups are
  read-only in the sandbox; the hard rlimits cannot be raised without a capability).
- `verdict(plan, ended)` reads what a failed run left behind (the groups' event counters before and after it, its
  exit code, the end of its output) and names the limit that stopped it, if one did; the
  answer ends with `Hit.line()` (the same hint line as a sandbox refusal's).
"""

from __future__ import annotations

import enum
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from eukhe.core.render import render


class Limit(enum.StrEnum):
    """A limit, by the name of its setting (`limits.<name>`)."""

    PROCESSES = "max_processes"  # processes (and threads) of the session's confined processes together
    MEMORY = "max_memory_mb"  # memory of the session's confined processes together, in MiB
    TMP = "max_tmp_mb"  # the private /tmp's size, and any one file a confined process writes, in MiB


class Mechanism(enum.StrEnum):
    """How a limit holds."""

    CGROUP_V2 = "cgroup_v2"  # a control group of the session's (pids.max, memory.max): all its processes together
    CGROUP_V1 = "cgroup_v1"  # the same on a v1 hierarchy (pids.max, memory.limit_in_bytes)
    RLIMIT = "rlimit"  # a resource limit of each process (RLIMIT_DATA, RLIMIT_NPROC per user, RLIMIT_FSIZE)
    TMPFS = "tmpfs"  # the private /tmp is a tmpfs of that size (and RLIMIT_FSIZE bounds each file as well)
    NONE = "none"  # nothing holds it here (no control group, and root is not bound by RLIMIT_NPROC)
    OFF = "off"  # the setting is 0: no limit asked


DEFAULT_MAX_PROCESSES = 1024
"""Tasks (processes and threads) of one session's confined processes together: a build with `make -j` and a kernel
with its threads fit; a fork bomb stops there."""
DEFAULT_MAX_TMP_MB = 8192
"""The private /tmp's size, and any one file a confined process writes."""
DEFAULT_MEMORY_SHARE = 2
"""Without a setting, a session's confined processes may use 1/DEFAULT_MEMORY_SHARE of the machine's memory."""
MIN_MEMORY_MB = 64
"""The least memory limit there is: a kernel does not start in less."""
MIN_PROCESSES = 16
"""The least process limit there is: bwrap, a shell and a pipeline need a few."""


@dataclass(frozen=True, slots=True)
class Settings:
    """The user's `limits` (None: the default; 0: no limit)."""

    max_processes: int | None = None
    max_memory_mb: int | None = None
    max_tmp_mb: int | None = None


@dataclass(frozen=True, slots=True)
class Values:
    """The limits in force (0: none)."""

    max_processes: int
    max_memory_mb: int
    max_tmp_mb: int

    def of(self, limit: Limit) -> int:
        return int(getattr(self, limit.value))


def resolved(settings: Settings, memory_total_mb: int) -> Values:
    """The settings with their defaults filled: memory half of the machine's (at least `MIN_MEMORY_MB`)."""
    memory = settings.max_memory_mb
    if memory is None:
        memory = max(MIN_MEMORY_MB, memory_total_mb // DEFAULT_MEMORY_SHARE) if memory_total_mb > 0 else 0
    return Values(
        DEFAULT_MAX_PROCESSES if settings.max_processes is None else settings.max_processes,
        memory,
        DEFAULT_MAX_TMP_MB if settings.max_tmp_mb is None else settings.max_tmp_mb,
    )


class Controller(enum.StrEnum):
    """A control group controller a limit uses."""

    PIDS = "pids"
    MEMORY = "memory"


@dataclass(frozen=True, slots=True)
class Group:
    """A control group the shell made for the session: its controller, its hierarchy's version, its directory."""

    controller: Controller
    version: int  # 1 or 2
    path: str


@dataclass(frozen=True, slots=True)
class Machine:
    """What the shell found: whether eukhe runs as root (RLIMIT_NPROC does not bind root), the machine's memory,
    the groups it could make for the session (none where no hierarchy is writable), how many tasks the user
    runs now (RLIMIT_NPROC counts every task of the user's, not only the session's), and whether the private /tmp
    can be a tmpfs of its own."""

    root: bool
    memory_total_mb: int
    groups: tuple[Group, ...] = ()
    user_tasks: int = 0
    tmpfs: bool = False  # eukhe may mount a tmpfs on the private /tmp (`may_mount`), and did


@dataclass(frozen=True, slots=True)
class Enforced:
    """How one limit holds: its value (0: none) and its mechanism."""

    limit: Limit
    value: int
    mechanism: Mechanism


@dataclass(frozen=True, slots=True)
class Plan:
    """The limits of a session's launches: how each holds, what to write into the groups, which rlimits to set
    (bash `ulimit` flags with their values, hard and soft alike)."""

    enforced: tuple[Enforced, ...]
    groups: tuple[Group, ...] = ()
    writes: tuple[tuple[str, str], ...] = ()
    rlimits: tuple[tuple[str, int], ...] = ()

    def of(self, limit: Limit) -> Enforced:
        return next(item for item in self.enforced if item.limit is limit)


MECHANISMS: tuple[tuple[Limit, tuple[Mechanism, ...]], ...] = (
    (Limit.PROCESSES, (Mechanism.CGROUP_V2, Mechanism.CGROUP_V1, Mechanism.RLIMIT)),
    (Limit.MEMORY, (Mechanism.CGROUP_V2, Mechanism.CGROUP_V1, Mechanism.RLIMIT)),
    (Limit.TMP, (Mechanism.TMPFS, Mechanism.RLIMIT)),
)
"""Each limit's mechanisms, the strongest first: the first the machine offers holds it."""

_CONTROLLER = {Limit.PROCESSES: Controller.PIDS, Limit.MEMORY: Controller.MEMORY}
MIB = 1 << 20
CAP_SYS_ADMIN = 21
"""The capability mount(2) asks for (its bit in /proc/self/status' `CapEff`)."""


def may_mount(cap_eff: int) -> bool:
    """Whether a process with these effective capabilities may mount a tmpfs (root has them all, unless dropped)."""
    return bool(cap_eff >> CAP_SYS_ADMIN & 1)


def tmpfs_size_mb(plan: Plan) -> int | None:
    """The size of the tmpfs to mount on the private /tmp, in MiB (None: no mount: not allowed here, or 0)."""
    tmp = plan.of(Limit.TMP)
    return tmp.value if tmp.mechanism is Mechanism.TMPFS else None


def _group(groups: Sequence[Group], controller: Controller) -> Group | None:
    """The session's group for `controller`, v2 before v1."""
    found = sorted((group for group in groups if group.controller is controller), key=lambda group: -group.version)
    return found[0] if found else None


def plan(settings: Settings, machine: Machine) -> Plan:
    """How each limit holds on this machine (`MECHANISMS`), and what the shell writes and sets for it."""
    values = resolved(settings, machine.memory_total_mb)
    enforced: list[Enforced] = []
    groups: list[Group] = []
    writes: list[tuple[str, str]] = []
    rlimits: list[tuple[str, int]] = []
    for limit, _ in MECHANISMS:
        value = values.of(limit)
        if value <= 0:
            enforced.append(Enforced(limit, 0, Mechanism.OFF))
            continue
        controller = _CONTROLLER.get(limit)
        group = None if controller is None else _group(machine.groups, controller)
        if group is not None:
            groups.append(group)
            writes += _group_writes(limit, group, value)
            enforced.append(Enforced(limit, value, Mechanism.CGROUP_V2 if group.version == 2 else Mechanism.CGROUP_V1))
        elif limit is Limit.PROCESSES and machine.root:
            enforced.append(Enforced(limit, value, Mechanism.NONE))  # the kernel never applies RLIMIT_NPROC to root
        elif limit is Limit.PROCESSES:
            rlimits.append(("-u", machine.user_tasks + value))  # per user: the user's tasks now, and the session's
            enforced.append(Enforced(limit, value, Mechanism.RLIMIT))
        else:
            rlimits.append(("-d" if limit is Limit.MEMORY else "-f", value * 1024))  # bash counts KiB
            tmpfs = limit is Limit.TMP and machine.tmpfs  # the tmpfs bounds the total, the rlimit each file still
            enforced.append(Enforced(limit, value, Mechanism.TMPFS if tmpfs else Mechanism.RLIMIT))
    return Plan(tuple(enforced), tuple(groups), tuple(writes), tuple(rlimits))


def _group_writes(limit: Limit, group: Group, value: int) -> list[tuple[str, str]]:
    """What the shell writes into a group for a limit (path, content)."""
    if limit is Limit.PROCESSES:
        return [(f"{group.path}/pids.max", str(value))]
    if group.version == 2:
        return [(f"{group.path}/memory.max", str(value * MIB)), (f"{group.path}/memory.swap.max", "0")]
    return [(f"{group.path}/memory.limit_in_bytes", str(value * MIB))]


def procs_files(plan: Plan) -> tuple[str, ...]:
    """The files a launch writes its pid into, to join the session's groups (each directory once)."""
    return tuple(dict.fromkeys(f"{group.path}/cgroup.procs" for group in plan.groups))


PRELUDE_NAME = "eukhe-limits"
PRELUDE_SCRIPT = (
    'set +o posix; while [ $# -gt 0 ] && [ "$1" != -- ]; do '
    'case $1 in /*) echo $$ > "$1" || { echo "eukhe: cannot join the session\'s control group $1" >&2; exit 125; };; '
    '-?) ulimit -H -S "$1" "$2" || { echo "eukhe: cannot set the limit ulimit $1 $2" >&2; exit 125; }; shift;; '
    'esac; shift; done; shift; exec "$@"'
)
"""Joins each control group named (a path), sets each rlimit named (a `ulimit` flag and its value), then runs the
rest (bwrap's argv). A join or limit that fails ends the launch (125) with a line saying which: never a launch
without its limits. It starts in POSIX mode, where a non-interactive bash reads no startup file (`BASH_ENV` is the
confined shell's, with the keeper's preamble: this bash must leave it), then leaves it (`ulimit` counts KiB again)."""


def prelude(plan: Plan) -> tuple[str, ...]:
    """The argv put before bwrap's (empty: no group to join, no rlimit to set)."""
    files = procs_files(plan)
    if not files and not plan.rlimits:
        return ()
    flags = [word for flag, value in plan.rlimits for word in (flag, str(value))]
    return ("bash", "--posix", "-c", PRELUDE_SCRIPT, PRELUDE_NAME, *files, *flags, "--")


def after_prelude(argv: Sequence[str]) -> int:
    """Where bwrap's program is in a launch's argv: after the prelude, if it has one (else 0)."""
    if len(argv) > 4 and argv[0] == "bash" and argv[3] == PRELUDE_SCRIPT:
        return list(argv).index("--", 5) + 1
    return 0


@dataclass(frozen=True, slots=True)
class Counters:
    """The session's groups' event counters: how often a fork met pids.max, how many processes the OOM killer
    ended for memory (None: not counted here)."""

    pids_max: int | None = None
    oom_kills: int | None = None


def count(text: str, key: str) -> int | None:
    """The value of `key` in a flat-keyed file (`pids.events`: `max 3`; `memory.events`, v1's
    `memory.oom_control`: `oom_kill 1`); None where it is not."""
    for line in text.splitlines():
        words = line.split()
        if len(words) == 2 and words[0] == key and words[1].isdigit():
            return int(words[1])
    return None


def rose(before: int | None, after: int | None) -> bool:
    return before is not None and after is not None and after > before


@dataclass(frozen=True, slots=True)
class Ended:
    """What a failed confined run left behind: the counters at its start and now, its exit code, the end of its
    output (and a cell's error)."""

    before: Counters
    after: Counters
    exit_code: int | None
    text: str = ""


MEMORY_MESSAGES = (
    r"cannot allocate memory",  # strerror(ENOMEM)
    r"\bmemoryerror\b",  # Python
    r"out of memory",  # Node, Go, bash ("xmalloc")
    r"std::bad_alloc",  # C++
    r"failed to allocate",  # Rust's allocator
)
PROCESS_MESSAGES = (
    r"fork: .*resource temporarily unavailable",  # bash
    r"resource temporarily unavailable.*fork",
    r"blockingioerror: \[errno 11\]",  # Python's os.fork
    r"can't fork",  # dash, perl
    r"cannot fork",
    r"cannot create threads?",  # Go, pthread_create's EAGAIN
    r"can't start new thread",  # Python
)
FILE_MESSAGES = (
    r"file too large",  # strerror(EFBIG), what RLIMIT_FSIZE gives a write past it
    r"file size limit exceeded",  # bash, for a command SIGXFSZ ended
)
SPACE_MESSAGES = (
    r"no space left on device",  # strerror(ENOSPC), what a full tmpfs gives a write
    r"\[errno 28\]",  # Python's OSError of it
)
"""Only read where the private /tmp is a bounded tmpfs (elsewhere a full disk is not a limit of eukhe's)."""
SIGXFSZ_EXIT = 128 + 25
"""A process ended by SIGXFSZ (a write past RLIMIT_FSIZE, unhandled) exits 153 through bash or bwrap."""
SIGKILL_EXIT = 128 + 9
SCAN_CHARS = 32_768
SCAN_LINES = 200


def _said(text: str, patterns: Sequence[str]) -> bool:
    tail = "\n".join(render(text[-SCAN_CHARS:]).splitlines()[-SCAN_LINES:])
    return any(re.search(pattern, tail, re.IGNORECASE) for pattern in patterns)


@dataclass(frozen=True, slots=True)
class Hit:
    """The limit that stopped a run, how it holds, and its value."""

    limit: Limit
    mechanism: Mechanism
    value: int
    evidence: str

    def line(self) -> str:
        """The one line the answer ends with: the limit, what happened, what to do instead, the user's way on."""
        what, instead = WORDS[self.limit]
        return (
            f"limit reached (limits.{self.limit.value} = {self.value}, {MECHANISM_WORDS[self.mechanism]}): "
            f"{what} ({self.evidence}); {instead}; to allow more, the user raises limits.{self.limit.value} in "
            "the settings (0: no limit) for the next session"
        )


WORDS: Mapping[Limit, tuple[str, str]] = {
    Limit.PROCESSES: (
        "the session's confined processes together reached their number of processes, so a fork failed",
        "run fewer processes at once (a smaller -j, fewer workers), and end the ones left running",
    ),
    Limit.MEMORY: (
        "the session's confined processes together reached their memory, so a process was ended or an allocation "
        "failed",
        "use less memory at once (smaller inputs, fewer workers), or free the kernel's (del, gc.collect())",
    ),
    Limit.TMP: (
        "a file reached the size limit, or the session's private /tmp is full",
        "delete what /tmp no longer needs, or write large files in the working directory in pieces",
    ),
}
MECHANISM_WORDS: Mapping[Mechanism, str] = {
    Mechanism.CGROUP_V2: "the session's cgroup",
    Mechanism.CGROUP_V1: "the session's cgroup (v1)",
    Mechanism.RLIMIT: "a per-process rlimit",
    Mechanism.TMPFS: "the private /tmp is a tmpfs of that size, and each file is bounded by a per-process rlimit",
    Mechanism.NONE: "not enforced here",
    Mechanism.OFF: "off",
}


GROUP_MECHANISMS = (Mechanism.CGROUP_V1, Mechanism.CGROUP_V2)


def _counted(ended: Ended, limit: Limit) -> str | None:
    """What a group's counter says of `limit` over the run (None: it did not rise)."""
    if limit is Limit.MEMORY:
        before, after, what = ended.before.oom_kills, ended.after.oom_kills, "the OOM killer ended {} process(es)"
    else:
        before, after, what = ended.before.pids_max, ended.after.pids_max, "{} fork(s) refused"
    return what.format((after or 0) - (before or 0)) if rose(before, after) else None


SIGNS: tuple[tuple[Limit, tuple[str, ...], str], ...] = (
    (Limit.MEMORY, MEMORY_MESSAGES, "an allocation failed"),
    (Limit.PROCESSES, PROCESS_MESSAGES, "a fork failed"),
    (Limit.TMP, FILE_MESSAGES, "a write past the file size limit"),
)
"""Each limit in the order a verdict weighs it (memory first: a process the OOM killer ended is the surest sign),
with the words that say an rlimit of it was met, and what the hint says then."""


def verdict(plan: Plan, ended: Ended) -> Hit | None:
    """The limit that stopped a failed run, if one did (`SIGNS`' order). With a group, its counter must have risen
    during the run; with an rlimit, the run's own words name the failure (or, for the file size, SIGXFSZ's code)."""
    for limit, messages, evidence in SIGNS:
        enforced = plan.of(limit)
        found: str | None = None
        if enforced.mechanism in GROUP_MECHANISMS:
            found = _counted(ended, limit)
        elif enforced.mechanism in (Mechanism.RLIMIT, Mechanism.TMPFS):
            code = limit is Limit.TMP and ended.exit_code == SIGXFSZ_EXIT
            if enforced.mechanism is Mechanism.TMPFS and _said(ended.text, SPACE_MESSAGES):
                found = "a write found no space left"
            else:
                found = evidence if code or _said(ended.text, messages) else None
        if found is not None:
            return Hit(limit, enforced.mechanism, enforced.value, found)
    return None


def tmp_notice(plan: Plan, used_mb: int) -> str | None:
    """What an answer says when the private /tmp holds more than `limits.max_tmp_mb` (counted, not refused where it
    is no tmpfs of its own; one file is bounded by RLIMIT_FSIZE)."""
    tmp = plan.of(Limit.TMP)
    if tmp.mechanism in (Mechanism.OFF, Mechanism.TMPFS) or used_mb <= tmp.value:  # a tmpfs refuses, never holds more
        return None
    return (
        f"the session's private /tmp holds {used_mb} MiB, more than limits.max_tmp_mb = {tmp.value}: delete what "
        "it no longer needs (rm -rf /tmp/...)"
    )
