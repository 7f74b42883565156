"""The kernel environment's decisions (spec "The kernel environment: install once, no downloads in a session").

Everything that decides lives here, pure; the shell (`eukhe.kernel.bootstrap`) reads facts and does what it is told.

Three decisions, each a small table:

1. The setup plan (`plan_setup`): given who asks (the install command, a session, `--check`) and what is on disk (a
   user Python named, the venv's state, a record of the last install), which step runs, and for a build, the uv
   commands in order with, per command, whether it may download. Only `eukhe kernel install` may download, and every
   download is a verified fetch (uv's pinned sha256 for a Python, `--require-hashes` for wheels) that comes before any
   use of what it fetched. A session rebuilds with every command `--offline`; if it cannot, the kernel is missing and
   only the kernel is: every other tool still runs (`admit_tool`).
2. The sweep (`judge_sweep`): each file beside the bootstrap lock, a candidate `<lock>.candidate-<pid>-<n>` or a
   set-aside `<lock>.stale-<pid>-<n>`, is removed if its process is gone and kept if it lives.
3. The attempt (`judge_attempt`): when link(2) of a candidate onto the lock fails, wait while the lock's owner lives
   (or while a lock that names no owner is at most 30 s old, or of unknown age); set aside and remove a lock whose
   owner is gone or that names no owner and is older. `attempt_effects` lists what an attempt does after its link,
   with the candidate removed on every path.

Pid reuse: an owner is recorded with its process start time; a live pid with another start time counts as gone
(`owner_lives`).

The facts are checked where they enter (law `kernel_ffi`): a `SetupFacts`, `Owner` or `LockFacts` with a part of
the wrong kind or out of range, a start time that is no count, a name or lock text that is no string, raise one
`KernelFactError` naming the first wrong field.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Mapping
from dataclasses import dataclass

from eukhe.core.fact_errors import FactError, is_count

KERNEL_MISSING_TEXT = "The Python kernel is not installed: run `eukhe kernel install` once"
"""The exact error `ipython` answers when the kernel cannot be set up from local files (spec 3)."""

KERNEL_TOOL = "ipython"
"""The one tool a missing kernel refuses."""

UNOWNED_LOCK_PATIENCE_MS = 30_000
"""A lock that names no owner is waited for while at most this old (or of unknown age)."""

LOCK_NAME = "kernel-venv.bootstrap.lock"
"""The bootstrap lock's file name, beside the venv directory."""


class KernelFactError(FactError):
    """A kernel-environment fact the shell cannot have read (law `kernel_ffi`): `field` names the first wrong one."""

    what = "a kernel-environment fact"


def _check_kind(field: str, value: object, kind: type | tuple[type, ...]) -> None:
    if not isinstance(value, kind):
        raise KernelFactError(field, value)


def _check_count(field: str, value: object, *, minimum: int = 0, optional: bool = False) -> None:
    if value is None and optional:
        return
    if not is_count(value, minimum):
        raise KernelFactError(field, value)


# --- 1. The setup plan -------------------------------------------------------------------------------------------


class Purpose(enum.Enum):
    """Who asks for the kernel's Python."""

    INSTALL = "install"  # `eukhe kernel install`: the only one that may download
    SESSION = "session"  # a session about to start its kernel
    CHECK = "check"  # `eukhe kernel install --check`: reports, changes nothing, no network


class VenvState(enum.Enum):
    """What the shell found at the venv path."""

    ABSENT = "absent"  # no venv directory
    UNCHECKED = "unchecked"  # a directory without a valid stamp: half-built, tampered or never checked
    STALE = "stale"  # a checked venv for another build (after an update) or another Python
    READY = "ready"  # a checked venv for this build: the only state a kernel starts on


class PythonSource(enum.Enum):
    """Where the venv's base Python comes from."""

    MANAGED = "managed"  # a Python uv installs (`uv python install`, sha256 pinned by uv)
    GIVEN = "given"  # an existing interpreter named at install (`--python PATH`)


class Action(enum.Enum):
    """One uv command of a build, in the order a build runs them."""

    PYTHON_INSTALL = "python_install"  # uv python install <pinned version>
    VENV = "venv"  # uv venv <staging> --python <base>
    LOCK_INSTALL = "lock_install"  # uv pip install --require-hashes --only-binary :all: -r <lock>
    RUNTIME_INSTALL = "runtime_install"  # uv pip install --no-deps <runtime dir> (local files)
    CHECK = "check"  # uv pip check


class Artifact(enum.Enum):
    """What a command fetches or uses."""

    PYTHON = "python"  # the base interpreter
    VENV = "venv"  # the staging venv
    LOCKED_PACKAGES = "locked_packages"  # the wheels the lock pins
    RUNTIME = "runtime"  # the kernel stub, from its local directory


