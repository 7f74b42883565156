"""The tie of jobs (spec S2 "Ties": `the_rust_jobs_equal_the_bend_model`, renamed): real `Job`, `wait_until` (on a
virtual clock, tick = 1 ms) and `JobTable.rewind_to` against the pure model, over 300 generated scenarios.

Each scenario is a script of steps: entry commits, job starts (some with bytes written before), outputs, exits,
kills, a host quit, ticks, blocking waits and rewinds, also on jobs that already ended. The model side plays it with
`eukhe.core.job` alone; the real side drives the shell objects, with an owner that reports a kill's end at once (as
the spec's bridge does). Both print a transcript; they must be equal line for line. The scenarios are seeded, so the
run is deterministic, and together they reach every case (asserted below).
"""

from __future__ import annotations

import asyncio
import random
from collections import Counter
from dataclasses import dataclass

from eukhe.core import job as core
from eukhe.core.bound import Keep, Off, On, OutputLimits, Truncation
from eukhe.jobs import Job, JobSpec, JobTable, JobTableClosedError, VirtualClock, wait_until

SCENARIOS = 300

# ---------------------------------------------------------------------------------------------------------------------
# Scenario steps


@dataclass(frozen=True, slots=True)
class Commit:
    pass


@dataclass(frozen=True, slots=True)
class Start:
    written: int


@dataclass(frozen=True, slots=True)
class Write:
    job: int
    size: int


@dataclass(frozen=True, slots=True)
class ExitStep:
    job: int
    code: int


@dataclass(frozen=True, slots=True)
class KillStep:
    job: int


@dataclass(frozen=True, slots=True)
class QuitStep:
    pass


@dataclass(frozen=True, slots=True)
class TickStep:
    pass


@dataclass(frozen=True, slots=True)
class WaitStep:
    job: int
    budget: int


@dataclass(frozen=True, slots=True)
class RewindStep:
    target: int | None  # an entry index; == number of entries: an entry from before the open; None: "none"


Step = Commit | Start | Write | ExitStep | KillStep | QuitStep | TickStep | WaitStep | RewindStep


@dataclass(frozen=True, slots=True)
class Scenario:
    truncation: Truncation
    steps: tuple[Step, ...]


def generate(rng: random.Random) -> Scenario:
    """One scenario: a truncation and a script whose job and entry references are valid when they run."""
    truncation: Truncation = (
        Off()
        if rng.random() < 0.25
        else On(OutputLimits(rng.choice([0, 1, 5, 16, 64]), 10**9, rng.choice([Keep.TAIL, Keep.HEAD])))
    )
    steps: list[Step] = []
    jobs = entries = 0
    quit_ = False
    for _ in range(rng.randint(6, 30)):
        kinds = ["commit", "start", "tick", "tick", "tick", "rewind"]
        if jobs:
            kinds += ["write", "write", "write", "exit", "kill", "wait", "wait"]
        kinds += ["quit"] if rng.random() < 0.08 else []
        kind = rng.choice(kinds)
        if kind == "commit":
            steps.append(Commit())
            entries += 1
        elif kind == "start":
            steps.append(Start(rng.choice([0, 0, 0, rng.randint(1, 40)])))
            jobs += 0 if quit_ else 1  # after the quit a start is refused
        elif kind == "tick":
            steps.extend(TickStep() for _ in range(rng.choice([1, 1, 2, 3])))
        elif kind == "rewind":
            target = None if rng.random() < 0.15 else rng.randint(0, entries)
            if entries and rng.random() < 0.4:
                target = entries - 1  # back to the last entry: jobs started before it are kept
            steps.append(RewindStep(target))
        elif kind == "write":
            steps.append(Write(rng.randrange(jobs), rng.choice([0, 1, 3, 7, rng.randint(0, 100)])))
        elif kind == "exit":
            steps.append(ExitStep(rng.randrange(jobs), rng.choice([0, 1, 2, 130])))
        elif kind == "kill":
            steps.append(KillStep(rng.randrange(jobs)))
        elif kind == "wait":
            steps.append(WaitStep(rng.randrange(jobs), rng.choice([0, 1, 2, 3, 5, 8])))
        else:
            steps.append(QuitStep())
            quit_ = True
    return Scenario(truncation, tuple(steps))


def show_end(end: core.End | None) -> str:
    if end is None:
        return "running"
    return f"exited({end.code})" if isinstance(end, core.Exited) else "killed"


def show_state(state: core.JobState) -> str:
    return f"kept={state.kept} dropped={state.dropped} {show_end(state.end)}"


