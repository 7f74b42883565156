"""What a bash job's shell leaves running (spec S2 "Jobs" 1-3 and 6; docs/jobs.md, "What the shell leaves runs on
as a job"): which processes are still the job's, what the shell's exit does with them, and the keeper that holds a
sandbox open for them.

Theory of operation:
- When the shell exits, the processes it started and left (`cmd &`, `nohup`, a daemon) are `members` of the job:
  found from a snapshot of process facts (`Proc`) the shell reads. Unconfined (`Unconfined`), they are the job's
  process group and what descends from the host's children that are in it or carry the job's mark (a host that is
  a child subreaper, as a daemon worker is, inherits what a daemon's double fork orphans). Confined (`Confined`),
  they are what lives in the sandbox's pid namespace below its pid 1, but for the shell, which is the keeper.
- `after_shell` is the table of what the shell's exit does: nothing left, the job ends; processes left and no kill
  asked, it hands them over to a new job (the shell's job ends with the shell's code and output, the new one takes
  the rest of the output and ends with its last process); a kill asked (or a run that cannot hand over: a
  terminal's session), they are ended first.
- The keeper holds a sandbox open: bwrap ends its whole pid namespace as soon as its command exits, so when other
  processes are left, a confined shell's EXIT trap (`KEEPER_PREAMBLE`) reports the shell's exit code on a
  descriptor of the host's and keeps the exiting shell until the host releases it.

Invariants (tests/laws/test_jobleft_laws.py): members are live, closed under children, each below a root, never
the host, pid 1 or the keeper; a kill asked never hands over; every exit ends the shell's job exactly once.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from eukhe.core.job import End, Exited, Killed, exited

KEEPER_INNER_PID = 2
"""The confined shell's pid in its sandbox (bwrap's pid 1 forks it first); at its exit it is the keeper."""

KEEPER_ENV = "EUKHE_KEEPER"
"""Names the keeper's two descriptors for its preamble: the report's and the preamble's own (which it closes)."""
USER_BASH_ENV = "EUKHE_USER_BASH_ENV"
"""Holds the user's own BASH_ENV while the preamble runs: it is put back, and sourced, before the command."""

KEEPER_PREAMBLE = r"""__eukhe_keep_fd=${EUKHE_KEEPER%% *}
__eukhe_fd=${EUKHE_KEEPER##* }
exec {__eukhe_fd}<&-
unset EUKHE_KEEPER __eukhe_fd
if [ -n "${EUKHE_USER_BASH_ENV+set}" ]; then
  export BASH_ENV="$EUKHE_USER_BASH_ENV"
  unset EUKHE_USER_BASH_ENV
  if [ -e "$BASH_ENV" ]; then . "$BASH_ENV"; fi
else
  unset BASH_ENV
fi
__eukhe_keep() {
  local code=$? p
  trap - DEBUG RETURN ERR
  set +euf
  for p in /proc/[0-9]*; do
    case ${p#/proc/} in 1|$$) ;; *)
      trap : HUP INT QUIT TERM USR1 USR2
      printf '%d\n' "$code" >&"$__eukhe_keep_fd" 2>/dev/null
      until read -r -u "$__eukhe_keep_fd" _; do [ "$?" -gt 128 ] || break; done
      break;;
    esac
  done
  exit "$code"
}
trap __eukhe_keep EXIT
"""
"""What a confined shell reads first (its BASH_ENV, from a pipe): an EXIT trap that makes the exiting shell the
keeper. bwrap ends its namespace when its command (this shell) exits; so if any process but pid 1 and the shell is
left in the namespace, the trap reports the shell's exit code on the report descriptor and waits until the host
writes a line or closes its end (a signal does not end the wait), then exits with the code. Nothing left: it exits
at once and reports nothing (bwrap's code is the shell's). It costs no process and leaves the command as it would
be without it (`bash -c COMMAND`: the same $0, $$, messages); the user's BASH_ENV is put back and sourced; children
see neither, but inherit the report descriptor. A command that sets its own EXIT trap replaces this one: what it
leaves then ends with it; and a shell that a signal ended while processes are left reports its last status."""


def keeper_env(env: Mapping[str, str], report_fd: int, preamble_fd: int) -> dict[str, str]:
    """`env` for a confined shell with the keeper: BASH_ENV reads the preamble from `preamble_fd`, which also
    learns `report_fd`; the user's BASH_ENV is kept aside for it."""
    made = dict(env)
    user = made.pop("BASH_ENV", None)
    if user is not None:
        made[USER_BASH_ENV] = user
    made["BASH_ENV"] = f"/dev/fd/{preamble_fd}"
    made[KEEPER_ENV] = f"{report_fd} {preamble_fd}"
    return made


MAX_REPORT_BYTES = 32
"""A keeper's report is one exit code and a newline."""


def reported_code(data: bytes) -> int | None:
    """The shell's exit code from what the keeper wrote (one decimal line); None when it wrote no whole line."""
    line, newline, _ = data.partition(b"\n")
    if not newline or not line.isdigit() or len(line) > 3:
        return None
    return int(line)


# ---------------------------------------------------------------------------------------------------------------------
# Which processes are the job's


@dataclass(frozen=True, slots=True)
class Proc:
    """One process as the shell read it: its pid, its parent, its process group, whether it lives (a zombie does
    not), whether it carries the job's mark (read only where `is_root` needs it), its pid in its own pid namespace
    (read only for a child of a sandbox's pid 1), and when it started (with its pid, it names it across reuse)."""

    pid: int
    parent: int
    group: int
    alive: bool = True
    marked: bool = False
    inner_pid: int | None = None
    start: int = 0