FETCHES: Mapping[Action, Artifact | None] = {
    Action.PYTHON_INSTALL: Artifact.PYTHON,
    Action.VENV: None,
    Action.LOCK_INSTALL: Artifact.LOCKED_PACKAGES,
    Action.RUNTIME_INSTALL: None,
    Action.CHECK: None,
}
"""What each command may fetch from the network (only when its plan lets it download)."""

USES: Mapping[Action, frozenset[Artifact]] = {
    Action.PYTHON_INSTALL: frozenset(),
    Action.VENV: frozenset({Artifact.PYTHON}),
    Action.LOCK_INSTALL: frozenset({Artifact.VENV}),
    Action.RUNTIME_INSTALL: frozenset({Artifact.VENV}),
    Action.CHECK: frozenset({Artifact.VENV, Artifact.LOCKED_PACKAGES, Artifact.RUNTIME}),
}
"""What each command needs to exist already."""

MAKES: Mapping[Action, Artifact | None] = {
    Action.PYTHON_INSTALL: Artifact.PYTHON,
    Action.VENV: Artifact.VENV,
    Action.LOCK_INSTALL: Artifact.LOCKED_PACKAGES,
    Action.RUNTIME_INSTALL: Artifact.RUNTIME,
    Action.CHECK: None,
}
"""What each command leaves for the commands after it."""

VERIFIED: Mapping[Action, bool] = {
    Action.PYTHON_INSTALL: True,  # uv checks the archive against its pinned sha256
    Action.VENV: False,
    Action.LOCK_INSTALL: True,  # --require-hashes: uv checks each wheel's hash before install
    Action.RUNTIME_INSTALL: False,  # local files only, never fetched
    Action.CHECK: False,
}
"""Whether a command checks what it fetches against a pinned hash before anything uses it."""


@dataclass(frozen=True, slots=True)
class Command:
    """One build command: `offline` means it carries `--offline` (it may not download)."""

    action: Action
    offline: bool

    @property
    def may_download(self) -> bool:
        """A command without `--offline` may download (only in the install command's plan)."""
        return not self.offline

    @property
    def verified(self) -> bool:
        """Whether this command checks its fetch against a pinned hash."""
        return VERIFIED[self.action]


@dataclass(frozen=True, slots=True)
class SetupFacts:
    """What the shell read before asking for a plan."""

    purpose: Purpose
    user_python: bool  # EUKHE_KERNEL_PYTHON names a user Python
    venv: VenvState
    recorded: PythonSource | None  # the last install's record: which Python the venv is built on (None: no install)
    requested: PythonSource  # for INSTALL: the Python asked for now (`--python PATH` = GIVEN); else the recorded one

    def __post_init__(self) -> None:
        _check_kind("purpose", self.purpose, Purpose)
        _check_kind("user_python", self.user_python, bool)
        _check_kind("venv", self.venv, VenvState)
        _check_kind("recorded", self.recorded, (PythonSource, type(None)))
        _check_kind("requested", self.requested, PythonSource)


@dataclass(frozen=True, slots=True)
class UseUserPython:
    """EUKHE_KERNEL_PYTHON names the Python: nothing is installed or checked."""


@dataclass(frozen=True, slots=True)
class UseInstalled:
    """A checked venv for this build is there: use it, build nothing, download nothing."""


@dataclass(frozen=True, slots=True)
class Build:
    """Build a venv with these commands in order, then stamp it checked and for this build."""

    python: PythonSource
    commands: tuple[Command, ...]


@dataclass(frozen=True, slots=True)
class KernelMissing:
    """The kernel cannot be set up from local files: only the kernel tool answers `text`."""

    text: str = KERNEL_MISSING_TEXT


@dataclass(frozen=True, slots=True)
class Report:
    """`--check`: report the state; no command runs."""

    venv: VenvState
    user_python: bool


SetupStep = UseUserPython | UseInstalled | Build | KernelMissing | Report


def build_commands(purpose: Purpose, python: PythonSource) -> tuple[Command, ...]:
    """The commands of a build, `--offline` where the plan says: only the install command's fetches go online."""
    online = purpose is Purpose.INSTALL
    commands: list[Command] = []
    if online and python is PythonSource.MANAGED:
        commands.append(Command(Action.PYTHON_INSTALL, offline=False))
    commands.append(Command(Action.VENV, offline=True))
    commands.append(Command(Action.LOCK_INSTALL, offline=not online))
    commands.append(Command(Action.RUNTIME_INSTALL, offline=True))
    commands.append(Command(Action.CHECK, offline=True))
    return tuple(commands)


