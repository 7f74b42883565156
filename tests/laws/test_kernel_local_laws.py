"""Laws of the kernel environment's core (kernel_local group): the setup plan, the lock verdicts, the entry.

Every domain here is finite or has a finite set of boundaries, so each law runs twice: over the whole small domain
(a proof by enumeration) and under Hypothesis over free inputs.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from eukhe.core.kernel_local import (
    FETCHES,
    KERNEL_MISSING_TEXT,
    KERNEL_TOOL,
    LOCK_NAME,
    MAKES,
    USES,
    Action,
    Artifact,
    AttemptVerdict,
    BesideKind,
    BesideName,
    Build,
    Command,
    Effect,
    KernelFactError,
    KernelMissing,
    LinkOutcome,
    LockFacts,
    Owner,
    Purpose,
    PythonSource,
    Report,
    SetupFacts,
    SetupStep,
    SweepVerdict,
    ToolRefused,
    ToolRuns,
    UseInstalled,
    UseUserPython,
    VenvState,
    admit_tool,
    attempt_effects,
    beside_name,
    format_owner,
    judge_attempt,
    judge_build_failure,
    judge_sweep,
    kernel_may_start,
    parse_beside,
    parse_owner,
    plan_setup,
    venv_after,
)
from tests.laws.fact_support import refused_field

# --- Domains -----------------------------------------------------------------------------------------------------


def all_setup_facts() -> Iterator[SetupFacts]:
    """Every SetupFacts there is (3 * 2 * 4 * 3 * 2 = 144)."""
    for purpose, user, venv, recorded, requested in itertools.product(
        Purpose, (False, True), VenvState, (None, *PythonSource), PythonSource
    ):
        yield SetupFacts(purpose, user, venv, recorded, requested)


setup_facts = st.builds(
    SetupFacts,
    purpose=st.sampled_from(Purpose),
    user_python=st.booleans(),
    venv=st.sampled_from(VenvState),
    recorded=st.none() | st.sampled_from(PythonSource),
    requested=st.sampled_from(PythonSource),
)

STARTS = (None, 0, 1, 2)
"""Start times up to relabelling: unknown/gone, and three distinct values."""
AGES = (None, 0, 1, 29_999, 30_000, 30_001, 10**9)
"""Lock ages at and around the 30 s boundary."""
starts = st.none() | st.integers(min_value=0, max_value=2**64)
ages = st.sampled_from(AGES) | st.integers(min_value=0, max_value=2**40)
owners = st.builds(Owner, pid=st.integers(1, 2**22), start=st.integers(0, 2**64))


def all_lock_facts() -> Iterator[LockFacts]:
    """Every LockFacts over the small scope: present or not, owner or none, each start and age."""
    owner_choices = (None, Owner(7, 0), Owner(7, 1))
    for present, owner, running, age in itertools.product((False, True), owner_choices, STARTS, AGES):
        yield LockFacts(present, owner, running, age)


lock_facts = st.builds(LockFacts, present=st.booleans(), owner=st.none() | owners, running_start=starts, age_ms=ages)


def downloads(step: SetupStep) -> tuple[Command, ...]:
    """The commands of a step that may download."""
    return tuple(c for c in step.commands if c.may_download) if isinstance(step, Build) else ()


# --- The setup plan ----------------------------------------------------------------------------------------------


def check_session_never_downloads(facts: SetupFacts) -> None:
    step = plan_setup(facts)
    if facts.purpose is not Purpose.INSTALL:
        assert downloads(step) == ()
        if isinstance(step, Build):
            assert all(c.offline for c in step.commands)
            assert Action.PYTHON_INSTALL not in [c.action for c in step.commands]


def test_kernel_session_never_downloads_exhaustive() -> None:
    for facts in all_setup_facts():
        check_session_never_downloads(facts)


@given(setup_facts)
def test_kernel_session_never_downloads(facts: SetupFacts) -> None:
    check_session_never_downloads(facts)


def check_download_only_on_install(facts: SetupFacts) -> None:
    if downloads(plan_setup(facts)):
        assert facts.purpose is Purpose.INSTALL
        assert not facts.user_python


def test_kernel_download_only_on_install_exhaustive() -> None:
    for facts in all_setup_facts():
        check_download_only_on_install(facts)


@given(setup_facts)
def test_kernel_download_only_on_install(facts: SetupFacts) -> None:
    check_download_only_on_install(facts)


def check_fetch_verified_before_use(facts: SetupFacts) -> None:
    step = plan_setup(facts)
    if not isinstance(step, Build):
        return
    actions = [c.action for c in step.commands]
    # A Python is there before the build unless the build installs it (a given one, or the last install's).
    have: set[Artifact] = set() if Action.PYTHON_INSTALL in actions else {Artifact.PYTHON}
    for index, command in enumerate(step.commands):
        assert USES[command.action] <= have, f"{command.action} uses what no earlier command made"
        fetched = FETCHES[command.action]
        if command.may_download:
            assert command.verified, f"{command.action} downloads without a hash check"
            assert fetched is not None
            assert all(fetched not in USES[c.action] for c in step.commands[:index]), "used before fetched"
        made = MAKES[command.action]
        if made is not None:
            have.add(made)


def test_kernel_fetch_verified_before_use_exhaustive() -> None:
    for facts in all_setup_facts():
        check_fetch_verified_before_use(facts)


@given(setup_facts)
def test_kernel_fetch_verified_before_use(facts: SetupFacts) -> None:
    check_fetch_verified_before_use(facts)


BUILD_ORDER = [Action.VENV, Action.LOCK_INSTALL, Action.RUNTIME_INSTALL, Action.CHECK]


def check_setup_runs(facts: SetupFacts) -> None:
    step = plan_setup(facts)
    if isinstance(step, Build):
        actions = [c.action for c in step.commands]
        assert [a for a in actions if a is not Action.PYTHON_INSTALL] == BUILD_ORDER
        assert actions[-1] is Action.CHECK  # the venv is checked before it is stamped
        assert [c.offline for c in step.commands if c.action is Action.RUNTIME_INSTALL] == [True]
        after = venv_after(step, facts.venv)
        assert after is VenvState.READY
        # A second run keeps the installed venv and downloads nothing.
        again = plan_setup(SetupFacts(facts.purpose, facts.user_python, after, step.python, step.python))
        assert isinstance(again, UseInstalled)
        assert downloads(again) == ()
    # The kernel starts only on a user Python or a checked venv for this build.
    if kernel_may_start(step, facts.venv):
        assert isinstance(step, UseUserPython) or venv_after(step, facts.venv) is VenvState.READY
    if isinstance(step, UseInstalled):
        assert facts.venv is VenvState.READY
    if isinstance(step, KernelMissing | Report):
        assert not kernel_may_start(step, facts.venv)


def test_kernel_setup_runs_exhaustive() -> None:
    for facts in all_setup_facts():
        check_setup_runs(facts)


@given(setup_facts)
def test_kernel_setup_runs(facts: SetupFacts) -> None:
    check_setup_runs(facts)


def check_install_fetches(facts: SetupFacts) -> None:
    if facts.purpose is not Purpose.INSTALL or facts.user_python:
        return
    step = plan_setup(facts)
    if facts.venv is VenvState.READY and facts.recorded is facts.requested:
        assert isinstance(step, UseInstalled)
        return
    assert isinstance(step, Build)
    assert step.python is facts.requested
    online = {c.action for c in step.commands if c.may_download}
    expected = {Action.LOCK_INSTALL} | ({Action.PYTHON_INSTALL} if facts.requested is PythonSource.MANAGED else set())
    assert online == expected
    assert step.commands[0].action is (
        Action.PYTHON_INSTALL if facts.requested is PythonSource.MANAGED else Action.VENV
    )


def test_kernel_install_fetches_exhaustive() -> None:
    for facts in all_setup_facts():
        check_install_fetches(facts)


@given(setup_facts)
def test_kernel_install_fetches(facts: SetupFacts) -> None:
    check_install_fetches(facts)


def spec_table(facts: SetupFacts) -> SetupStep:
    """The plan written out independently from the spec, as the law's reference."""
    on, off = False, True
    if facts.purpose is Purpose.CHECK:
        return Report(facts.venv, facts.user_python)
    if facts.user_python:
        return UseUserPython()
    if facts.purpose is Purpose.INSTALL:
        if facts.venv is VenvState.READY and facts.recorded == facts.requested:
            return UseInstalled()
        head = (Command(Action.PYTHON_INSTALL, on),) if facts.requested is PythonSource.MANAGED else ()
        rest = (
            Command(Action.VENV, off),
            Command(Action.LOCK_INSTALL, on),
            Command(Action.RUNTIME_INSTALL, off),
            Command(Action.CHECK, off),
        )
        return Build(facts.requested, head + rest)
    if facts.venv is VenvState.READY:
        return UseInstalled()
    if facts.recorded is None:
        return KernelMissing(KERNEL_MISSING_TEXT)
    return Build(facts.recorded, tuple(Command(a, off) for a in BUILD_ORDER))


