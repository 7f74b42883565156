"""The tool output bounder (S2 "Limits" and "The tool output bounder"): windows, counts, the notice, the stepper.

Theory of operation. The core never sees bytes. The shell reads facts about a text (each line's length, whether the
text begins inside a line, the character boundary where a cut line would be cut) and asks here:

- `window`: which byte range of a whole text is kept. Whole lines from the start (HEAD) or the end (TAIL) while both
  limits hold; if not even one whole line fits, the one line at that end is cut at a character boundary.
- `measure`: the bytes and lines kept and dropped. Invariant: kept + dropped == every byte (and every line).
- `notice`: the one truncation notice, naming what was dropped, from which end, and where the full output is.
- The streaming `Stepper`: `out` says how many bytes of a new text to store and how many to trim from the store's
  front, `skip` says whether counted-but-unstored bytes clear the store, `look` reads the current window from the
  store, `close` reads it a last time and refuses every later step.

A line is the bytes up to and including a newline; a final unterminated piece is a line. Invalid UTF-8 is data.

`answer` is the core's one public entry: a typed request in, the model's reply or one exact `BoundRefusal` out.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, replace

from .fact_errors import is_count

# ---- the output limits setting (S2 "Limits" 1): `Truncation = On(OutputLimits) | Off` --------------------------
# The defaults are defined here and nowhere else: 50 KiB (51,200 bytes) and 2000 lines, keeping the tail, which is
# what command output wants (the end of a build log says whether it worked).


class Keep(enum.Enum):
    """Which end of an output a window keeps."""

    HEAD = "head"  # whole lines from the start
    TAIL = "tail"  # whole lines from the end


@dataclass(frozen=True, slots=True)
class OutputLimits:
    """At most `max_bytes` bytes and `max_lines` lines are kept, from the `keep` end."""

    max_bytes: int
    max_lines: int
    keep: Keep = Keep.TAIL

    def __post_init__(self) -> None:
        if not isinstance(self.max_bytes, int) or isinstance(self.max_bytes, bool) or self.max_bytes < 0:
            raise ValueError(f"max_bytes must be a non-negative integer, got {self.max_bytes!r}")
        if not isinstance(self.max_lines, int) or isinstance(self.max_lines, bool) or self.max_lines < 0:
            raise ValueError(f"max_lines must be a non-negative integer, got {self.max_lines!r}")
        if not isinstance(self.keep, Keep):
            raise ValueError(f"keep must be a Keep, got {self.keep!r}")


@dataclass(frozen=True, slots=True)
class On:
    """Truncation on: keep at most `limits`, count the rest as dropped."""

    limits: OutputLimits


@dataclass(frozen=True, slots=True)
class Off:
    """Truncation off: an explicit opt-out that keeps every byte."""


Truncation = On | Off

DEFAULT_MAX_BYTES = 50 * 1024
DEFAULT_MAX_LINES = 2000
DEFAULT_LIMITS = OutputLimits(DEFAULT_MAX_BYTES, DEFAULT_MAX_LINES, Keep.TAIL)
DEFAULT_TRUNCATION: Truncation = On(DEFAULT_LIMITS)

CHAR_CONTEXT = 3
"""Bytes beyond the cap a store keeps so every cut it reads is the cut of the whole output (UTF-8: <= 4 bytes)."""


def margin(limits: OutputLimits) -> int:
    """How many bytes a streaming store holds at least (when there are that many): the cap plus the char context."""
    return limits.max_bytes + CHAR_CONTEXT


@dataclass(frozen=True, slots=True)
class TextFacts:
    """What the shell read from a text: its lines, whether it begins inside a line, and the cut at the cap.

    `cut` is the length of the part of the end line a cut window would keep: for HEAD, the largest character
    boundary <= max_bytes in the first line; for TAIL, the longest suffix of the last line of at most max_bytes
    bytes that starts at a character boundary. It only matters when that line does not fit whole.
    """

    line_lengths: tuple[int, ...]
    starts_inside_line: bool = False
    cut: int = 0

    @property
    def size(self) -> int:
        """Bytes in the text."""
        return sum(self.line_lengths)


@dataclass(frozen=True, slots=True)
class Window:
    """The kept byte range [start, end) of a text and how many of its lines it touches."""

    start: int
    end: int
    lines: int
    cut: bool  # True when the window is one line cut at a character boundary

    @property
    def size(self) -> int:
        """Bytes kept."""
        return self.end - self.start


@dataclass(frozen=True, slots=True)
class Slice:
    """Bytes and lines kept and dropped over a whole output."""

    bytes_kept: int
    bytes_dropped: int
    lines_kept: int
    lines_dropped: int

    @property
    def truncated(self) -> bool:
        """Whether anything was dropped."""
        return self.bytes_dropped > 0 or self.lines_dropped > 0


def whole_lines_kept(limits: OutputLimits, facts: TextFacts) -> int:
    """How many whole lines the window keeps: as many as fit both limits, taken from the kept end."""
    lengths = facts.line_lengths
    first_whole = 1 if facts.starts_inside_line and lengths else 0
    order = range(len(lengths)) if limits.keep is Keep.HEAD else range(len(lengths) - 1, -1, -1)
    kept = 0
    used = 0
    for index in order:
        if index < first_whole or kept >= limits.max_lines or used + lengths[index] > limits.max_bytes:
            break
        kept += 1
        used += lengths[index]
    return kept


def window(limits: OutputLimits, facts: TextFacts) -> Window:
    """The window of a text: whole lines from the kept end, else that end's line cut at a character boundary."""
    lengths = facts.line_lengths
    total = facts.size
    kept = whole_lines_kept(limits, facts)
    can_cut = kept == 0 and bool(lengths) and limits.max_lines >= 1 and limits.max_bytes >= 1
    if limits.keep is Keep.HEAD:
        if can_cut and not facts.starts_inside_line:
            return Window(0, facts.cut, 1 if facts.cut else 0, True)
        return Window(0, sum(lengths[:kept]), kept, False)
    if can_cut:
        return Window(total - facts.cut, total, 1 if facts.cut else 0, True)
    return Window(total - sum(lengths[len(lengths) - kept :]), total, kept, False)


