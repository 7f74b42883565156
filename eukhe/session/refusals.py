"""The shell of `eukhe.core.refusals`: at the end of a failed confined run, read its kept window for the errors the
sandbox may have caused, look at the paths they name on the host, and put the refusal the core decides on the
answer (docs/sandbox.md "When the sandbox refused")."""

from __future__ import annotations

import base64
import contextlib
import os

import msgspec

from eukhe.core import limits as limit_rules
from eukhe.core import refusals as core
from eukhe.records.jobs import Detached, SandboxRefusal, Settled
from eukhe.sandbox.confine import Confinement
from eukhe.sandbox.facts import eukhe_dirs
from eukhe.sandbox.limits import tmp_used_mb


def failed(answer: Settled) -> bool:
    """A run that failed of itself: a non-zero exit, or a cell that raised (a kill is not the sandbox's doing)."""
    if answer.killed:
        return False
    if answer.kind == "cell":
        return answer.outcome == "error"
    return answer.exit_code not in (None, 0)


def failure_text(answer: Settled) -> str:
    """What a failed run said: its kept window (not the artifact: the scan stays bounded), then a cell's error."""
    window = answer.output
    text = (
        base64.b64decode(window.text_base64).decode("utf-8", "replace")
        if window.text_base64 is not None
        else window.text
    )
    if answer.error is not None:
        text += f"\n{answer.error.ename}: {answer.error.evalue}"
    return text


def look(path: str) -> core.Seen:
    """What is at a host path: its real path, whether something is there, and whether the host's own file system
    that holds it (or would, for a missing path: its nearest existing parent's) is mounted read-only."""
    with contextlib.suppress(OSError, ValueError):
        real = os.path.realpath(path)
        exists = os.path.lexists(path)
        holder = real
        while not os.path.lexists(holder) and holder != "/":
            holder = os.path.dirname(holder)
        read_only = bool(os.statvfs(holder).f_flag & os.ST_RDONLY)
        return core.Seen(real, exists, read_only)
    return core.Seen(path)


def own_dirs(sandbox: Confinement) -> frozenset[str]:
    """eukhe's own directories, as real paths: a confined process never sees them, whatever the policy says."""
    return frozenset(os.path.realpath(path) for path in (*eukhe_dirs(), *sandbox.hidden))


def refusal_of(sandbox: Confinement, answer: Settled, *, cells: bool = True) -> SandboxRefusal | None:
    """The sandbox's refusal that made this run fail, if the policy was the cause. `cells`: whether cells run in
    this sandbox (a user's `kernel_transport` is its own confinement: its errors are not this policy's). What
    cannot be read off the disk now gives no line, never a failed answer."""
    refused = [f"{attempt.name}:{attempt.port}" for attempt in sandbox.network_refused() if attempt.name is not None]
    if not sandbox.confined or (answer.kind == "cell" and not cells):
        return None
    hit = limit_hit(sandbox, answer)
    if hit is not None or not failed(answer):
        return hit
    by_proxy = core.network_refusal(refused)
    if by_proxy is not None:
        return SandboxRefusal(rule=str(by_proxy.rule), path=None, hint=by_proxy.line())
    found = core.clues(failure_text(answer))
    if not found:
        return None
    try:
        facts = sandbox.facts(sockets=False)
        seen = {path: look(path) for path in core.probes(facts, found)}
        own = own_dirs(sandbox)
    except (OSError, ValueError):
        return None
    refusal = core.decide(facts, found, seen, own)
    if refusal is None:
        return None
    return SandboxRefusal(rule=str(refusal.rule), path=refusal.path, hint=refusal.line())


def limit_hit(sandbox: Confinement, answer: Settled) -> SandboxRefusal | None:
    """The limit that stopped this failed run, if one did (`eukhe.core.limits.verdict`): the session's groups'
    counters at the job's start and now, its code, its words."""
    limits = sandbox.limits
    before = limits.started(answer.job)  # taken once: the job's answer is judged once
    if limits.plan is None or not failed(answer):
        return None
    ended = limit_rules.Ended(before, limits.counters(), answer.exit_code, failure_text(answer))
    hit = limit_rules.verdict(limits.plan, ended)
    if hit is None:
        return None
    return SandboxRefusal(rule=f"limits.{hit.limit.value}", path=None, hint=hit.line())


def tmp_over(sandbox: Confinement, answer: Settled) -> str | None:
    """After a failed confined run: a notice when the private /tmp holds more than `limits.max_tmp_mb`."""
    plan = sandbox.limits.plan
    if plan is None or not sandbox.confined or not failed(answer):
        return None
    if plan.of(limit_rules.Limit.TMP).mechanism is limit_rules.Mechanism.OFF:
        return None
    return limit_rules.tmp_notice(plan, tmp_used_mb(sandbox.tmp))


def with_refusal(sandbox: Confinement, answer: Settled | Detached, *, cells: bool = True) -> Settled | Detached:
    """A settled answer with the sandbox's refusal (or the limit) that made it fail, and a notice when the private
    /tmp is over its limit; any other answer as it is."""
    if not isinstance(answer, Settled):
        return answer
    over = tmp_over(sandbox, answer)
    if over is not None:
        answer = msgspec.structs.replace(answer, notices=[*answer.notices, over])
    refusal = refusal_of(sandbox, answer, cells=cells)
    return answer if refusal is None else msgspec.structs.replace(answer, refusal=refusal)