def show_verdict(verdict: core.EndedInTime | core.DeadlinePassed) -> str:
    if isinstance(verdict, core.EndedInTime):
        return f"settled {show_end(verdict.end)}"
    return f"detached at {verdict.at_ms}"


def entry_name(target: int | None, entries: int) -> str | None:
    if target is None:
        return None
    return f"e{target}" if target < entries else "e-before-open"


# ---------------------------------------------------------------------------------------------------------------------
# The model side


def play_model(scenario: Scenario, coverage: Counter[str]) -> list[str]:
    """The transcript the pure model gives."""
    cap = core.cap_of(scenario.truncation)
    now = 0
    states: list[core.JobState] = []
    order: list[core.Mark] = []
    entries = 0
    quit_ = False
    waits: list[tuple[int, int, int]] = []  # (wait number, job, deadline)
    waits_made = 0
    out: list[str] = []

    def settle_waits() -> None:
        for wait in list(waits):
            number, job, deadline = wait
            verdict = core.wait(states[job], now, deadline)
            if not isinstance(verdict, core.Waiting):
                waits.remove(wait)
                out.append(f"t={now} wait#{number} j{job} -> {show_verdict(verdict)}")
                coverage["settle within budget" if isinstance(verdict, core.EndedInTime) else "detach at budget"] += 1
                if isinstance(verdict, core.DeadlinePassed) and states[job].end is not None:
                    coverage["passed deadline with the end ready"] += 1

    def apply(job: int, event: core.JobEvent) -> None:
        if states[job].end is not None:
            coverage["event after end"] += 1
        elif isinstance(event, core.Kill):
            coverage["kill"] += 1
        states[job] = core.feed(states[job], event)
        if states[job].dropped and cap is not None:
            coverage["truncation"] += 1
        if cap is None and states[job].kept:
            coverage["opt-out"] += 1

    for step in scenario.steps:
        if isinstance(step, Commit):
            order.append(core.Committed(f"e{entries}"))
            out.append(f"t={now} commit e{entries}")
            entries += 1
        elif isinstance(step, Start):
            if quit_:
                out.append(f"t={now} start refused")
                continue
            states.append(core.start(cap, step.written))
            order.append(core.Started(f"j{len(states) - 1}"))
            out.append(f"t={now} start j{len(states) - 1} {show_state(states[-1])}")
        elif isinstance(step, Write):
            apply(step.job, core.Output(step.size))
            out.append(f"t={now} write j{step.job} {step.size} -> {show_state(states[step.job])}")
        elif isinstance(step, ExitStep):
            apply(step.job, core.Exit(step.code))
            out.append(f"t={now} exit j{step.job} {step.code} -> {show_state(states[step.job])}")
        elif isinstance(step, KillStep):
            apply(step.job, core.Kill())
            out.append(f"t={now} kill j{step.job} -> {show_state(states[step.job])}")
        elif isinstance(step, QuitStep):
            quit_ = True
            running = [i for i, s in enumerate(states) if s.end is None]
            if running:
                coverage["quit"] += 1
            for i in running:
                states[i] = core.feed(states[i], core.Quit())
            out.append(f"t={now} quit -> stopped {[f'j{i}' for i in running]}")
        elif isinstance(step, TickStep):
            now += 1
        elif isinstance(step, WaitStep):
            waits.append((waits_made, step.job, now + step.budget))
            out.append(f"t={now} wait#{waits_made} j{step.job} budget={step.budget}")
            waits_made += 1
        elif isinstance(step, RewindStep):
            target = entry_name(step.target, entries)
            running_ids = {f"j{i}" for i, s in enumerate(states) if s.end is None}
            verdict = core.rewind(order, running_ids, target)
            for job_id in verdict.stop:
                states[int(job_id[1:])] = core.feed(states[int(job_id[1:])], core.Kill())
            coverage["rewind stops a job"] += bool(verdict.stop)
            coverage["rewind keeps a job"] += bool(verdict.keep)
            out.append(f"t={now} rewind {target} -> stopped {list(verdict.stop)} kept {list(verdict.keep)}")
        settle_waits()
    for number, job, _ in waits:
        out.append(f"wait#{number} j{job} still waiting")
    out.extend(f"final j{i} {show_state(s)} window={s.kept}+{s.dropped}" for i, s in enumerate(states))
    return out


# ---------------------------------------------------------------------------------------------------------------------
# The real side


