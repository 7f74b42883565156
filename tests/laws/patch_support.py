"""Strategies and an independent diff for the patch laws: patches the grammar can say, and updates built by difflib."""

from __future__ import annotations

import difflib

from hypothesis import strategies as st

from eukhe.core.patch import (
    ADD,
    BEGIN,
    DELETE,
    END,
    END_OF_FILE,
    MOVE,
    UPDATE,
    AddFile,
    DeleteFile,
    Hunk,
    HunkLine,
    Layout,
    Op,
    Patch,
    Section,
    UpdateFile,
    seek,
    split_lines,
)

# Characters that reach every rule of the parser: markers (*, @, +, -), spaces and tabs, a non-ASCII letter.
LINE_ALPHABET = "ab *@+-\té"
PATH_ALPHABET = "ab/._- é~"

MARKERS = (BEGIN, END, END_OF_FILE)
HEADERS = (ADD, DELETE, UPDATE, MOVE)
PADDING = st.text(" \t", max_size=2)


def reads_as_marker(line: str) -> bool:
    """The rule of docs/fs.md: a line whose trimmed form is a marker, or a header (with or without its path)."""
    trimmed = line.strip()
    return trimmed in MARKERS or any(trimmed == h.rstrip() or trimmed.startswith(h) for h in HEADERS)


def padded(line: str, before: str, after: str) -> str:
    """A marker or header line with whitespace around it; any other line as it is."""
    return before + line.strip() + after if reads_as_marker(line) else line


# Texts that read as markers once trimmed, padded or not, and one that only looks like one.
marker_texts_st = st.builds(
    lambda before, text, after: before + text + after,
    PADDING,
    st.sampled_from([*MARKERS, *(h + "a" for h in HEADERS), ADD.rstrip(), "*** Frob: a"]),
    PADDING,
)
lines_st = st.text(LINE_ALPHABET, max_size=6) | marker_texts_st
paths_st = st.text(PATH_ALPHABET, min_size=1, max_size=8).filter(lambda p: p == p.rstrip())
contexts_st = st.none() | (st.text(LINE_ALPHABET, min_size=1, max_size=6) | marker_texts_st).filter(
    lambda c: c.strip() != "" and c == c.rstrip()
)
# A context line whose text reads as a marker is that marker: the grammar cannot keep such a line as context.
hunk_lines_st = st.builds(HunkLine, st.sampled_from(Op), lines_st).filter(
    lambda line: not (line.op is Op.KEEP and reads_as_marker(line.text))
)
hunks_st = st.builds(Hunk, st.lists(hunk_lines_st, min_size=1, max_size=4).map(tuple), contexts_st, st.booleans())


@st.composite
def updates(draw: st.DrawFn) -> UpdateFile:
    move_to = draw(st.none() | paths_st)
    hunks = draw(st.lists(hunks_st, min_size=0 if move_to is not None else 1, max_size=3))
    return UpdateFile(draw(paths_st), tuple(hunks), move_to)


sections_st: st.SearchStrategy[Section] = st.one_of(
    st.builds(AddFile, paths_st, st.lists(lines_st, max_size=4).map(tuple)),
    st.builds(DeleteFile, paths_st),
    updates(),
)
patches_st = st.lists(sections_st, min_size=1, max_size=5).map(lambda sections: Patch(tuple(sections)))


def diff_hunks(
    old_text: str, new_text: str, shape: Layout, *, context: int = 1, headers: bool = False, end_marks: bool = False
) -> list[Hunk]:
    """Hunks that turn `old_text` into `new_text`, from difflib's grouped opcodes (context >= 1).

    Each hunk is made unambiguous the way a careful author would: when its old lines also occur earlier (after the
    previous hunk), its context is widened back to where the previous hunk ended. With `headers`, a hunk gets the
    line before it as an `@@` context when that line is found first where it is. With `end_marks`, a hunk that
    reaches the end of the file says so (`*** End of File`). A line kept that reads as a marker is removed and
    inserted again, since a context line cannot say it.
    """
    assert context >= 1
    old, new = split_lines(old_text, shape), split_lines(new_text, shape)
    matcher = difflib.SequenceMatcher(a=old, b=new, autojunk=False)
    hunks: list[Hunk] = []
    cursor = 0
    for group in matcher.get_grouped_opcodes(context):
        start, end = group[0][1], group[-1][2]
        body: list[HunkLine] = []
        for tag, a1, a2, b1, b2 in group:
            if tag == "equal":
                body += [kept for line in old[a1:a2] for kept in keep(line)]
            else:
                body += [HunkLine(Op.REMOVE, line) for line in old[a1:a2]]
                body += [HunkLine(Op.INSERT, line) for line in new[b1:b2]]
        pattern = tuple(line.text for line in body if line.op is not Op.INSERT)
        if pattern and seek(old, pattern, cursor) != start:
            body = [kept for line in old[cursor:start] for kept in keep(line)] + body
            start = cursor
        header = None
        if headers and start - 1 >= cursor:
            candidate = old[start - 1]
            if candidate.strip() and candidate == candidate.rstrip() and seek(old, (candidate,), cursor) == start - 1:
                header = candidate
        end_of_file = end_marks and end == len(old) and bool(pattern)
        hunks.append(Hunk(tuple(body), header, end_of_file))
        cursor = end
    return hunks


def keep(line: str) -> list[HunkLine]:
    """The hunk lines that keep a line: a context line, or a removal and an insertion when it reads as a marker."""
    if reads_as_marker(line):
        return [HunkLine(Op.REMOVE, line), HunkLine(Op.INSERT, line)]
    return [HunkLine(Op.KEEP, line)]