@dataclass(frozen=True, slots=True)
class Unconfined:
    """An unconfined job: its host (the process that started it) and its process group (the shell's pid)."""

    host: int
    group: int


@dataclass(frozen=True, slots=True)
class Confined:
    """A confined job: its sandbox's pid 1, as the host sees it, and whether its shell is the keeper (a job on a
    terminal has none: its command is pid 1's child there)."""

    init: int
    keeper: bool = True


Kin = Unconfined | Confined


def needs_mark(proc: Proc, kin: Kin) -> bool:
    """Whether telling if `proc` is a root of the job needs its mark (its environment): a live child of an
    unconfined job's host outside the job's group."""
    return isinstance(kin, Unconfined) and proc.alive and proc.parent == kin.host and proc.group != kin.group


def is_root(proc: Proc, kin: Kin) -> bool:
    """Whether `proc` is where the job's processes are found from: unconfined, a member of its group, or a child of
    its host carrying its mark; confined, a child of the sandbox's pid 1."""
    if isinstance(kin, Confined):
        return proc.parent == kin.init
    return proc.pid != kin.host and (proc.group == kin.group or (proc.parent == kin.host and proc.marked))


def _never(proc: Proc, kin: Kin) -> bool:
    """Never a member though found: the sandbox's pid 1 and the keeper (the host is never found: no root, and no
    process of the job is its parent)."""
    if isinstance(kin, Confined):
        keeper = kin.keeper and proc.parent == kin.init and proc.inner_pid == KEEPER_INNER_PID
        return proc.pid == kin.init or keeper
    return False


def members(procs: Iterable[Proc], kin: Kin) -> frozenset[int]:
    """The job's live processes in a snapshot: its roots and everything below them, but the host, pid 1 and the
    keeper (whose children, what the shell started, are the job's)."""
    every = {proc.pid: proc for proc in procs}
    children: dict[int, list[int]] = {}
    for proc in every.values():
        children.setdefault(proc.parent, []).append(proc.pid)
    found: set[int] = set()
    todo = [pid for pid, proc in every.items() if is_root(proc, kin)]
    while todo:
        pid = todo.pop()
        if pid in found:
            continue
        found.add(pid)
        todo.extend(children.get(pid, ()))
    return frozenset(pid for pid in found if every[pid].alive and not _never(every[pid], kin))


def reapable(procs: Iterable[Proc], kin: Kin, leader: int, known: Mapping[int, int] | None = None) -> frozenset[int]:
    """The ended children of an unconfined job's host that were the job's, which the host reaps (nothing else
    waits for them): zombies in the job's group, or in a group a member is in (a daemon's intermediate process), or
    that were members themselves (`known`: pid to start, from earlier snapshots); never the shell itself (its own
    waiter reaps it). None for a confined job: its pid 1 reaps the namespace's."""
    if not isinstance(kin, Unconfined):
        return frozenset()
    listed = list(procs)
    live = members(listed, kin)
    groups = {kin.group} | {proc.group for proc in listed if proc.pid in live}
    seen = known or {}
    return frozenset(
        proc.pid
        for proc in listed
        if not proc.alive
        and proc.parent == kin.host
        and proc.pid != leader
        and (proc.group in groups or seen.get(proc.pid) == proc.start)
    )


# ---------------------------------------------------------------------------------------------------------------------
# What the shell's exit does


class AfterShell(enum.Enum):
    """What a bash job does once its shell exited and the drain is over."""

    ENDS = "ends"  # nothing of it is left: it ends (with the shell's code, or killed)
    HANDS_OVER = "hands_over"  # processes are left, no kill asked: it ends with the shell's code; a new job takes them
    ENDS_THEM = "ends_them"  # processes are left and are ended first (a kill asked, or the run cannot hand over)


AFTER_SHELL: dict[tuple[bool, bool, bool], AfterShell] = {
    # (kill asked, processes left, can hand over)
    (False, False, False): AfterShell.ENDS,
    (False, False, True): AfterShell.ENDS,
    (True, False, False): AfterShell.ENDS,
    (True, False, True): AfterShell.ENDS,
    (False, True, True): AfterShell.HANDS_OVER,
    (False, True, False): AfterShell.ENDS_THEM,
    (True, True, True): AfterShell.ENDS_THEM,
    (True, True, False): AfterShell.ENDS_THEM,
}
"""Every case: a kill asked never hands over; a run on a terminal never does (its session ends with it, as a
terminal closing ends it)."""


def after_shell(*, kill_asked: bool, left: bool, can_hand_over: bool) -> AfterShell:
    """What the shell's exit does (`AFTER_SHELL`)."""
    return AFTER_SHELL[(kill_asked, left, can_hand_over)]


def shell_end(code: int | None, kill_asked: bool) -> End:
    """The end of the shell's job: killed if a kill was asked, else the shell's exit (-N, a signal: 128 + N)."""
    return Killed() if kill_asked else exited(code if code is not None else 0)


LEFT_CODE = 0
"""The exit code of a job of left processes that all ended on their own: nobody waits for their codes (they were
orphaned when the shell exited), so there is none to report; a kill ends it as killed."""


def left_end(kill_asked: bool) -> End:
    """The end of a job of left processes, once the last one ended."""
    return Killed() if kill_asked else Exited(LEFT_CODE)