def measure(kept: Window, total_bytes: int, total_lines: int) -> Slice:
    """The counts of a window over an output of `total_bytes` bytes in `total_lines` lines."""
    return Slice(kept.size, total_bytes - kept.size, kept.lines, total_lines - kept.lines)


def _count(number: int, unit: str) -> str:
    return f"{number} {unit}" if number == 1 else f"{number} {unit}s"


def notice(keep: Keep, counts: Slice, artifact: str | None, artifact_dropped: int = 0) -> str | None:
    """The truncation notice (defined only here), or None when nothing was dropped. `artifact_dropped`: bytes the
    artifact's cap left out of it (then it holds the output's head and tail, and says so)."""
    if not counts.truncated:
        return None
    side = "start" if keep is Keep.TAIL else "end"
    kept_end = "last" if keep is Keep.TAIL else "first"
    if artifact is None:
        where = "the full output was not saved"
    elif artifact_dropped:
        where = f"the output's head and tail, {_count(artifact_dropped, 'byte')} between them left out: {artifact}"
    else:
        where = f"full output: {artifact}"
    dropped = f"{_count(counts.bytes_dropped, 'byte')} ({_count(counts.lines_dropped, 'line')})"
    kept = f"{_count(counts.bytes_kept, 'byte')} ({_count(counts.lines_kept, 'line')})"
    return f"[output truncated: {dropped} dropped from the {side}; kept the {kept_end} {kept}; {where}]"


# --- The streaming stepper -------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class TextCounts:
    """What the shell counted in one text it streams: its length, its newlines, whether its last byte is one."""

    length: int
    newlines: int
    ends_with_newline: bool