def test_kernel_plan_exact_exhaustive() -> None:
    seen = set()
    for facts in all_setup_facts():
        step = plan_setup(facts)
        assert step == spec_table(facts), facts
        seen.add(type(step))
    assert seen == {Report, UseUserPython, UseInstalled, Build, KernelMissing}


@given(setup_facts)
def test_kernel_plan_exact(facts: SetupFacts) -> None:
    assert plan_setup(facts) == spec_table(facts)


def test_kernel_plan_exact_examples() -> None:
    fresh = SetupFacts(Purpose.INSTALL, False, VenvState.ABSENT, None, PythonSource.MANAGED)
    assert plan_setup(fresh) == Build(
        PythonSource.MANAGED,
        (
            Command(Action.PYTHON_INSTALL, offline=False),
            Command(Action.VENV, offline=True),
            Command(Action.LOCK_INSTALL, offline=False),
            Command(Action.RUNTIME_INSTALL, offline=True),
            Command(Action.CHECK, offline=True),
        ),
    )
    update = SetupFacts(Purpose.SESSION, False, VenvState.STALE, PythonSource.GIVEN, PythonSource.GIVEN)
    assert plan_setup(update) == Build(PythonSource.GIVEN, tuple(Command(a, offline=True) for a in BUILD_ORDER))


