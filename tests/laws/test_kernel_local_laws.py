"""Laws of the kernel environment's core (kernel_local group): the setup plan, the lock verdicts, the entry.

Every domain here is finite or has a finite set of boundaries, so each law runs twice: over the whole small domain
(a proof by enumeration) and under Hypothesis over free inputs.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator

from hypothesis import given
from hypothesis import strategies as st

from eukhe.core.kernel_local import (
    FETCHES,
    KERNEL_MISSING_TEXT,
    KERNEL_TOOL,
    LOCK_NAME,
    MAKES,
    MALFORMED,
    USES,
    Action,
    Artifact,
    AttemptVerdict,
    BesideKind,
    BesideName,
    Build,
    Command,
    Effect,
    KernelMissing,
    LinkOutcome,
    LockFacts,
    Owner,
    Purpose,
    PythonSource,
    Refusal,
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
    encode_step,
    format_owner,
    judge_attempt,
    judge_build_failure,
    judge_sweep,
    kernel_local_entry,
    kernel_may_start,
    parse_beside,
    parse_owner,
    plan_setup,
    venv_after,
)

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
    assert encode_step(plan_setup(fresh)) == {
        "step": "build",
        "python": "managed",
        "commands": [
            {"action": "python_install", "offline": False},
            {"action": "venv", "offline": True},
            {"action": "lock_install", "offline": False},
            {"action": "runtime_install", "offline": True},
            {"action": "check", "offline": True},
        ],
    }
    update = SetupFacts(Purpose.SESSION, False, VenvState.STALE, PythonSource.GIVEN, PythonSource.GIVEN)
    assert encode_step(plan_setup(update)) == {
        "step": "build",
        "python": "given",
        "commands": [{"action": a.value, "offline": True} for a in BUILD_ORDER],
    }


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


# --- The entry ---------------------------------------------------------------------------------------------------


def plan_request(facts: SetupFacts) -> dict[str, object]:
    return {
        "op": "plan",
        "purpose": facts.purpose.value,
        "user_python": facts.user_python,
        "venv": facts.venv.value,
        "recorded": None if facts.recorded is None else facts.recorded.value,
        "requested": facts.requested.value,
    }


def attempt_request(facts: LockFacts) -> dict[str, object]:
    owner = None if facts.owner is None else {"pid": facts.owner.pid, "start": facts.owner.start}
    return {
        "op": "attempt",
        "present": facts.present,
        "owner": owner,
        "running_start": facts.running_start,
        "age_ms": facts.age_ms,
    }


def check_ffi_plan(facts: SetupFacts) -> None:
    assert kernel_local_entry(plan_request(facts)) == encode_step(plan_setup(facts))


def check_ffi_attempt(facts: LockFacts) -> None:
    assert kernel_local_entry(attempt_request(facts)) == {"verdict": judge_attempt(facts).value}


def check_ffi_sweep(name: str, recorded: int | None, running: int | None) -> None:
    answer = kernel_local_entry({"op": "sweep", "name": name, "recorded_start": recorded, "running_start": running})
    parsed = parse_beside(name)
    if parsed is None:
        assert answer == {"verdict": "ignore"}
    else:
        assert answer == {
            "verdict": judge_sweep(recorded, running).value,
            "kind": parsed.kind.value,
            "pid": parsed.pid,
            "n": parsed.n,
        }


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


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=8,
)


def malformed_variants(good: dict[str, object]) -> Iterator[object]:
    """Requests one edit away from a good one: a key dropped, a key added, each value of a wrong type."""
    for key, value in good.items():
        yield {k: v for k, v in good.items() if k != key}
        for wrong in ("nonsense", -1, 1.5, True, [], {}):
            if isinstance(wrong, bool) and isinstance(value, bool):
                continue  # another bool is a well-formed request
            changed = {**good, key: wrong}
            yield changed
    yield {**good, "extra": 1}


def test_kernel_ffi_malformed_exhaustive() -> None:
    for junk in (None, 1, "plan", [], ["op"], {}, {"op": "nope"}, {1: "plan"}):
        assert kernel_local_entry(junk) is MALFORMED
    goods: list[dict[str, object]] = [
        plan_request(SetupFacts(Purpose.SESSION, False, VenvState.STALE, PythonSource.MANAGED, PythonSource.MANAGED)),
        attempt_request(LockFacts(True, Owner(3, 4), 4, 10)),
        {"op": "sweep", "name": beside_name(BesideKind.STALE, 3, 1), "recorded_start": 1, "running_start": 2},
    ]
    for good in goods:
        assert not isinstance(kernel_local_entry(good), Refusal)
        for bad in malformed_variants(good):
            answer = kernel_local_entry(bad)
            # A sweep's name may be any string: a different name is a well-formed request, not a malformed one.
            renamed = isinstance(bad, dict) and set(bad) == set(good) and bad.get("name") != good.get("name")
            if renamed and isinstance(bad, dict) and isinstance(bad.get("name"), str):
                continue
            assert answer == MALFORMED, bad
            assert answer == Refusal("kernel_local_malformed", "malformed kernel_local request")


@given(json_values)
def test_kernel_ffi_malformed(value: object) -> None:
    answer = kernel_local_entry(value)
    well_formed = isinstance(value, dict) and value.get("op") in ("plan", "sweep", "attempt")
    if not well_formed:
        assert answer is MALFORMED
    assert isinstance(answer, dict) or answer is MALFORMED


@given(st.sampled_from(["plan", "sweep", "attempt"]), st.dictionaries(st.text(max_size=12), json_values, max_size=6))
def test_kernel_ffi_malformed_by_op(op: str, fields: dict[str, object]) -> None:
    answer = kernel_local_entry({**fields, "op": op})
    assert isinstance(answer, dict) or answer is MALFORMED


def test_kernel_ffi_example() -> None:
    request = {
        "op": "plan",
        "purpose": "session",
        "user_python": False,
        "venv": "absent",
        "recorded": None,
        "requested": "managed",
    }
    assert kernel_local_entry(request) == {
        "step": "missing",
        "text": "The Python kernel is not installed: run `eukhe kernel install` once",
    }
    dead = {"op": "attempt", "present": True, "owner": {"pid": 41, "start": 7}, "running_start": None, "age_ms": 5}
    assert kernel_local_entry(dead) == {"verdict": "set_aside"}
    sweep = {
        "op": "sweep",
        "name": "kernel-venv.bootstrap.lock.candidate-41-0",
        "recorded_start": 7,
        "running_start": 7,
    }
    assert kernel_local_entry(sweep) == {"verdict": "keep", "kind": "candidate", "pid": 41, "n": 0}
    assert kernel_local_entry({"op": "plan"}) == Refusal("kernel_local_malformed", "malformed kernel_local request")