@dataclass(frozen=True, slots=True)
class Stepper:
    """One streaming output: what its store holds and what the whole output counted so far."""

    limits: OutputLimits
    stored: int = 0  # bytes in the store; HEAD: a prefix of the output, TAIL: a suffix
    total_bytes: int = 0
    total_newlines: int = 0
    ends_with_newline: bool = True  # of the output so far (True when empty: no unterminated piece)
    closed: bool = False

    @property
    def total_lines(self) -> int:
        """Lines in the output so far: each newline ends one, and an unterminated final piece is one."""
        return self.total_newlines + (0 if self.ends_with_newline else 1)

    @property
    def exceeded(self) -> bool:
        """Whether the output so far is past the limits, so its window drops something (and needs an artifact)."""
        return self.total_bytes > self.limits.max_bytes or self.total_lines > self.limits.max_lines

    @property
    def full(self) -> bool:
        """A HEAD store is full once it holds its margin: no later byte can enter its window."""
        return self.limits.keep is Keep.HEAD and self.stored >= margin(self.limits)


@dataclass(frozen=True, slots=True)
class OutAnswer:
    """Store the first `take` bytes of the text, then drop the first `trim` bytes of the store."""

    stepper: Stepper
    take: int
    trim: int


@dataclass(frozen=True, slots=True)
class SkipAnswer:
    """The skipped bytes are counted; if `clears`, the shell empties the store."""

    stepper: Stepper
    clears: bool


@dataclass(frozen=True, slots=True)
class Reading:
    """The current window of a streaming output: its range within the store and the whole output's counts."""

    window: Window
    counts: Slice


def _counted(state: Stepper, text: TextCounts, stored: int) -> Stepper:
    """The stepper with `text` counted and `stored` bytes in its store (an empty text says nothing of the output's
    last byte). Built directly, not by dataclasses.replace: this runs once per chunk a job reads, and replace costs
    several times more. A stepper that steps is open (a closed one is refused), so the new one is too."""
    ends_with_newline = text.ends_with_newline if text.length else state.ends_with_newline
    return Stepper(
        state.limits,
        stored,
        state.total_bytes + text.length,
        state.total_newlines + text.newlines,
        ends_with_newline,
    )


def step_out(state: Stepper, text: TextCounts) -> OutAnswer:
    """A new text: a HEAD stores what fits its margin (a full head drops it); a TAIL stores it all, then trims
    its store to the margin once it holds more than twice the margin."""
    if state.limits.keep is Keep.HEAD:
        take = min(text.length, max(0, margin(state.limits) - state.stored))
        return OutAnswer(_counted(state, text, state.stored + take), take, 0)
    stored = state.stored + text.length
    limit = margin(state.limits)
    trim = stored - limit if stored > 2 * limit else 0
    return OutAnswer(_counted(state, text, stored - trim), text.length, trim)


def step_skip(state: Stepper, text: TextCounts) -> SkipAnswer:
    """Bytes counted but not passed: a full HEAD keeps its store; a TAIL's store is cleared, since the shell only
    skips bytes followed by at least a margin more, so nothing stored before them can be in a later window."""
    if state.limits.keep is Keep.HEAD or text.length == 0:
        return SkipAnswer(_counted(state, text, state.stored), False)
    return SkipAnswer(_counted(state, text, 0), True)


def step_look(state: Stepper, facts: TextFacts) -> Reading:
    """The current window: the window of the store, measured against the whole output."""
    kept = window(state.limits, facts)
    return Reading(kept, measure(kept, state.total_bytes, state.total_lines))


# --- The entry ---------------------------------------------------------------------------------------------------


class BoundRefusalReason(enum.Enum):
    """Why `answer` refused a request; each refused request has exactly one."""

    NOT_A_REQUEST = "not_a_request"  # not one of the request types below
    BAD_LIMITS = "bad_limits"  # limits not an OutputLimits with non-negative integer fields
    BAD_TEXT = "bad_text"  # text counts or facts that no text has (negative, more newlines than bytes, ...)
    BAD_CUT = "bad_cut"  # a cut longer than the cap or than its line
    STORE_MISMATCH = "store_mismatch"  # facts that do not describe what the stepper stored
    CLOSED = "closed"  # a step on a closed stepper
    SKIP_WOULD_LOSE = "skip_would_lose"  # a skip into a head's window: those bytes would be lost