def check_missing_spares_tools(facts: SetupFacts, tool: str) -> None:
    step = plan_setup(facts)
    if tool != KERNEL_TOOL:
        assert admit_tool(step, tool) == ToolRuns()
    for failed in (judge_build_failure(facts.purpose),):
        if failed is not None and tool != KERNEL_TOOL:
            assert admit_tool(failed, tool) == ToolRuns()


TOOLS = ("ipython", "bash", "execute_bash_and_wait", "jobs.wait", "jobs.cancel", "read", "")


def test_kernel_missing_spares_tools_exhaustive() -> None:
    for facts, tool in itertools.product(all_setup_facts(), TOOLS):
        check_missing_spares_tools(facts, tool)
    assert judge_build_failure(Purpose.SESSION) == KernelMissing()  # a session goes on without its kernel
    assert judge_build_failure(Purpose.INSTALL) is None  # the install command fails instead


@given(setup_facts, st.text(max_size=20) | st.sampled_from(TOOLS))
def test_kernel_missing_spares_tools(facts: SetupFacts, tool: str) -> None:
    check_missing_spares_tools(facts, tool)


def check_missing_names_install(facts: SetupFacts) -> None:
    step = plan_setup(facts)
    missing = isinstance(step, KernelMissing)
    assert missing == (
        facts.purpose is Purpose.SESSION
        and not facts.user_python
        and facts.venv is not VenvState.READY
        and facts.recorded is None
    )
    if missing:
        assert admit_tool(step, KERNEL_TOOL) == ToolRefused(
            "The Python kernel is not installed: run `eukhe kernel install` once"
        )
    else:
        assert admit_tool(step, KERNEL_TOOL) == ToolRuns()