def plan_setup(facts: SetupFacts) -> SetupStep:
    """The setup step for these facts (spec 1-4)."""
    _check_kind("setup", facts, SetupFacts)
    if facts.purpose is Purpose.CHECK:
        return Report(venv=facts.venv, user_python=facts.user_python)
    if facts.user_python:
        return UseUserPython()
    if facts.purpose is Purpose.INSTALL:
        if facts.venv is VenvState.READY and facts.recorded is facts.requested:
            return UseInstalled()
        return Build(facts.requested, build_commands(Purpose.INSTALL, facts.requested))
    if facts.venv is VenvState.READY:
        return UseInstalled()
    if facts.recorded is None:
        return KernelMissing()
    return Build(facts.recorded, build_commands(Purpose.SESSION, facts.recorded))


def judge_build_failure(purpose: Purpose) -> KernelMissing | None:
    """A failed build: a session's kernel is missing (the session goes on); the install command fails (None)."""
    return KernelMissing() if purpose is Purpose.SESSION else None


def venv_after(step: SetupStep, venv: VenvState) -> VenvState:
    """The venv's state after a step succeeds: a build ends checked and for this build; nothing else changes it."""
    return VenvState.READY if isinstance(step, Build) else venv


def kernel_may_start(step: SetupStep, venv: VenvState) -> bool:
    """The kernel starts on a user Python, or on a checked venv for this build; never on anything else."""
    if isinstance(step, UseUserPython):
        return True
    return isinstance(step, UseInstalled | Build) and venv_after(step, venv) is VenvState.READY


@dataclass(frozen=True, slots=True)
class ToolRuns:
    """The tool runs as usual."""


@dataclass(frozen=True, slots=True)
class ToolRefused:
    """The tool answers this error instead of running."""

    text: str


def admit_tool(step: SetupStep, tool: str) -> ToolRuns | ToolRefused:
    """A missing kernel refuses only the kernel tool, with the text naming the install; every other tool runs."""
    if isinstance(step, KernelMissing) and tool == KERNEL_TOOL:
        return ToolRefused(step.text)
    return ToolRuns()


# --- Owners and the pid-reuse guard ------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Owner:
    """Who wrote a lock or candidate: a pid and that process's start time (clock ticks since boot)."""

    pid: int
    start: int

    def __post_init__(self) -> None:
        _check_count("pid", self.pid, minimum=1)
        _check_count("start", self.start)


_OWNER_RE = re.compile(r"\A([1-9][0-9]{0,9}) ([0-9]{1,20})\n\Z")


def format_owner(owner: Owner) -> str:
    """The lock and candidate contents: `<pid> <start>` and a newline."""
    return f"{owner.pid} {owner.start}\n"


def parse_owner(text: str) -> Owner | None:
    """The owner a lock names, or None if it names none (empty, partial or foreign contents)."""
    _check_kind("text", text, str)
    match = _OWNER_RE.match(text)
    if match is None:
        return None
    return Owner(int(match.group(1)), int(match.group(2)))


def owner_lives(recorded_start: int | None, running_start: int | None) -> bool:
    """Whether a pid's process still counts as the recorded one.

    `running_start` is the start time of the live process with that pid (None: no such process); a live pid with
    another start time is a reused pid and counts as gone. With no recorded start, a live pid counts as live.
    """
    if running_start is None:
        return False
    return recorded_start is None or recorded_start == running_start


# --- 2. The sweep ------------------------------------------------------------------------------------------------


class BesideKind(enum.Enum):
    """The kinds of file the sweep looks at beside the lock."""

    CANDIDATE = "candidate"  # an attempt's candidate: `<lock>.candidate-<pid>-<n>`
    STALE = "stale"  # a lock set aside: `<lock>.stale-<pid>-<n>`


@dataclass(frozen=True, slots=True)
class BesideName:
    """A parsed name of a file beside the lock: its kind, the pid that made it, that process's counter."""

    kind: BesideKind
    pid: int
    n: int


_BESIDE_RE = re.compile(r"\A" + re.escape(LOCK_NAME) + r"\.(candidate|stale)-([1-9][0-9]{0,9})-(0|[1-9][0-9]{0,18})\Z")


def beside_name(kind: BesideKind, pid: int, n: int) -> str:
    """The name of a candidate or set-aside file of process `pid`, its `n`-th."""
    return f"{LOCK_NAME}.{kind.value}-{pid}-{n}"


def parse_beside(name: str) -> BesideName | None:
    """A candidate or stale file's kind, pid and counter; None for any other name (the sweep leaves it alone)."""
    _check_kind("name", name, str)
    match = _BESIDE_RE.match(name)
    if match is None:
        return None
    return BesideName(BesideKind(match.group(1)), int(match.group(2)), int(match.group(3)))