@dataclass(frozen=True, slots=True)
class BoundRefusal:
    """The bounder's one typed answer to a request it cannot take: malformed, on a closed stepper, or a lossy skip."""

    reason: BoundRefusalReason


@dataclass(frozen=True, slots=True)
class WindowRequest:
    """A whole text's window and counts (the "call")."""

    limits: OutputLimits
    facts: TextFacts


@dataclass(frozen=True, slots=True)
class WindowReply:
    """The window of a whole text and its counts."""

    window: Window
    counts: Slice


@dataclass(frozen=True, slots=True)
class NoticeRequest:
    """The notice for counts, naming the artifact (or None when there is none) and what its cap left out of it."""

    keep: Keep
    counts: Slice
    artifact: str | None
    artifact_dropped: int = 0


@dataclass(frozen=True, slots=True)
class OpenRequest:
    """Open a streaming output under limits."""

    limits: OutputLimits


@dataclass(frozen=True, slots=True)
class OutRequest:
    """Stream one text into a stepper."""

    stepper: Stepper
    text: TextCounts


@dataclass(frozen=True, slots=True)
class SkipRequest:
    """Count a text the shell does not pass."""

    stepper: Stepper
    text: TextCounts


@dataclass(frozen=True, slots=True)
class LookRequest:
    """Read the current window from the store's facts."""

    stepper: Stepper
    facts: TextFacts


@dataclass(frozen=True, slots=True)
class ShutRequest:
    """Close a stepper and read its final window."""

    stepper: Stepper
    facts: TextFacts


@dataclass(frozen=True, slots=True)
class ShutReply:
    """The closed stepper and its final reading."""

    stepper: Stepper
    reading: Reading


Request = WindowRequest | NoticeRequest | OpenRequest | OutRequest | SkipRequest | LookRequest | ShutRequest
Reply = WindowReply | str | None | Stepper | OutAnswer | SkipAnswer | Reading | ShutReply


def _limits_ok(limits: object) -> bool:
    return (
        isinstance(limits, OutputLimits)
        and is_count(limits.max_bytes)
        and is_count(limits.max_lines)
        and isinstance(limits.keep, Keep)
    )


def _text_ok(text: object) -> bool:
    return (
        isinstance(text, TextCounts)
        and is_count(text.length)
        and is_count(text.newlines)
        and isinstance(text.ends_with_newline, bool)
        and text.newlines <= text.length
        and (text.length > 0 or not text.ends_with_newline)
        and (not text.ends_with_newline or text.newlines >= 1)
        and (text.ends_with_newline or text.length == 0 or text.newlines < text.length)
    )


def _facts_problem(limits: OutputLimits, facts: object) -> BoundRefusalReason | None:
    if not isinstance(facts, TextFacts) or not isinstance(facts.line_lengths, tuple):
        return BoundRefusalReason.BAD_TEXT
    if not all(is_count(n) and n > 0 for n in facts.line_lengths) or not isinstance(facts.starts_inside_line, bool):
        return BoundRefusalReason.BAD_TEXT
    if not is_count(facts.cut):
        return BoundRefusalReason.BAD_CUT
    lengths = facts.line_lengths
    end_line = (lengths[0] if limits.keep is Keep.HEAD else lengths[-1]) if lengths else 0
    if facts.cut > min(limits.max_bytes, end_line):
        return BoundRefusalReason.BAD_CUT
    return None


def _stepper_problem(stepper: object) -> BoundRefusalReason | None:
    if not isinstance(stepper, Stepper) or not _limits_ok(stepper.limits):
        return BoundRefusalReason.BAD_LIMITS if isinstance(stepper, Stepper) else BoundRefusalReason.NOT_A_REQUEST
    counts = (stepper.stored, stepper.total_bytes, stepper.total_newlines)
    if not all(is_count(n) for n in counts) or stepper.stored > stepper.total_bytes:
        return BoundRefusalReason.STORE_MISMATCH
    if stepper.total_newlines > stepper.total_bytes or not isinstance(stepper.ends_with_newline, bool):
        return BoundRefusalReason.STORE_MISMATCH
    if stepper.closed:
        return BoundRefusalReason.CLOSED
    return None


