"""The multi-file patch of `fs.edit`: its grammar, its parser and printer, and its pure application.

The grammar is modelled on Codex's apply_patch and written out in docs/fs.md. In short:

    *** Begin Patch
    *** Add File: PATH            then lines that start with '+' (the new file's lines)
    *** Delete File: PATH
    *** Update File: PATH
    *** Move to: NEWPATH          optional: the update also renames the file (our MV row)
    @@ CONTEXT                    a hunk: an optional line to find first, then ' ', '-', '+' lines
    *** End of File               optional, after a hunk: its lines are the file's last lines
    *** End Patch

Marker and header lines (every line above that starts with `***`) are read with leading and trailing whitespace
trimmed, wherever they stand: a line whose trimmed form is one is that marker or header, also where a hunk's context
line could be. Every other line keeps its exact text. A patch has at least one section.

Theory of operation. `parse` reads one patch text into a `Patch` (or raises one `PatchSyntaxError` naming the line
and what was expected); `render` writes a `Patch` back as text, and `parse(render(p)) == p`. Paths are opaque strings
here: the parser reports each header path exactly as written, and `Patch.map_paths` rewrites them all, so the shell
can map sandbox paths to host paths before anything is read. `apply_hunks` applies one update's hunks to a file's
text and returns the new text or a `HunkFailure`. `plan` runs a whole patch over the files it names, in memory, and
returns every write and removal at once or one `PatchFailure`: nothing is decided section by section, so a patch
applies completely or not at all.

Context matching follows Codex: each hunk's old lines are searched from where the previous hunk ended, first exactly,
then ignoring trailing whitespace, then ignoring leading and trailing whitespace; the first position that matches in
the strictest pass wins.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass

BEGIN = "*** Begin Patch"
END = "*** End Patch"
ADD = "*** Add File: "
DELETE = "*** Delete File: "
UPDATE = "*** Update File: "
MOVE = "*** Move to: "
END_OF_FILE = "*** End of File"
HUNK = "@@"
MARKERS = (BEGIN, END, END_OF_FILE)
HEADERS = (ADD, DELETE, UPDATE, MOVE)


# --- the patch ----------------------------------------------------------------------------------------------------


class Op(enum.Enum):
    """What a hunk line does."""

    KEEP = " "  # a context line: in the old text and in the new
    REMOVE = "-"  # only in the old text
    INSERT = "+"  # only in the new text


@dataclass(frozen=True, slots=True)
class HunkLine:
    """One line of a hunk: its op and its text (without the op character and without a newline)."""

    op: Op
    text: str


@dataclass(frozen=True, slots=True)
class Hunk:
    """One change in an updated file.

    `context` is the text after `@@ ` (a line to find before the hunk's own lines), or None for a bare `@@`.
    `end_of_file` says the hunk's old lines are the file's last lines.
    """

    lines: tuple[HunkLine, ...]
    context: str | None = None
    end_of_file: bool = False

    @property
    def old_lines(self) -> tuple[str, ...]:
        """The lines the hunk expects in the file: context and removed lines, in order."""
        return tuple(line.text for line in self.lines if line.op is not Op.INSERT)

    @property
    def new_lines(self) -> tuple[str, ...]:
        """The lines the hunk leaves in their place: context and inserted lines, in order."""
        return tuple(line.text for line in self.lines if line.op is not Op.REMOVE)


@dataclass(frozen=True, slots=True)
class AddFile:
    """Create `path` with `lines`, each ended by a newline. The path must not exist."""

    path: str
    lines: tuple[str, ...] = ()

    @property
    def content(self) -> str:
        """The new file's text."""
        return "".join(line + "\n" for line in self.lines)


@dataclass(frozen=True, slots=True)
class DeleteFile:
    """Remove the file at `path`. It must exist and be a regular file."""

    path: str


@dataclass(frozen=True, slots=True)
class UpdateFile:
    """Change the file at `path` by `hunks`; with `move_to`, the result lives at `move_to` and `path` is gone."""

    path: str
    hunks: tuple[Hunk, ...] = ()
    move_to: str | None = None


Section = AddFile | DeleteFile | UpdateFile


@dataclass(frozen=True, slots=True)
class Patch:
    """One multi-file patch: its sections, applied in order."""

    sections: tuple[Section, ...]

    def paths(self) -> tuple[str, ...]:
        """Every header path and `Move to` path, in order of appearance, each once."""
        seen: dict[str, None] = {}
        for section in self.sections:
            seen.setdefault(section.path, None)
            if isinstance(section, UpdateFile) and section.move_to is not None:
                seen.setdefault(section.move_to, None)
        return tuple(seen)

    def map_paths(self, to: Callable[[str], str]) -> Patch:
        """The same patch with every header path and `Move to` path replaced by `to(path)`; nothing else changes."""
        sections: list[Section] = []
        for section in self.sections:
            if isinstance(section, AddFile):
                sections.append(AddFile(to(section.path), section.lines))
            elif isinstance(section, DeleteFile):
                sections.append(DeleteFile(to(section.path)))
            else:
                move_to = None if section.move_to is None else to(section.move_to)
                sections.append(UpdateFile(to(section.path), section.hunks, move_to))
        return Patch(tuple(sections))


_OPS = {op.value: op for op in Op}

# --- parsing ------------------------------------------------------------------------------------------------------


NOT_PARSED = "the patch does not parse"
CHANGES_NOTHING = "the patch changes nothing"


class PatchSyntaxError(ValueError):
    """A patch text that is not in the grammar: the 1-based line, what was expected there, and what was found.

    `problem` says what is wrong with the patch as a whole: it does not parse, or (no sections) it changes nothing.
    """

    def __init__(self, line: int, expected: str, found: str | None, problem: str = NOT_PARSED) -> None:
        got = "the end of the patch" if found is None else repr(found)
        super().__init__(f"patch line {line}: expected {expected}, got {got}")
        self.line = line
        self.expected = expected
        self.found = found
        self.problem = problem


class _Lines:
    """The patch's lines with a cursor; each line loses its trailing '\\r's, so CRLF patches read as LF ones."""

    def __init__(self, text: str) -> None:
        raw = text.split("\n")
        if raw and raw[-1] == "":
            raw.pop()  # the newline that ends the last line starts no line
        self.lines = [line.rstrip("\r") for line in raw]
        self.index = 0

    def peek(self) -> str | None:
        return self.lines[self.index] if self.index < len(self.lines) else None

    @property
    def number(self) -> int:
        """The 1-based number of the line under the cursor (one past the last at the end)."""
        return self.index + 1

    def take(self) -> str:
        line = self.lines[self.index]
        self.index += 1
        return line

    def skip_blank(self) -> None:
        while (line := self.peek()) is not None and line.strip() == "":
            self.index += 1

    def fail(self, expected: str) -> PatchSyntaxError:
        return PatchSyntaxError(self.number, expected, self.peek())


def _is_marker(line: str, marker: str) -> bool:
    return line.strip() == marker


def _header_path(line: str, header: str) -> str | None:
    """The path of a `header PATH` line read trimmed ('' when it has none), or None when the line is no such header.

    The path is what follows the header's space: leading spaces of the path are kept, trailing ones are trimmed.
    """
    trimmed = line.strip()
    if trimmed == header.rstrip():
        return ""
    if not trimmed.startswith(header):
        return None
    return trimmed[len(header) :]


def reads_as_marker(line: str) -> bool:
    """Whether a patch line, trimmed, is a marker or a header: then it is one wherever it stands, never a hunk line."""
    return line.strip() in MARKERS or any(_header_path(line, header) is not None for header in HEADERS)


def _ends_hunks(line: str) -> bool:
    """A line no hunk line can be: a marker, a header, or another `***` line (which the section reading refuses)."""
    return line.startswith("***") or reads_as_marker(line)


def parse(text: str) -> Patch:
    """Read one patch; raise `PatchSyntaxError` at the first line that is not in the grammar."""
    lines = _Lines(text)
    lines.skip_blank()
    first = lines.peek()
    if first is None or not _is_marker(first, BEGIN):
        raise lines.fail(f"'{BEGIN}'")
    lines.take()
    sections: list[Section] = []
    while True:
        lines.skip_blank()
        line = lines.peek()
        if line is None:
            raise lines.fail(f"a section header or '{END}'")
        if _is_marker(line, END):
            if not sections:
                expected = f"a section header ('{ADD}PATH', '{DELETE}PATH' or '{UPDATE}PATH')"
                raise PatchSyntaxError(lines.number, expected, line, CHANGES_NOTHING)
            lines.take()
            break
        sections.append(_section(lines))
    lines.skip_blank()
    if lines.peek() is not None:
        raise lines.fail(f"nothing after '{END}'")
    return Patch(tuple(sections))


def _path(lines: _Lines, marker: str) -> str:
    number, line = lines.number, lines.take()
    path = _header_path(line, marker)
    assert path is not None
    if not path:
        raise PatchSyntaxError(number, f"a path after '{marker.rstrip()}'", line)
    return path


def _section(lines: _Lines) -> Section:
    line = lines.peek()
    assert line is not None
    if _header_path(line, ADD) is not None:
        path = _path(lines, ADD)
        added: list[str] = []
        while (line := lines.peek()) is not None and line.startswith("+"):
            added.append(lines.take()[1:])
        return AddFile(path, tuple(added))
    if _header_path(line, DELETE) is not None:
        return DeleteFile(_path(lines, DELETE))
    if _header_path(line, UPDATE) is not None:
        return _update(lines)
    raise lines.fail(f"a section header ('{ADD}PATH', '{DELETE}PATH' or '{UPDATE}PATH') or '{END}'")


def _update(lines: _Lines) -> UpdateFile:
    path = _path(lines, UPDATE)
    move_to = None
    if (line := lines.peek()) is not None and _header_path(line, MOVE) is not None:
        move_to = _path(lines, MOVE)
    hunks: list[Hunk] = []
    while True:
        _skip_separators(lines)
        line = lines.peek()
        if line is None or _ends_hunks(line):
            break
        hunks.append(_hunk(lines, first=not hunks))
    if not hunks and move_to is None:
        raise lines.fail(f"a hunk ('{HUNK}') or '{MOVE}NEWPATH' after '{UPDATE}{path}'")
    return UpdateFile(path, tuple(hunks), move_to)


def _skip_separators(lines: _Lines) -> None:
    """Skip blank lines that run into a hunk header, a marker, header or `***` line, or the end: they separate, they
    are not context."""
    index = lines.index
    while index < len(lines.lines) and lines.lines[index].strip() == "":
        index += 1
    if index == len(lines.lines) or lines.lines[index].startswith(HUNK) or _ends_hunks(lines.lines[index]):
        lines.index = index


def _hunk(lines: _Lines, first: bool) -> Hunk:
    line = lines.peek()
    assert line is not None
    context: str | None = None
    headed = line.startswith(HUNK)
    if headed:
        header = line.rstrip()
        if header == HUNK:
            context = None
        elif header.startswith(HUNK + " "):
            context = header[len(HUNK) + 1 :]
        else:
            raise lines.fail(f"'{HUNK}' or '{HUNK} CONTEXT'")
        lines.take()
    elif not first:
        raise lines.fail(f"'{HUNK}', a section header or '{END}'")
    body: list[HunkLine] = []
    # Bare empty lines are empty context lines between hunk lines; at a hunk's end they only separate (and a
    # first hunk without a header skips them at its start too).
    blanks = 0
    end_of_file = False
    while (line := lines.peek()) is not None:
        if line == "":
            blanks += 1 if body or headed else 0
            lines.take()
            continue
        op = _OPS.get(line[0])
        if op is None or reads_as_marker(line):
            break
        body.extend(HunkLine(Op.KEEP, "") for _ in range(blanks))
        blanks = 0
        body.append(HunkLine(op, lines.take()[1:]))
    if not body:
        raise lines.fail("a hunk line (starting with ' ', '-' or '+')")
    if (line := lines.peek()) is not None and _is_marker(line, END_OF_FILE):
        lines.take()
        end_of_file = True
    _skip_separators(lines)
    line = lines.peek()
    if line is not None and not (line.startswith(HUNK) or _ends_hunks(line)):
        raise lines.fail(f"a hunk line, '{HUNK}', a section header or '{END}'")
    return Hunk(tuple(body), context, end_of_file)


# --- printing -----------------------------------------------------------------------------------------------------


def render(patch: Patch) -> str:
    """The patch as text in the grammar; `parse(render(p)) == p` for every patch `render` accepts.

    Raises ValueError for a patch the grammar cannot say: a patch with no sections, a path or line with a newline,
    an empty path, a path or context with trailing whitespace, an empty or whitespace-only context (use None), an
    update with no hunks and no move, an empty hunk, or a context line that reads as a marker or header once
    trimmed (say it as a removal and an insertion of the same line).
    """
    if not patch.sections:
        raise ValueError("a patch with no sections changes nothing: the grammar has no such patch")
    out = [BEGIN]
    for section in patch.sections:
        out.extend(_render_section(section))
    out.append(END)
    return "\n".join(out) + "\n"


def _check_path(path: str) -> str:
    if not path or path != path.rstrip() or "\n" in path:
        raise ValueError(f"the patch grammar cannot carry the path {path!r}")
    return path


def _check_line(text: str) -> str:
    if "\n" in text or text.endswith("\r"):
        raise ValueError(f"the patch grammar cannot carry the line {text!r}")
    return text


def _hunk_line(line: HunkLine) -> str:
    text = line.op.value + _check_line(line.text)
    if reads_as_marker(text):
        raise ValueError(f"the context line {line.text!r} reads as a marker; say it as a '-' and a '+' line")
    return text


def _render_section(section: Section) -> Iterator[str]:
    if isinstance(section, AddFile):
        yield ADD + _check_path(section.path)
        yield from ("+" + _check_line(line) for line in section.lines)
        return
    if isinstance(section, DeleteFile):
        yield DELETE + _check_path(section.path)
        return
    yield UPDATE + _check_path(section.path)
    if section.move_to is not None:
        yield MOVE + _check_path(section.move_to)
    elif not section.hunks:
        raise ValueError(f"an update of {section.path!r} needs a hunk or a move")
    for hunk in section.hunks:
        if hunk.context is None:
            yield HUNK
        elif not hunk.context.strip() or hunk.context != hunk.context.rstrip():
            raise ValueError(f"the patch grammar cannot carry the context {hunk.context!r}")
        else:
            yield f"{HUNK} {_check_line(hunk.context)}"
        if not hunk.lines:
            raise ValueError("a hunk needs at least one line")
        yield from (_hunk_line(line) for line in hunk.lines)
        if hunk.end_of_file:
            yield END_OF_FILE


# --- applying hunks to one file -----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class HunkFailure:
    """A hunk that does not apply: the file's path, the hunk's 1-based number, and why."""

    path: str
    hunk: int
    reason: str

    def __str__(self) -> str:
        return f"{self.path}: hunk {self.hunk}: {self.reason}"


_PASSES: tuple[Callable[[str], str], ...] = (
    lambda line: line,  # exact
    str.rstrip,  # trailing whitespace ignored
    str.strip,  # leading and trailing whitespace ignored
)


def seek(lines: tuple[str, ...], pattern: tuple[str, ...], start: int, at_end: bool = False) -> int | None:
    """The first index >= start where `pattern` occurs in `lines`, in the strictest pass that finds one.

    `at_end`: only the position that puts the pattern at the very end counts. An empty pattern is found at `start`.
    """
    if not pattern:
        return len(lines) if at_end else start
    last = len(lines) - len(pattern)
    if last < start:
        return None
    candidates = range(last, last + 1) if at_end else range(start, last + 1)
    for same in _PASSES:
        wanted = [same(line) for line in pattern]
        for index in candidates:
            if all(same(lines[index + offset]) == want for offset, want in enumerate(wanted)):
                return index
    return None


@dataclass(frozen=True, slots=True)
class Layout:
    """How a text splits into lines: the line ending it uses and whether its last line ends with one."""

    eol: str
    final_newline: bool


def layout(text: str) -> Layout:
    """A text's line ending ('\\r\\n' when every newline has a CR before it) and whether it ends with one.

    An empty text counts as ending with a newline, so lines added to an empty file end with one.
    """
    newlines = text.count("\n")
    eol = "\r\n" if newlines and text.count("\r\n") == newlines else "\n"
    return Layout(eol, text == "" or text.endswith(eol))


def split_lines(text: str, shape: Layout) -> tuple[str, ...]:
    """The text's lines without their endings."""
    if text == "":
        return ()
    lines = text.split(shape.eol)
    if shape.final_newline:
        lines.pop()
    return tuple(lines)


def join_lines(lines: tuple[str, ...] | list[str], shape: Layout) -> str:
    """Lines back into a text of the given layout (an empty list is the empty text)."""
    if not lines:
        return ""
    return shape.eol.join(lines) + (shape.eol if shape.final_newline else "")


def apply_hunks(path: str, text: str, hunks: tuple[Hunk, ...]) -> str | HunkFailure:
    """The text after the hunks, in order, or the first hunk that does not apply.

    Each hunk is searched from where the previous one ended. With a context header, the context line is found first
    and the hunk's own lines are searched after it. A hunk with no old lines (only '+') inserts right after its
    context line, or at the end of the file when it has none. The text keeps its line ending and whether it ends
    with a newline.
    """
    shape = layout(text)
    lines = split_lines(text, shape)
    cursor = 0
    replacements: list[tuple[int, int, tuple[str, ...]]] = []
    for number, hunk in enumerate(hunks, start=1):
        if hunk.context is not None:
            found = seek(lines, (hunk.context,), cursor)
            if found is None:
                return HunkFailure(path, number, f"context line {hunk.context!r} not found")
            cursor = found + 1
        old = hunk.old_lines
        if not old:
            at = cursor if hunk.context is not None and not hunk.end_of_file else len(lines)
            replacements.append((at, 0, hunk.new_lines))
            cursor = at
            continue
        found = seek(lines, old, cursor, at_end=hunk.end_of_file)
        if found is None:
            where = "at the end of the file" if hunk.end_of_file else f"after line {cursor}"
            return HunkFailure(path, number, f"its {len(old)} old line(s) starting {old[0]!r} not found {where}")
        replacements.append((found, len(old), hunk.new_lines))
        cursor = found + len(old)
    result: list[str] = []
    done = 0
    for start, length, new in replacements:
        result.extend(lines[done:start])
        result.extend(new)
        done = start + length
    result.extend(lines[done:])
    return join_lines(result, shape)


# --- a whole patch over the files it names ------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Absent:
    """Nothing exists at the path."""


@dataclass(frozen=True, slots=True)
class Text:
    """A regular file and its text."""

    content: str


@dataclass(frozen=True, slots=True)
class Directory:
    """A directory."""


@dataclass(frozen=True, slots=True)
class Special:
    """Something that is neither a regular file nor a directory (a FIFO, a socket, a device)."""


FileState = Absent | Text | Directory | Special


class Action(enum.Enum):
    """What a section did."""

    ADDED = "added"
    UPDATED = "updated"
    DELETED = "deleted"
    MOVED = "moved"


@dataclass(frozen=True, slots=True)
class Change:
    """One section's effect: the action, its path, and for a move its destination."""

    action: Action
    path: str
    destination: str | None = None


@dataclass(frozen=True, slots=True)
class Write:
    """Give the file at `path` this content; `mode_from` is the original file whose mode it keeps (None: new)."""

    path: str
    content: str
    mode_from: str | None


@dataclass(frozen=True, slots=True)
class Remove:
    """Remove the file at `path`."""

    path: str


@dataclass(frozen=True, slots=True)
class Plan:
    """Everything a patch does: one change per section, and the writes and removals that carry them out.

    Invariant: every path in `writes` and `removes` is one of the patch's paths, and each appears at most once.
    """

    changes: tuple[Change, ...]
    writes: tuple[Write, ...]
    removes: tuple[Remove, ...]


@dataclass(frozen=True, slots=True)
class PatchFailure:
    """The patch does not apply: the 1-based section, its path, why, and the failing hunk if a hunk failed."""

    section: int
    path: str
    reason: str
    hunk: int | None = None

    def __str__(self) -> str:
        return f"section {self.section} ({self.path}): {self.reason}"


@dataclass(frozen=True, slots=True)
class _Node:
    state: FileState
    origin: str | None  # the original path whose file this content continues (its mode is kept), None when new


def _absent_reason(state: FileState) -> str:
    if isinstance(state, Directory):
        return "is a directory"
    if isinstance(state, Special):
        return "is not a regular file"
    return "does not exist"


_OCCUPANTS: dict[type[FileState], str] = {
    Text: "a file",
    Directory: "a directory",
    Special: "something that is not a regular file",
}
"""What stands at a path that is not free, by its state."""


def _as_given(path: str) -> str:
    return path


def plan(patch: Patch, files: Mapping[str, FileState], show: Callable[[str], str] = _as_given) -> Plan | PatchFailure:
    """Run the patch over `files` (the state of each of `patch.paths()`) in memory: all of it, or one failure.

    Sections apply in order to the result of the ones before, so a patch may add a file and then update it.
    Rules: Add needs nothing at its path; Delete and Update need a regular file; a Move needs nothing at its
    destination (moving a file onto its own path is an update). A refusal of an Add over a file or a Move onto one
    says how to get the effect: an Update, or a Delete earlier in the patch. `show` names a path in a reason (the
    shell shows the caller's spelling of a path it has mapped).
    """
    tree = {path: _Node(files[path], path if isinstance(files[path], Text) else None) for path in patch.paths()}
    changes: list[Change] = []
    for number, section in enumerate(patch.sections, start=1):
        node = tree[section.path]
        if isinstance(section, AddFile):
            if not isinstance(node.state, Absent):
                reason = f"cannot add: {_OCCUPANTS[type(node.state)]} already exists there"
                if isinstance(node.state, Text):
                    where = show(section.path)
                    reason += (
                        f"; to change it, use '{UPDATE}{where}', or to replace it, put '{DELETE}{where}'"
                        " before this section"
                    )
                return PatchFailure(number, section.path, reason)
            tree[section.path] = _Node(Text(section.content), None)
            changes.append(Change(Action.ADDED, section.path))
            continue
        if not isinstance(node.state, Text):
            verb = "delete" if isinstance(section, DeleteFile) else "update"
            return PatchFailure(number, section.path, f"cannot {verb}: the path {_absent_reason(node.state)}")
        if isinstance(section, DeleteFile):
            tree[section.path] = _Node(Absent(), None)
            changes.append(Change(Action.DELETED, section.path))
            continue
        new = apply_hunks(section.path, node.state.content, section.hunks)
        if isinstance(new, HunkFailure):
            return PatchFailure(number, section.path, f"hunk {new.hunk}: {new.reason}", new.hunk)
        destination = section.move_to if section.move_to not in (None, section.path) else None
        if destination is None:
            tree[section.path] = _Node(Text(new), node.origin)
            changes.append(Change(Action.UPDATED, section.path))
            continue
        there = tree[destination].state
        if not isinstance(there, Absent):
            where = show(destination)
            reason = f"cannot move to {where}: {_OCCUPANTS[type(there)]} already exists there"
            if isinstance(there, Text):
                reason += f"; to replace it, put '{DELETE}{where}' before this section"
            return PatchFailure(number, section.path, reason)
        tree[destination] = _Node(Text(new), node.origin)
        tree[section.path] = _Node(Absent(), None)
        changes.append(Change(Action.MOVED, section.path, destination))
    writes: list[Write] = []
    removes: list[Remove] = []
    for path, node in tree.items():
        before = files[path]
        if isinstance(node.state, Text):
            if before != node.state or node.origin != path:
                writes.append(Write(path, node.state.content, node.origin))
        elif isinstance(node.state, Absent) and not isinstance(before, Absent):
            removes.append(Remove(path))
    return Plan(tuple(changes), tuple(writes), tuple(removes))