def test_kernel_missing_names_install_exhaustive() -> None:
    for facts in all_setup_facts():
        check_missing_names_install(facts)
    assert "`eukhe kernel install`" in KERNEL_MISSING_TEXT


@given(setup_facts)
def test_kernel_missing_names_install(facts: SetupFacts) -> None:
    check_missing_names_install(facts)


# --- The bootstrap lock ------------------------------------------------------------------------------------------


def simulate_attempt(outcome: LinkOutcome, verdict: AttemptVerdict | None, lock_there: bool) -> set[str]:
    """Run an attempt's effects on a model directory; return what is left of this attempt's files."""
    files = {"candidate"}  # the attempt wrote (some of) its candidate
    if outcome is LinkOutcome.LINKED or lock_there:
        files.add("lock")
    effects = attempt_effects(outcome, verdict)
    terminal = {Effect.HOLD, Effect.WAIT, Effect.RETRY, Effect.FAIL}
    assert effects[-1] in terminal
    assert not set(effects[:-1]) & terminal
    assert effects[0] is Effect.REMOVE_CANDIDATE
    for effect in effects:
        if effect is Effect.REMOVE_CANDIDATE:
            files.discard("candidate")
        elif effect is Effect.RENAME_ASIDE:
            files.discard("lock")
            files.add("stale")
        elif effect is Effect.REMOVE_STALE:
            files.discard("stale")
        elif effect is Effect.HOLD:
            assert "lock" in files
    return files


def check_attempt_leaves_none(outcome: LinkOutcome, facts: LockFacts) -> None:
    verdict = judge_attempt(facts) if outcome is LinkOutcome.EXISTS else None
    left = simulate_attempt(outcome, verdict, facts.present)
    assert "candidate" not in left
    assert "stale" not in left
    effects = attempt_effects(outcome, verdict)
    assert (Effect.HOLD in effects) == (outcome is LinkOutcome.LINKED)


def test_kernel_lock_attempt_leaves_none_exhaustive() -> None:
    for outcome, facts in itertools.product(LinkOutcome, all_lock_facts()):
        check_attempt_leaves_none(outcome, facts)
    for outcome, verdict in itertools.product(LinkOutcome, (None, *AttemptVerdict)):
        assert "candidate" not in simulate_attempt(outcome, verdict, lock_there=True)


@given(st.sampled_from(LinkOutcome), lock_facts)
def test_kernel_lock_attempt_leaves_none(outcome: LinkOutcome, facts: LockFacts) -> None:
    check_attempt_leaves_none(outcome, facts)


def test_kernel_lock_sweep_removes_dead_exhaustive() -> None:
    for recorded, running in itertools.product(STARTS, STARTS):
        gone = running is None or (recorded is not None and recorded != running)
        if gone:
            assert judge_sweep(recorded, running) is SweepVerdict.REMOVE


@given(starts, starts)
def test_kernel_lock_sweep_removes_dead(recorded: int | None, running: int | None) -> None:
    assert judge_sweep(recorded, None) is SweepVerdict.REMOVE
    if recorded is not None and running is not None and recorded != running:
        assert judge_sweep(recorded, running) is SweepVerdict.REMOVE  # a reused pid counts as gone


def test_kernel_lock_sweep_keeps_live_exhaustive() -> None:
    for recorded, running in itertools.product(STARTS, STARTS):
        live = running is not None and recorded in (None, running)
        assert (judge_sweep(recorded, running) is SweepVerdict.KEEP) == live