def _store_problem(stepper: Stepper, facts: TextFacts) -> BoundRefusalReason | None:
    problem = _facts_problem(stepper.limits, facts)
    if problem is not None:
        return problem
    if facts.size != stepper.stored:
        return BoundRefusalReason.STORE_MISMATCH
    at_output_start = stepper.stored == stepper.total_bytes or stepper.limits.keep is Keep.HEAD
    if at_output_start and facts.starts_inside_line:
        return BoundRefusalReason.STORE_MISMATCH
    return None


def answer(request: object) -> Reply | BoundRefusal:
    """The core's entry: the model's answer to a well-formed request, one exact BoundRefusal to any other."""
    match request:
        case WindowRequest(limits=limits, facts=facts):
            if not _limits_ok(limits):
                return BoundRefusal(BoundRefusalReason.BAD_LIMITS)
            problem = _facts_problem(limits, facts)
            if problem is not None:
                return BoundRefusal(problem)
            if facts.starts_inside_line:
                return BoundRefusal(BoundRefusalReason.BAD_TEXT)
            kept = window(limits, facts)
            total_lines = len(facts.line_lengths)
            return WindowReply(kept, measure(kept, facts.size, total_lines))
        case NoticeRequest(keep=keep, counts=counts, artifact=artifact, artifact_dropped=artifact_dropped):
            fields = (counts.bytes_kept, counts.bytes_dropped, counts.lines_kept, counts.lines_dropped)
            if not isinstance(keep, Keep) or not isinstance(counts, Slice) or not all(is_count(n) for n in fields):
                return BoundRefusal(BoundRefusalReason.BAD_TEXT)
            if artifact is not None and not isinstance(artifact, str):
                return BoundRefusal(BoundRefusalReason.BAD_TEXT)
            if not is_count(artifact_dropped) or (artifact is None and artifact_dropped):
                return BoundRefusal(BoundRefusalReason.BAD_TEXT)
            return notice(keep, counts, artifact, artifact_dropped)
        case OpenRequest(limits=limits):
            return Stepper(limits) if _limits_ok(limits) else BoundRefusal(BoundRefusalReason.BAD_LIMITS)
        case OutRequest(stepper=stepper, text=text) | SkipRequest(stepper=stepper, text=text):
            problem = _stepper_problem(stepper)
            if problem is not None:
                return BoundRefusal(problem)
            if not _text_ok(text):
                return BoundRefusal(BoundRefusalReason.BAD_TEXT)
            if isinstance(request, OutRequest):
                return step_out(stepper, text)
            if stepper.limits.keep is Keep.HEAD and not stepper.full and text.length > 0:
                return BoundRefusal(BoundRefusalReason.SKIP_WOULD_LOSE)
            return step_skip(stepper, text)
        case LookRequest(stepper=stepper, facts=facts) | ShutRequest(stepper=stepper, facts=facts):
            problem = _stepper_problem(stepper) or _store_problem(stepper, facts)
            if problem is not None:
                return BoundRefusal(problem)
            reading = step_look(stepper, facts)
            if isinstance(request, LookRequest):
                return reading
            return ShutReply(replace(stepper, closed=True), reading)
    return BoundRefusal(BoundRefusalReason.NOT_A_REQUEST)


# --- narrowing a kept window -------------------------------------------------------------------------------------


def narrowed(limits: OutputLimits, facts: TextFacts, before: Slice) -> tuple[Window, Slice]:
    """A window of an output's kept window under tighter `limits` (a reader that takes less), with its counts over
    the whole output: what this cut drops adds to what `before` dropped. Invariant: kept + dropped == every byte and
    every line of the whole output, as for the first window."""
    kept = window(limits, facts)
    return kept, measure(kept, before.bytes_kept + before.bytes_dropped, before.lines_kept + before.lines_dropped)