class BridgeOwner:
    """An owner whose kill ends the job at once (the spec's bridge kill). A job asks its owner only while it runs."""

    def kill(self, job: Job) -> None:
        assert job.running, f"the owner of {job.id} was asked to kill it after its end"
        job.finish(core.Killed())


async def turn() -> None:
    """Let every woken task run (a woken waiter needs one turn of the loop)."""
    for _ in range(2):
        await asyncio.sleep(0)


async def play_real(scenario: Scenario) -> list[str]:
    """The transcript the real shell objects give."""
    clock = VirtualClock()
    counter = iter(range(10**6))
    table = JobTable(clock, new_id=lambda: f"j{next(counter)}")
    owner = BridgeOwner()
    jobs: list[Job] = []
    entries = 0
    waits: list[tuple[int, int, asyncio.Task[core.EndedInTime | core.DeadlinePassed]]] = []
    waits_made = 0
    out: list[str] = []

    def state(job: Job) -> str:
        return f"kept={job.kept} dropped={job.dropped} {show_end(job.end)}"

    for step in scenario.steps:
        now = clock.now_ms()
        if isinstance(step, Commit):
            table.observe(f"e{entries}")
            out.append(f"t={now} commit e{entries}")
            entries += 1
        elif isinstance(step, Start):
            try:
                job = table.start(JobSpec("test", "a job", scenario.truncation, None, b"w" * step.written), owner)
            except JobTableClosedError:
                out.append(f"t={now} start refused")
                continue
            jobs.append(job)
            out.append(f"t={now} start {job.id} {state(job)}")
        elif isinstance(step, Write):
            jobs[step.job].write(b"o" * step.size)
            out.append(f"t={now} write j{step.job} {step.size} -> {state(jobs[step.job])}")
        elif isinstance(step, ExitStep):
            jobs[step.job].finish(core.Exited(step.code))
            out.append(f"t={now} exit j{step.job} {step.code} -> {state(jobs[step.job])}")
        elif isinstance(step, KillStep):
            jobs[step.job].kill()
            out.append(f"t={now} kill j{step.job} -> {state(jobs[step.job])}")
        elif isinstance(step, QuitStep):
            rewound = await table.quit(now)
            assert not rewound.stopping
            out.append(f"t={now} quit -> stopped {[job.id for job in rewound.stopped]}")
        elif isinstance(step, TickStep):
            clock.tick()
        elif isinstance(step, WaitStep):
            task = asyncio.create_task(wait_until(jobs[step.job], now + step.budget))
            waits.append((waits_made, step.job, task))
            out.append(f"t={now} wait#{waits_made} j{step.job} budget={step.budget}")
            waits_made += 1
        elif isinstance(step, RewindStep):
            target = entry_name(step.target, entries)
            before = table.running()
            stopped = table.rewind_to(target)
            kept = [job.id for job in before if job not in stopped]
            assert all(not job.running for job in stopped)
            out.append(f"t={now} rewind {target} -> stopped {[job.id for job in stopped]} kept {kept}")
        await turn()
        for wait in list(waits):
            number, job_index, task = wait
            if task.done():
                waits.remove(wait)
                out.append(f"t={clock.now_ms()} wait#{number} j{job_index} -> {show_verdict(task.result())}")
    for number, job_index, task in waits:
        out.append(f"wait#{number} j{job_index} still waiting")
        task.cancel()
    await turn()
    assert clock.pending() == 0  # a cancelled wait leaves no timer behind
    for job in jobs:
        # The window (the real BoundedOutput) keeps and drops what the model does: output here has no newline and
        # the line limit never binds, so the byte cap alone decides.
        window = job.result()
        out.append(f"final {job.id} {state(job)} window={window.bytes_kept}+{window.bytes_dropped}")
    return out


# ---------------------------------------------------------------------------------------------------------------------


CASES = (
    "truncation",
    "opt-out",
    "kill",
    "quit",
    "event after end",
    "detach at budget",
    "settle within budget",
    "passed deadline with the end ready",
    "rewind stops a job",
    "rewind keeps a job",
)


def test_the_real_jobs_equal_the_model() -> None:
    coverage: Counter[str] = Counter()

    async def run_all() -> None:
        for number in range(SCENARIOS):
            scenario = generate(random.Random(20260 + number))
            expected = play_model(scenario, coverage)
            actual = await play_real(scenario)
            assert actual == expected, f"scenario {number}: {scenario}"

    asyncio.run(run_all())
    missing = [case for case in CASES if not coverage[case]]
    assert not missing, f"the scenarios never reach {missing}: {dict(coverage)}"