@given(starts, st.integers(min_value=0, max_value=2**64))
def test_kernel_lock_sweep_keeps_live(recorded: int | None, running: int) -> None:
    assert judge_sweep(None, running) is SweepVerdict.KEEP
    assert judge_sweep(running, running) is SweepVerdict.KEEP
    if recorded is None or recorded == running:
        assert judge_sweep(recorded, running) is SweepVerdict.KEEP


def spec_attempt(facts: LockFacts) -> AttemptVerdict:
    """The attempt's verdict as the spec says it, as the law's reference."""
    if not facts.present:
        return AttemptVerdict.RETRY
    if facts.owner is not None:
        alive = facts.running_start is not None and facts.running_start == facts.owner.start
        return AttemptVerdict.WAIT if alive else AttemptVerdict.SET_ASIDE
    young = facts.age_ms is None or facts.age_ms <= 30_000
    return AttemptVerdict.WAIT if young else AttemptVerdict.SET_ASIDE


def test_kernel_lock_judge_exhaustive() -> None:
    seen = set()
    for facts in all_lock_facts():
        verdict = judge_attempt(facts)
        assert verdict is spec_attempt(facts), facts
        seen.add(verdict)
    assert seen == set(AttemptVerdict)
    unowned = LockFacts(True, None, None, 30_000)
    assert judge_attempt(unowned) is AttemptVerdict.WAIT
    assert judge_attempt(LockFacts(True, None, None, 30_001)) is AttemptVerdict.SET_ASIDE
    assert judge_attempt(LockFacts(True, None, None, None)) is AttemptVerdict.WAIT
    assert judge_attempt(LockFacts(True, Owner(5, 9), 10, 0)) is AttemptVerdict.SET_ASIDE  # pid reused


@given(lock_facts)
def test_kernel_lock_judge(facts: LockFacts) -> None:
    assert judge_attempt(facts) is spec_attempt(facts)


@given(owners, st.sampled_from(BesideKind), st.integers(1, 2**31), st.integers(0, 2**62))
def test_kernel_lock_judge_names_and_owners_round_trip(owner: Owner, kind: BesideKind, pid: int, n: int) -> None:
    assert parse_owner(format_owner(owner)) == owner
    assert parse_beside(beside_name(kind, pid, n)) == BesideName(kind, pid, n)


@given(st.text(max_size=40))
def test_kernel_lock_judge_foreign_names_and_contents(text: str) -> None:
    parsed = parse_beside(text)
    if parsed is not None:
        assert beside_name(parsed.kind, parsed.pid, parsed.n) == text
    owner = parse_owner(text)
    if owner is not None:
        assert format_owner(owner) == text


def test_kernel_lock_judge_foreign_examples() -> None:
    assert parse_beside(LOCK_NAME) is None
    assert parse_beside("kernel-venv") is None
    assert parse_beside(f"{LOCK_NAME}.candidate-12") is None
    assert parse_beside(f"{LOCK_NAME}.candidate-012-1") is None
    assert parse_beside(f"{LOCK_NAME}.stale-12-3") == BesideName(BesideKind.STALE, 12, 3)
    assert parse_owner("") is None
    assert parse_owner("12") is None
    assert parse_owner("12 34") is None  # no newline: a partial write
    assert parse_owner("12 34\n") == Owner(12, 34)


# --- The entry: kernel_ffi ---------------------------------------------------------------------------------------
# The shell (eukhe.kernel.bootstrap) builds SetupFacts, Owner and LockFacts and asks plan_setup, judge_attempt,
# judge_sweep, parse_beside and parse_owner; well-formed facts get the model's answer, any other one exactly one
# KernelFactError naming its first wrong field.


def spec_sweep(recorded: int | None, running: int | None) -> SweepVerdict:
    """The sweep as the spec says it: a file stays only while its process lives (the same start, or none recorded)."""
    alive = running is not None and (recorded is None or recorded == running)
    return SweepVerdict.KEEP if alive else SweepVerdict.REMOVE