class SweepVerdict(enum.Enum):
    """What the sweep does with one file beside the lock."""

    REMOVE = "remove"  # its process is gone: nobody will remove it otherwise
    KEEP = "keep"  # its process lives: it removes the file itself


def judge_sweep(recorded_start: int | None, running_start: int | None) -> SweepVerdict:
    """The sweep's verdict on a candidate or stale file, from its process's recorded and running start times.

    `recorded_start`: the start time the file records for its pid (a candidate's contents), None if unknown;
    `running_start`: the start time of the live process with the name's pid, None if there is none.
    """
    _check_count("recorded_start", recorded_start, optional=True)
    _check_count("running_start", running_start, optional=True)
    return SweepVerdict.KEEP if owner_lives(recorded_start, running_start) else SweepVerdict.REMOVE


# --- 3. The attempt ----------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class LockFacts:
    """What the shell read about the existing lock after link(2) failed with EEXIST.

    `present` False: the lock vanished before it could be read. `owner`: the owner its contents name (None: names
    none). `running_start`: the start time of the live process with the owner's pid (None: gone; ignored without an
    owner). `age_ms`: the lock's age from its mtime, None when unknown.
    """

    present: bool
    owner: Owner | None
    running_start: int | None
    age_ms: int | None

    def __post_init__(self) -> None:
        _check_kind("present", self.present, bool)
        _check_kind("owner", self.owner, (Owner, type(None)))
        _check_count("running_start", self.running_start, optional=True)
        _check_count("age_ms", self.age_ms, optional=True)


class AttemptVerdict(enum.Enum):
    """What an attempt does when its candidate did not link."""

    WAIT = "wait"  # the lock is held: wait, then attempt again
    SET_ASIDE = "set_aside"  # the lock is abandoned: rename it aside, remove it, attempt again
    RETRY = "retry"  # the lock vanished meanwhile: attempt again at once


def judge_attempt(facts: LockFacts) -> AttemptVerdict:
    """The attempt's verdict (spec 5): wait while held, set aside what is abandoned."""
    _check_kind("lock", facts, LockFacts)
    if not facts.present:
        return AttemptVerdict.RETRY
    if facts.owner is not None:
        lives = owner_lives(facts.owner.start, facts.running_start)
        return AttemptVerdict.WAIT if lives else AttemptVerdict.SET_ASIDE
    if facts.age_ms is None or facts.age_ms <= UNOWNED_LOCK_PATIENCE_MS:
        return AttemptVerdict.WAIT
    return AttemptVerdict.SET_ASIDE


class LinkOutcome(enum.Enum):
    """How an attempt's write-and-link went."""

    WRITE_FAILED = "write_failed"  # writing the candidate failed (it may exist, partly written)
    LINKED = "linked"  # the candidate is now also the lock: the attempt holds it
    EXISTS = "exists"  # link(2) failed with EEXIST: judge the lock
    LINK_FAILED = "link_failed"  # link(2) failed otherwise


class Effect(enum.Enum):
    """One thing an attempt does, in order, after its write-and-link."""

    REMOVE_CANDIDATE = "remove_candidate"  # unlink our candidate (missing is fine)
    RENAME_ASIDE = "rename_aside"  # rename the lock to our `stale-<pid>-<n>`
    REMOVE_STALE = "remove_stale"  # unlink our stale file
    HOLD = "hold"  # done: the lock is ours
    WAIT = "wait"  # done: wait, then attempt again
    RETRY = "retry"  # done: attempt again at once
    FAIL = "fail"  # done: the attempt failed with an error


def attempt_effects(outcome: LinkOutcome, verdict: AttemptVerdict | None) -> tuple[Effect, ...]:
    """What an attempt does after its write-and-link: the candidate goes on every path, a stale file right after.

    `verdict` is `judge_attempt`'s answer when the outcome is EXISTS, and ignored otherwise.
    """
    if outcome is LinkOutcome.LINKED:
        return (Effect.REMOVE_CANDIDATE, Effect.HOLD)
    if outcome is not LinkOutcome.EXISTS or verdict is None:
        return (Effect.REMOVE_CANDIDATE, Effect.FAIL)
    if verdict is AttemptVerdict.WAIT:
        return (Effect.REMOVE_CANDIDATE, Effect.WAIT)
    if verdict is AttemptVerdict.SET_ASIDE:
        return (Effect.REMOVE_CANDIDATE, Effect.RENAME_ASIDE, Effect.REMOVE_STALE, Effect.RETRY)
    return (Effect.REMOVE_CANDIDATE, Effect.RETRY)
