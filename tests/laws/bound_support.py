"""Strategies, small scopes and independent reference readings for the bounder's laws."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from dataclasses import dataclass

from hypothesis import strategies as st

from eukhe.core import bound
from eukhe.core.bound import Keep, OutputLimits

# Pieces that reach every case: plain bytes, newlines, CR/LF, valid 2/3/4-byte characters, and invalid UTF-8.
PIECES = [
    b"a",
    b"\n",
    b"\r\n",
    b"\xc3\xa9",
    b"\xe2\x82\xac",
    b"\xf0\x9f\x98\x80",
    b"\xff",
    b"\x80",
    b"\xc3",
    b"\xed\xa0",
]

# The small scope checked exhaustively: every text up to SMALL_LENGTH bytes over this alphabet (a newline, both bytes
# of a two-byte character, and an invalid byte), under every small limit.
SMALL_ALPHABET = [b"a", b"\n", b"\xc3", b"\xa9", b"\xff"]
SMALL_LENGTH = 5
SMALL_MAX_BYTES = range(6)
SMALL_MAX_LINES = range(4)


def small_texts(max_length: int = SMALL_LENGTH) -> Iterator[bytes]:
    """Every text up to `max_length` bytes over the small alphabet."""
    for length in range(max_length + 1):
        for combo in itertools.product(SMALL_ALPHABET, repeat=length):
            yield b"".join(combo)


def small_limits() -> Iterator[OutputLimits]:
    """Every small limit, both ends."""
    for max_bytes in SMALL_MAX_BYTES:
        for max_lines in SMALL_MAX_LINES:
            for keep in Keep:
                yield OutputLimits(max_bytes, max_lines, keep)


def chunkings(text: bytes) -> Iterator[list[bytes]]:
    """Every way to cut `text` into consecutive non-empty chunks."""
    n = len(text)
    if n == 0:
        yield []
        return
    for cuts in itertools.product([False, True], repeat=n - 1):
        pieces, start = [], 0
        for index, cut in enumerate(cuts, start=1):
            if cut:
                pieces.append(text[start:index])
                start = index
        pieces.append(text[start:])
        yield pieces


texts = st.one_of(
    st.binary(max_size=200),
    st.lists(st.sampled_from(PIECES), max_size=60).map(b"".join),
)
limits_st = st.builds(
    OutputLimits,
    max_bytes=st.integers(0, 48),
    max_lines=st.integers(0, 12),
    keep=st.sampled_from(list(Keep)),
)


@st.composite
def chunked(draw: st.DrawFn, text_strategy: st.SearchStrategy[bytes] = texts) -> list[bytes]:
    """A text cut into random chunks (empty chunks included)."""
    text = draw(text_strategy)
    cuts = sorted(draw(st.lists(st.integers(0, len(text)), max_size=12)))
    bounds = [0, *cuts, len(text)]
    return [text[a:b] for a, b in itertools.pairwise(bounds)]


# --- Independent readings: written from the spec's words, not from the shell's code ------------------------------


def reference_boundaries(line: bytes) -> list[int]:
    """Character boundaries by greedy decoding with Python's own UTF-8 decoder: a valid character is one step,
    any other byte is a one-byte step."""
    positions = [0]
    i = 0
    while i < len(line):
        step = 1
        for size in (4, 3, 2):
            chunk = line[i : i + size]
            if len(chunk) == size:
                try:
                    if len(chunk.decode("utf-8")) == 1:
                        step = size
                        break
                except UnicodeDecodeError:
                    pass
        i += step
        positions.append(i)
    return positions


def reference_lines(text: bytes) -> list[bytes]:
    """Lines as the spec defines them: up to and including a newline; a final unterminated piece is a line."""
    lines = text.split(b"\n")
    whole = [line + b"\n" for line in lines[:-1]]
    return whole + ([lines[-1]] if lines[-1] else [])


def reference_window(text: bytes, limits: OutputLimits) -> bytes:
    """The spec's window of a whole text: the most whole lines from the kept end within both limits, else that
    end's line cut at the character boundary nearest the cap."""
    lines = reference_lines(text)
    ordered = lines if limits.keep is Keep.HEAD else lines[::-1]
    best = 0
    for count in range(len(lines) + 1):
        chosen = ordered[:count]
        if count <= limits.max_lines and sum(map(len, chosen)) <= limits.max_bytes:
            best = count
    if best == 0 and lines and limits.max_lines >= 1 and limits.max_bytes >= 1:
        line = ordered[0]
        if limits.keep is Keep.HEAD:
            cut = max(p for p in reference_boundaries(line) if p <= limits.max_bytes)
            return line[:cut]
        start = min(p for p in reference_boundaries(line) if p >= len(line) - limits.max_bytes)
        return line[start:]
    chosen = ordered[:best]
    return b"".join(chosen if limits.keep is Keep.HEAD else chosen[::-1])


def reference_lines_kept(text: bytes, limits: OutputLimits) -> int:
    """How many lines the reference window touches."""
    return len(reference_lines(reference_window(text, limits)))


def stepper_after(limits: OutputLimits, chunks: list[bytes]) -> tuple[bound.Stepper, bytes, bool]:
    """Drive the core's stepper as the shell does (out only), returning the stepper, its store and whether the
    store begins inside a line."""
    from eukhe.output import count_text

    stepper = bound.Stepper(limits)
    store = b""
    inside = False
    for chunk in chunks:
        reply = bound.step_out(stepper, count_text(chunk))
        store += chunk[: reply.take]
        if reply.trim:
            inside = store[reply.trim - 1 : reply.trim] != b"\n"
            store = store[reply.trim :]
        stepper = reply.stepper
    return stepper, store, inside