def check_ffi_plan(facts: SetupFacts) -> None:
    rebuilt = SetupFacts(facts.purpose, facts.user_python, facts.venv, facts.recorded, facts.requested)
    assert plan_setup(rebuilt) == spec_table(facts)


def check_ffi_attempt(facts: LockFacts) -> None:
    owner = None if facts.owner is None else Owner(facts.owner.pid, facts.owner.start)
    rebuilt = LockFacts(facts.present, owner, facts.running_start, facts.age_ms)
    assert judge_attempt(rebuilt) is spec_attempt(facts)


def check_ffi_sweep(name: str, recorded: int | None, running: int | None) -> None:
    parsed = parse_beside(name)
    if parsed is not None:
        assert beside_name(parsed.kind, parsed.pid, parsed.n) == name
    assert judge_sweep(recorded, running) is spec_sweep(recorded, running)


def test_kernel_ffi_answers_exhaustive() -> None:
    for facts in all_setup_facts():
        check_ffi_plan(facts)
    for lock in all_lock_facts():
        check_ffi_attempt(lock)
    names = (beside_name(BesideKind.CANDIDATE, 4, 0), beside_name(BesideKind.STALE, 9, 2), LOCK_NAME, "x")
    for name, recorded, running in itertools.product(names, STARTS, STARTS):
        check_ffi_sweep(name, recorded, running)


@given(setup_facts, lock_facts, st.builds(beside_name, st.sampled_from(BesideKind), st.integers(1, 99), st.just(0)))
def test_kernel_ffi_answers(facts: SetupFacts, lock: LockFacts, name: str) -> None:
    check_ffi_plan(facts)
    check_ffi_attempt(lock)
    check_ffi_sweep(name, lock.running_start, lock.age_ms)


def refusal_of(make: Callable[[], object]) -> str | None:
    """The field a `KernelFactError` names when `make` runs, or None when nothing refuses."""
    return refused_field(KernelFactError, make)


def call_refusal(kind: str, fields: dict[str, Any]) -> str | None:
    """The field the shell's call for `kind` refuses with these fields, or None."""
    return refusal_of(lambda: CALLS[kind](fields))


def is_count(value: object, minimum: int = 0) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= minimum


FIELD_OK: dict[str, Callable[[object], bool]] = {
    "purpose": lambda v: isinstance(v, Purpose),
    "user_python": lambda v: isinstance(v, bool),
    "venv": lambda v: isinstance(v, VenvState),
    "recorded": lambda v: v is None or isinstance(v, PythonSource),
    "requested": lambda v: isinstance(v, PythonSource),
    "present": lambda v: isinstance(v, bool),
    "owner": lambda v: v is None or isinstance(v, Owner),
    "running_start": lambda v: v is None or is_count(v),
    "age_ms": lambda v: v is None or is_count(v),
    "recorded_start": lambda v: v is None or is_count(v),
    "pid": lambda v: is_count(v, 1),
    "start": is_count,
    "name": lambda v: isinstance(v, str),
    "text": lambda v: isinstance(v, str),
}
"""An independent reading of each field's grammar."""

CALLS: dict[str, Callable[[dict[str, Any]], object]] = {
    "plan": lambda f: plan_setup(SetupFacts(**f)),
    "attempt": lambda f: judge_attempt(LockFacts(**f)),
    "owner": lambda f: Owner(**f),
    "sweep": lambda f: judge_sweep(f["recorded_start"], f["running_start"]),
    "beside": lambda f: parse_beside(f["name"]),
    "contents": lambda f: parse_owner(f["text"]),
}
"""The shell's calls, by the kind of fact they take."""