# --- Brute-force readings of a store, the margin and the counts (bound_margin_exact, bound_look_exact,
# bound_slice_conserves): each reads the bytes themselves, never the core's facts, window or measure ------------------


@dataclass(frozen=True, slots=True)
class ReferenceReading:
    """A window read by brute force: the bytes kept, and how many lines they touch."""

    kept: bytes
    lines: int


def reference_reading(store: bytes, limits: OutputLimits, starts_inside_line: bool = False) -> ReferenceReading:
    """The window of a store read alone, by brute force over its lines: the most lines, whole and taken from the kept
    end, within both limits; else, when the limits keep anything, that end's line cut at the character boundary
    nearest the cap. A store that begins inside a line (a tail's suffix of the output) does not hold its first line
    whole: that line is never kept whole, and a head cannot cut it (its start is not in the store)."""
    lines = reference_lines(store)
    whole = [not (starts_inside_line and index == 0) for index in range(len(lines))]
    order = list(range(len(lines)))
    if limits.keep is Keep.TAIL:
        order.reverse()
    best = 0
    for count in range(len(lines) + 1):
        chosen = order[:count]
        fits = count <= limits.max_lines and sum(len(lines[i]) for i in chosen) <= limits.max_bytes
        if fits and all(whole[i] for i in chosen):
            best = count
    if best == 0 and lines and limits.max_lines >= 1 and limits.max_bytes >= 1:
        end = order[0]
        line = lines[end]
        if limits.keep is Keep.HEAD:
            if not whole[end]:
                return ReferenceReading(b"", 0)
            kept = line[: max(p for p in reference_boundaries(line) if p <= limits.max_bytes)]
        else:
            kept = line[min(p for p in reference_boundaries(line) if p >= len(line) - limits.max_bytes) :]
        return ReferenceReading(kept, 1 if kept else 0)
    kept = b"".join(lines[i] for i in sorted(order[:best]))
    return ReferenceReading(kept, best)


def store_of(text: bytes, size: int, keep: Keep) -> tuple[bytes, bool]:
    """What a streaming store of `size` bytes holds of a whole text: its first bytes (HEAD) or its last ones (TAIL),
    and whether it begins inside a line."""
    if keep is Keep.HEAD or size >= len(text):
        return text[:size], False
    start = len(text) - size
    return text[start:], text[start - 1 : start] != b"\n"


def reads_the_whole_window(text: bytes, limits: OutputLimits, size: int) -> bool:
    """Whether a store of `size` bytes of `text` reads the same window (bytes and lines) as the whole text."""
    store, inside = store_of(text, size, limits.keep)
    return reference_reading(store, limits, inside) == reference_reading(text, limits)


def reference_margin(limits: OutputLimits, family: list[bytes]) -> int:
    """The least store size that reads every text of `family` as the whole text is read (brute force)."""
    size = 0
    while not all(reads_the_whole_window(text, limits, size) for text in family):
        size += 1
    return size


MARGIN_PIECES = [b"a", b"\n", b"\xc3\xa9", b"\xf0\x9f\x98\x80"]
"""A newline, and characters of one, two and four bytes: the widest character decides how much context a cut needs."""


def margin_texts(pieces: int = 5) -> list[bytes]:
    """Every text of up to `pieces` pieces of MARGIN_PIECES."""
    return [b"".join(combo) for n in range(pieces + 1) for combo in itertools.product(MARGIN_PIECES, repeat=n)]


def texts_around_the_cap(limits: OutputLimits) -> list[bytes]:
    """Texts whose one character of each width (and an invalid byte) lies anywhere across the cap's byte offset from
    either end, after or before a whole line: where a store one byte short would misread a cut."""
    cap = limits.max_bytes
    found = []
    for char in (b"\xc3\xa9", b"\xe2\x82\xac", b"\xf0\x9f\x98\x80", b"\xff"):
        for near in range(max(0, cap - 4), cap + 2):
            for far in range(3):
                found.append(b"a" * near + char + b"a" * far)  # HEAD: the char around offset `cap`
                found.append(b"x\n" + b"a" * near + char + b"a" * far)
                found.append(b"a" * far + char + b"a" * near)  # TAIL: the char around `cap` bytes from the end
                found.append(b"a" * far + char + b"a" * near + b"\n")
    return found


def reference_marks(text: bytes, kept: tuple[int, int]) -> tuple[int, int, int, int]:
    """Byte by byte and line by line, whether each lies in the window [start, end) of `text`: (bytes kept, bytes
    dropped, lines kept, lines dropped). A line is kept when the window holds any byte of it."""
    start, end = kept
    bytes_kept = bytes_dropped = lines_kept = lines_dropped = 0
    position = 0
    for line in reference_lines(text):
        inside = 0
        for offset in range(len(line)):
            if start <= position + offset < end:
                inside += 1
        bytes_kept += inside
        bytes_dropped += len(line) - inside
        if inside:
            lines_kept += 1
        else:
            lines_dropped += 1
        position += len(line)
    return bytes_kept, bytes_dropped, lines_kept, lines_dropped


def reference_window_range(text: bytes, limits: OutputLimits) -> tuple[int, int]:
    """Where the reference window of a whole text lies in it."""
    kept = reference_reading(text, limits).kept
    return (0, len(kept)) if limits.keep is Keep.HEAD else (len(text) - len(kept), len(text))