TEMPLATES: dict[str, dict[str, Any]] = {
    "plan": {
        "purpose": Purpose.SESSION,
        "user_python": False,
        "venv": VenvState.STALE,
        "recorded": PythonSource.MANAGED,
        "requested": PythonSource.MANAGED,
    },
    "attempt": {"present": True, "owner": Owner(3, 4), "running_start": 4, "age_ms": 10},
    "owner": {"pid": 3, "start": 4},
    "sweep": {"recorded_start": 1, "running_start": 2},
    "beside": {"name": beside_name(BesideKind.STALE, 3, 1)},
    "contents": {"text": "3 4\n"},
}
BAD_VALUES: tuple[object, ...] = (None, "nonsense", -1, 0, 1.5, True, [], {}, {"pid": 3, "start": 4}, Purpose.CHECK)


def expected_refusal(fields: dict[str, Any]) -> str | None:
    """The first field (in the record's order) the grammar rejects."""
    return next((name for name, value in fields.items() if not FIELD_OK[name](value)), None)


def test_kernel_ffi_malformed_exhaustive() -> None:
    """Every single-field and two-field corruption of a well-formed fact gets the one refusal of its first field."""
    for kind, template in TEMPLATES.items():
        assert call_refusal(kind, template) is None, kind
        for key, bad in itertools.product(template, BAD_VALUES):
            corrupted = {**template, key: bad}
            assert call_refusal(kind, corrupted) == expected_refusal(corrupted), (kind, corrupted)
        for (one, two), bad in itertools.product(itertools.combinations(template, 2), BAD_VALUES):
            corrupted = {**template, one: bad, two: bad}
            assert call_refusal(kind, corrupted) == expected_refusal(corrupted), (kind, corrupted)
    assert refusal_of(lambda: plan_setup(TEMPLATES["plan"])) == "setup"  # type: ignore[arg-type]
    assert refusal_of(lambda: judge_attempt(None)) == "lock"  # type: ignore[arg-type]


values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=8,
)
FIELD_VALUES: dict[str, st.SearchStrategy[object]] = {
    "purpose": st.sampled_from(Purpose),
    "user_python": st.booleans(),
    "venv": st.sampled_from(VenvState),
    "recorded": st.none() | st.sampled_from(PythonSource),
    "requested": st.sampled_from(PythonSource),
    "present": st.booleans(),
    "owner": st.none() | owners,
    "running_start": starts,
    "age_ms": ages,
    "recorded_start": starts,
    "pid": st.integers(1, 2**22),
    "start": st.integers(0, 2**64),
    "name": st.text(max_size=40),
    "text": st.text(max_size=20),
}
"""Well-formed values of each field."""


@given(values)
def test_kernel_ffi_malformed(value: object) -> None:
    """Any value in place of a whole fact: refused as that fact unless it is one."""
    assert refusal_of(lambda: plan_setup(value)) == "setup"  # type: ignore[arg-type]
    assert refusal_of(lambda: judge_attempt(value)) == "lock"  # type: ignore[arg-type]


@given(st.sampled_from(sorted(TEMPLATES)), st.data())
def test_kernel_ffi_malformed_by_op(kind: str, data: st.DataObject) -> None:
    """Each field free (well formed or any value): the call answers exactly when the grammar takes every field."""
    fields = {name: data.draw(values | FIELD_VALUES[name], label=name) for name in TEMPLATES[kind]}
    assert call_refusal(kind, fields) == expected_refusal(fields)


def test_kernel_ffi_example() -> None:
    facts = SetupFacts(Purpose.SESSION, False, VenvState.ABSENT, None, PythonSource.MANAGED)
    assert plan_setup(facts) == KernelMissing("The Python kernel is not installed: run `eukhe kernel install` once")
    assert judge_attempt(LockFacts(True, Owner(41, 7), None, 5)) is AttemptVerdict.SET_ASIDE
    assert parse_beside("kernel-venv.bootstrap.lock.candidate-41-0") == BesideName(BesideKind.CANDIDATE, 41, 0)
    assert judge_sweep(7, 7) is SweepVerdict.KEEP
    assert refusal_of(lambda: Owner(0, 7)) == "pid"
    assert refusal_of(lambda: LockFacts(True, None, None, -5)) == "age_ms"
