"""Laws of eukhe.core.patch (`fs.edit`): the grammar round trip, diffs that apply, all-or-nothing plans,
and header paths the shell can map. Hypothesis over free inputs, and small scopes checked exhaustively."""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Mapping

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from eukhe.core.patch import (
    ADD,
    DELETE,
    MOVE,
    UPDATE,
    Absent,
    Action,
    AddFile,
    DeleteFile,
    Directory,
    FileState,
    Hunk,
    HunkFailure,
    HunkLine,
    Layout,
    Op,
    Patch,
    PatchFailure,
    PatchSyntaxError,
    Plan,
    Section,
    Special,
    Text,
    UpdateFile,
    apply_hunks,
    layout,
    parse,
    plan,
    render,
)
from tests.laws.patch_support import (
    LINE_ALPHABET,
    PADDING,
    diff_hunks,
    lines_st,
    marker_texts_st,
    padded,
    patches_st,
    paths_st,
    reads_as_marker,
)


def text_of(lines: list[str] | tuple[str, ...], shape: Layout) -> str:
    return shape.eol.join(lines) + (shape.eol if shape.final_newline and lines else "")


# --- the grammar: a printed patch parses back to itself ----------------------------------------------------------


@given(patches_st)
def test_patch_prints_and_parses_back(patch: Patch) -> None:
    text = render(patch)
    assert parse(text) == patch
    assert render(parse(text)) == text


@given(patches_st, st.sampled_from(["\n", "\r\n"]), st.integers(0, 2))
def test_patch_parses_back_with_crlf_and_blank_separators(patch: Patch, eol: str, blanks: int) -> None:
    """CRLF line endings and blank lines around sections and the markers do not change what a patch says."""
    lines = render(patch).splitlines()
    spaced: list[str] = []
    for line in lines:
        if line.startswith((ADD, DELETE, UPDATE, "*** End Patch", "@@")):
            spaced.extend([""] * blanks)
        spaced.append(line)
    assert parse(eol.join(spaced) + eol * blanks) == patch


@given(patches_st, st.data())
def test_patch_parses_back_with_padded_markers(patch: Patch, data: st.DataObject) -> None:
    """Whitespace before and after a marker or header line does not change what a patch says."""
    lines = render(patch).splitlines()
    markers = [line for line in lines if line.startswith("***")]
    assert all(reads_as_marker(line) for line in markers)  # what render prints as a marker reads as one
    spaced = [padded(line, data.draw(PADDING), data.draw(PADDING)) if line in markers else line for line in lines]
    assert parse("\n".join(spaced)) == patch


@given(marker_texts_st.filter(reads_as_marker), st.sampled_from(["", "x"]))
def test_patch_render_refuses_a_context_line_that_reads_as_a_marker(text: str, other: str) -> None:
    """Such a line would parse back as the marker; the same change said as a removal and an insertion parses back."""
    around = (HunkLine(Op.KEEP, other),) if other else ()
    kept = UpdateFile("f", (Hunk((*around, HunkLine(Op.KEEP, text), *around)),))
    with pytest.raises(ValueError, match="reads as a marker"):
        render(Patch((kept,)))
    said = UpdateFile("f", (Hunk((*around, HunkLine(Op.REMOVE, text), HunkLine(Op.INSERT, text), *around)),))
    assert parse(render(Patch((said,)))) == Patch((said,))


def test_patch_render_refuses_an_empty_patch() -> None:
    with pytest.raises(ValueError, match="changes nothing"):
        render(Patch(()))


PATCH_LINES = [
    "*** Begin Patch",
    "*** End Patch",
    "*** Add File: a",
    "*** Delete File: a",
    "*** Update File: a",
    "*** Move to: b",
    "*** End of File",
    "@@",
    "@@ x",
    "+x",
    "-x",
    " x",
    "",
    "x",
    "*** Add File: ",
    "@@x",
    " *** End Patch",
    "  *** Update File: a ",
    "\t*** Add File: a",
    " *** Delete File: a\t",
    " *** Move to: b",
    "  *** End of File",
    " *** Add File:",
    " *** Frob: a",
]


@given(st.lists(st.sampled_from(PATCH_LINES) | st.text(LINE_ALPHABET + "\r", max_size=5), max_size=10))
def test_patch_parse_is_total(lines: list[str]) -> None:
    """Any text either parses (and then prints and parses back to the same patch) or raises one PatchSyntaxError."""
    text = "\n".join(lines)
    outcome = parse_or_error(text)
    if isinstance(outcome, PatchSyntaxError):
        assert 1 <= outcome.line <= len(text.split("\n")) + 1
        assert str(outcome).startswith(f"patch line {outcome.line}: expected ")
    else:
        assert parse(render(outcome)) == outcome


def parse_or_error(text: str) -> Patch | PatchSyntaxError:
    try:
        return parse(text)
    except PatchSyntaxError as error:
        return error


def small_patch_texts() -> Iterator[str]:
    """Every patch body of up to 3 lines over the marker lines, wrapped in the begin and end markers."""
    for length in range(4):
        for body in itertools.product(PATCH_LINES[2:], repeat=length):
            yield "\n".join(["*** Begin Patch", *body, "*** End Patch"])


def outcome_of(text: str) -> Patch | tuple[int, str, str]:
    """The patch a text says, or where and why it is refused (the line, what was expected, the problem)."""
    outcome = parse_or_error(text)
    return outcome if isinstance(outcome, Patch) else (outcome.line, outcome.expected, outcome.problem)


@given(st.lists(st.sampled_from(PATCH_LINES) | st.text(LINE_ALPHABET + "\r", max_size=5), max_size=10), st.data())
def test_patch_outcome_is_the_same_with_padded_markers(lines: list[str], data: st.DataObject) -> None:
    """A marker or header line means what its trimmed form means, wherever it stands: padding it changes neither the
    patch read nor the line and reason of a refusal."""
    spaced = [padded(line, data.draw(PADDING), data.draw(PADDING)) for line in lines]
    assert outcome_of("\n".join(spaced)) == outcome_of(
        "\n".join(line.strip() if reads_as_marker(line) else line for line in lines)
    )


def test_patch_outcome_is_the_same_with_padded_markers_small_scope() -> None:
    for text in small_patch_texts():
        lines = text.split("\n")
        trimmed = "\n".join(line.strip() if reads_as_marker(line) else line for line in lines)
        assert outcome_of(text) == outcome_of(trimmed), text
        assert outcome_of("\n".join(padded(line, " \t", " ") for line in lines)) == outcome_of(trimmed), text


def test_patch_parse_is_total_small_scope() -> None:
    parsed = 0
    for text in small_patch_texts():
        outcome = parse_or_error(text)
        if isinstance(outcome, PatchSyntaxError):
            assert 1 <= outcome.line <= text.count("\n") + 2
            continue
        parsed += 1
        assert parse(render(outcome)) == outcome
    assert parsed > 50  # the scope reaches patches that parse, not only errors


@pytest.mark.parametrize(
    ("text", "line", "expected"),
    [
        ("", 1, "'*** Begin Patch'"),
        ("*** Begin Patch\n", 2, "a section header or '*** End Patch'"),
        ("*** Begin Patch\n*** Frob: a\n*** End Patch", 2, "a section header"),
        ("*** Begin Patch\n*** Add File: \n*** End Patch", 2, "a path after '*** Add File:'"),
        ("*** Begin Patch\n*** Update File: a\n*** End Patch", 3, "a hunk ('@@') or '*** Move to: NEWPATH'"),
        ("*** Begin Patch\n*** Update File: a\n@@\n*** End Patch", 4, "a hunk line"),
        ("*** Begin Patch\n*** Update File: a\n@@\n+x\nx\n*** End Patch", 5, "a hunk line, '@@'"),
        ("*** Begin Patch\n*** Update File: a\n@@x\n+x\n*** End Patch", 3, "'@@' or '@@ CONTEXT'"),
        ("*** Begin Patch\n*** Update File: a\n+x\n*** End of File\n+y\n*** End Patch", 5, "a hunk line, '@@'"),
        ("*** Begin Patch\n*** Delete File: a\n*** End Patch\nx", 4, "nothing after '*** End Patch'"),
        (" *** Begin Patch\n  *** Frob: a\n *** End Patch", 2, "a section header"),
        ("\t*** Begin Patch \n  *** Add File: \t\n*** End Patch", 2, "a path after '*** Add File:'"),
        ("*** Begin Patch\n *** Update File: a \n  *** End Patch", 3, "a hunk ('@@') or '*** Move to: NEWPATH'"),
        ("*** Begin Patch\n*** Update File: a\n@@\n  *** End Patch", 4, "a hunk line"),
        ("*** Begin Patch\n*** Update File: a\n+x\n *** End of File\n+y\n*** End Patch", 5, "a hunk line, '@@'"),
        (" *** Begin Patch\n*** Delete File: a\n *** End Patch \n x", 4, "nothing after '*** End Patch'"),
        ("*** Begin Patch\n*** End Patch", 2, "a section header"),
        ("\n *** Begin Patch\n\n  *** End Patch\n", 4, "a section header"),
    ],
)
def test_patch_syntax_errors_name_the_line_and_what_was_expected(text: str, line: int, expected: str) -> None:
    with pytest.raises(PatchSyntaxError) as caught:
        parse(text)
    assert caught.value.line == line
    assert caught.value.expected.startswith(expected)


def test_patch_with_no_sections_is_refused_as_changing_nothing() -> None:
    with pytest.raises(PatchSyntaxError) as caught:
        parse("*** Begin Patch\n*** End Patch\n")
    assert caught.value.problem == "the patch changes nothing"
    assert str(caught.value).startswith("patch line 2: expected a section header ('*** Add File: PATH'")
    with pytest.raises(PatchSyntaxError) as caught:
        parse("*** Begin Patch\n*** Frob\n*** End Patch\n")
    assert caught.value.problem == "the patch does not parse"


def test_patch_padded_markers_example() -> None:
    """Markers and headers as models write them, with whitespace around; hunk lines keep their exact text."""
    text = (
        " *** Begin Patch\n"
        "  *** Update File: foo.txt \n"
        "\t*** Move to: bar.txt\n"
        "  @@ ctx\n"  # not a hunk header: a context line ' @@ ctx'
        "-old\n"
        "+new\n"
        "   indented\n"
        " *** End of File\n"
        "  *** Add File:  spaced name.txt\t\n"
        "+ *** End Patch\n"
        " *** Delete File: gone.txt\n"
        " *** End Patch  \n"
    )
    assert parse(text) == Patch(
        (
            UpdateFile(
                "foo.txt",
                (
                    Hunk(
                        (
                            HunkLine(Op.KEEP, " @@ ctx"),
                            HunkLine(Op.REMOVE, "old"),
                            HunkLine(Op.INSERT, "new"),
                            HunkLine(Op.KEEP, "  indented"),
                        ),
                        None,
                        True,
                    ),
                ),
                "bar.txt",
            ),
            AddFile(" spaced name.txt", (" *** End Patch",)),
            DeleteFile("gone.txt"),
        )
    )


def test_patch_grammar_example() -> None:
    text = (
        "*** Begin Patch\n"
        "*** Add File: docs/new.md\n"
        "+# New\n"
        "+\n"
        "*** Delete File: old.txt\n"
        "*** Update File: src/app.py\n"
        "*** Move to: src/main.py\n"
        "@@ def main():\n"
        "-    run()\n"
        "+    run(fast=True)\n"
        "*** Update File: README\n"
        " intro\n"
        "+more\n"
        "*** End of File\n"
        "*** End Patch\n"
    )
    assert parse(text) == Patch(
        (
            AddFile("docs/new.md", ("# New", "")),
            DeleteFile("old.txt"),
            UpdateFile(
                "src/app.py",
                (Hunk((HunkLine(Op.REMOVE, "    run()"), HunkLine(Op.INSERT, "    run(fast=True)")), "def main():"),),
                "src/main.py",
            ),
            UpdateFile("README", (Hunk((HunkLine(Op.KEEP, "intro"), HunkLine(Op.INSERT, "more")), None, True),)),
        )
    )


# --- applying an update built from a diff of two texts gives the second text ------------------------------------

shapes = st.sampled_from([Layout("\n", True), Layout("\n", False), Layout("\r\n", True), Layout("\r\n", False)])


def in_domain(old: list[str], new: list[str], shape: Layout) -> bool:
    """Texts an update can connect: an update keeps the line ending and whether the text ends with a newline, and an
    empty text reads as LF-terminated (so a text that becomes empty, or starts empty, is LF with a final newline)."""
    old_text, new_text = text_of(old, shape), text_of(new, shape)
    return layout(old_text) == shape or not old or (layout(old_text).eol == shape.eol and not new_text)


def check_diff_applies(
    old: list[str], new: list[str], shape: Layout, *, context: int = 1, headers: bool = False, marks: bool = False
) -> None:
    old_text, new_text = text_of(old, shape), text_of(new, shape)
    source = layout(old_text)
    if source != shape:
        return  # a one-line text without a newline reads as LF; covered by the LF shapes
    hunks = diff_hunks(old_text, new_text, shape, context=context, headers=headers, end_marks=marks)
    if not hunks:
        assert old_text == new_text
        return
    section = parse(render(Patch((UpdateFile("f", tuple(hunks)),)))).sections[0]
    assert isinstance(section, UpdateFile)
    assert apply_hunks("f", old_text, section.hunks) == new_text


@given(
    st.lists(lines_st.filter(lambda line: "\r" not in line), max_size=8),
    st.lists(lines_st.filter(lambda line: "\r" not in line), max_size=8),
    shapes,
    st.tuples(st.integers(1, 3), st.booleans(), st.booleans()),
)
def test_patch_update_from_a_diff_gives_the_second_text(
    old: list[str], new: list[str], shape: Layout, options: tuple[int, bool, bool]
) -> None:
    assume(old or shape == Layout("\n", True))
    context, headers, marks = options
    check_diff_applies(old, new, shape, context=context, headers=headers, marks=marks)


@given(st.lists(st.sampled_from(["a", "b", "a ", " b", ""]), max_size=10), st.data())
def test_patch_update_from_a_diff_of_repetitive_texts(old: list[str], data: st.DataObject) -> None:
    """Repeated and whitespace-alike lines are where a first match can be the wrong one."""
    new = data.draw(st.lists(st.sampled_from(["a", "b", "a ", " b", ""]), max_size=10))
    assume(old)
    context, headers = data.draw(st.integers(1, 2)), data.draw(st.booleans())
    check_diff_applies(old, new, Layout("\n", True), context=context, headers=headers, marks=True)


@given(
    st.lists(st.sampled_from(["a", "b", "c"]), min_size=1, max_size=4),
    st.lists(st.sampled_from(["p", "q", "r", "s"]), min_size=3, max_size=5, unique=True),
    st.data(),
)
def test_patch_update_from_a_diff_of_a_repeated_block(block: list[str], gap: list[str], data: st.DataObject) -> None:
    """The same change to two copies of a block: two hunks with the same lines, each applied after the one before."""
    at = data.draw(st.integers(0, len(block) - 1))
    changed = [*block[:at], "X", *block[at + 1 :]]
    old, new = ["k", *block, "k", *gap, "k", *block, "k"], ["k", *changed, "k", *gap, "k", *changed, "k"]
    lf = Layout("\n", True)
    hunks = diff_hunks(text_of(old, lf), text_of(new, lf), lf)
    assert len(hunks) == 2  # one per copy; their lines also occur in the other copy
    headers, marks = data.draw(st.booleans()), data.draw(st.booleans())
    check_diff_applies(old, new, Layout("\n", True), headers=headers, marks=marks)


def test_patch_update_from_a_diff_small_scope() -> None:
    """Every pair of texts of up to 3 lines over three lines, every layout, context 1 and 2, with and without
    headers and end-of-file marks."""
    texts = [list(combo) for n in range(4) for combo in itertools.product(["a", "b", ""], repeat=n)]
    for old, new in itertools.product(texts, repeat=2):
        for shape in (Layout("\n", True), Layout("\n", False), Layout("\r\n", True), Layout("\r\n", False)):
            if not old and shape != Layout("\n", True):
                continue
            for context, headers, marks in itertools.product((1, 2), (False, True), (False, True)):
                check_diff_applies(old, new, shape, context=context, headers=headers, marks=marks)


def test_patch_context_matching_is_exact_then_trailing_then_surrounding_whitespace() -> None:
    hunk = Hunk((HunkLine(Op.REMOVE, "x = 1"), HunkLine(Op.INSERT, "x = 2")))
    assert apply_hunks("f", "x = 1\n", (hunk,)) == "x = 2\n"
    assert apply_hunks("f", "x = 1  \n", (hunk,)) == "x = 2\n"
    assert apply_hunks("f", "    x = 1\n", (hunk,)) == "x = 2\n"
    # The exact match wins over an earlier whitespace-alike one.
    assert apply_hunks("f", "x = 1 \nx = 1\n", (hunk,)) == "x = 1 \nx = 2\n"
    # A context header moves the search past it; a pure insertion goes right after its header, or at the end.
    after = Hunk((HunkLine(Op.REMOVE, "a"), HunkLine(Op.INSERT, "A")), "two")
    assert apply_hunks("f", "a\ntwo\na\n", (after,)) == "a\ntwo\nA\n"
    insert = Hunk((HunkLine(Op.INSERT, "new"),), "one")
    assert apply_hunks("f", "one\ntwo\n", (insert,)) == "one\nnew\ntwo\n"
    assert apply_hunks("f", "one\ntwo", (Hunk((HunkLine(Op.INSERT, "new"),)),)) == "one\ntwo\nnew"
    # End of file: the old lines must be the last ones.
    last = Hunk((HunkLine(Op.REMOVE, "a"),), None, True)
    assert apply_hunks("f", "a\nb\na\n", (last,)) == "a\nb\n"
    assert isinstance(apply_hunks("f", "a\nb\n", (last,)), HunkFailure)


# --- a failed hunk leaves nothing changed: a plan is all or nothing -----------------------------------------------

NAMES = ("a", "b", "c")
states_st = st.one_of(
    st.just(Absent()), st.builds(Text, st.text("xy\n", max_size=6)), st.just(Directory()), st.just(Special())
)


@st.composite
def small_sections(draw: st.DrawFn) -> Section:
    path = draw(st.sampled_from(NAMES))
    kind = draw(st.sampled_from(["add", "delete", "update", "move"]))
    if kind == "add":
        return AddFile(path, tuple(draw(st.lists(st.sampled_from("xy"), max_size=2))))
    if kind == "delete":
        return DeleteFile(path)
    hunk = Hunk(tuple(draw(st.lists(st.builds(HunkLine, st.sampled_from(Op), st.sampled_from("xy")), min_size=1))))
    move_to = draw(st.sampled_from(NAMES)) if kind == "move" else None
    return UpdateFile(path, (hunk,), move_to)


class RefusedError(Exception):
    def __init__(self, section: int) -> None:
        self.section = section


def reference(patch: Patch, files: Mapping[str, FileState]) -> dict[str, FileState]:
    """The patch run section by section on a copy of the tree: the independent reading of `plan`'s rules."""
    tree = dict(files)
    for number, section in enumerate(patch.sections, start=1):
        state = tree[section.path]
        if isinstance(section, AddFile):
            if state != Absent():
                raise RefusedError(number)
            tree[section.path] = Text("".join(line + "\n" for line in section.lines))
        elif not isinstance(state, Text):
            raise RefusedError(number)
        elif isinstance(section, DeleteFile):
            tree[section.path] = Absent()
        else:
            new = apply_hunks(section.path, state.content, section.hunks)
            if isinstance(new, HunkFailure):
                raise RefusedError(number)
            target = section.move_to or section.path
            if target != section.path:
                if tree[target] != Absent():
                    raise RefusedError(number)
                tree[section.path] = Absent()
            tree[target] = Text(new)
    return tree


def carry_out(files: Mapping[str, FileState], result: Plan) -> dict[str, FileState]:
    tree = dict(files)
    for write in result.writes:
        tree[write.path] = Text(write.content)
    for remove in result.removes:
        tree[remove.path] = Absent()
    return tree


def reference_or_refusal(patch: Patch, files: Mapping[str, FileState]) -> dict[str, FileState] | RefusedError:
    try:
        return reference(patch, files)
    except RefusedError as refused:
        return refused


@given(st.fixed_dictionaries(dict.fromkeys(NAMES, states_st)), st.lists(small_sections(), max_size=4))
def test_patch_plan_is_the_sections_in_order_or_one_failure(
    files: dict[str, FileState], sections: list[Section]
) -> None:
    patch = Patch(tuple(sections))
    result = plan(patch, files)
    expected = reference_or_refusal(patch, files)
    if isinstance(expected, RefusedError):
        assert isinstance(result, PatchFailure)
        assert result.section == expected.section
        assert result.path == sections[expected.section - 1].path
        return
    assert isinstance(result, Plan)
    assert carry_out(files, result) == expected
    touched = [w.path for w in result.writes] + [r.path for r in result.removes]
    assert len(touched) == len(set(touched)) and set(touched) <= set(patch.paths())
    assert [change.path for change in result.changes] == [s.path for s in sections]


@given(
    st.fixed_dictionaries(dict.fromkeys(NAMES, states_st)),
    st.lists(small_sections(), max_size=4),
    st.data(),
)
def test_patch_failed_hunk_leaves_nothing_changed(
    files: dict[str, FileState], sections: list[Section], data: st.DataObject
) -> None:
    """Put a hunk that cannot apply anywhere in a patch: the plan is a failure, so nothing is written or removed."""
    files = {**files, "f": Text("x\ny\n")}
    at = data.draw(st.integers(0, len(sections)))
    failing = UpdateFile("f", (Hunk((HunkLine(Op.REMOVE, "not there"),)),))
    patch = Patch((*sections[:at], failing, *sections[at:]))
    result = plan(patch, files)
    assert isinstance(result, PatchFailure)
    prefix = plan(Patch(tuple(sections[:at])), files)
    if isinstance(prefix, Plan) and all(s.path != "f" and getattr(s, "move_to", None) != "f" for s in sections[:at]):
        assert (result.section, result.path, result.hunk) == (at + 1, "f", 1)
        assert "not found" in result.reason


def test_patch_plan_refusals_say_why() -> None:
    files: dict[str, FileState] = {"a": Text("x\n"), "d": Directory(), "n": Absent(), "s": Special()}
    cases: list[tuple[Section, str]] = [
        (
            AddFile("a"),
            "cannot add: a file already exists there; to change it, use '*** Update File: <a>', or to replace it,"
            " put '*** Delete File: <a>' before this section",
        ),
        (AddFile("d"), "cannot add: a directory already exists there"),
        (AddFile("s"), "cannot add: something that is not a regular file already exists there"),
        (DeleteFile("n"), "cannot delete: the path does not exist"),
        (DeleteFile("d"), "cannot delete: the path is a directory"),
        (UpdateFile("s", (Hunk((HunkLine(Op.INSERT, "y"),)),)), "cannot update: the path is not a regular file"),
        (
            UpdateFile("a", (), "a2"),
            "cannot move to <a2>: a file already exists there; to replace it, put '*** Delete File: <a2>' before"
            " this section",
        ),
        (UpdateFile("a", (), "d"), "cannot move to <d>: a directory already exists there"),
        (UpdateFile("a", (), "s"), "cannot move to <s>: something that is not a regular file already exists there"),
    ]
    for section, reason in cases:
        result = plan(Patch((section,)), {**files, "a2": Text("y\n")}, show=lambda path: f"<{path}>")
        assert isinstance(result, PatchFailure)
        assert (result.section, result.path, result.reason) == (1, section.path, reason)


def test_patch_plan_refusals_say_how_to_get_the_effect() -> None:
    """What the refusals of an Add over a file and a Move onto one advise does apply."""
    files: dict[str, FileState] = {"a": Text("x\n"), "b": Text("y\n")}
    replaced = plan(Patch((DeleteFile("a"), AddFile("a", ("new",)))), files)
    assert isinstance(replaced, Plan) and carry_out(files, replaced) == {"a": Text("new\n"), "b": Text("y\n")}
    changed = plan(Patch((UpdateFile("a", (Hunk((HunkLine(Op.REMOVE, "x"), HunkLine(Op.INSERT, "new"))),)),)), files)
    assert isinstance(changed, Plan) and carry_out(files, changed) == {"a": Text("new\n"), "b": Text("y\n")}
    moved = plan(Patch((DeleteFile("b"), UpdateFile("a", (), "b"))), files)
    assert isinstance(moved, Plan) and carry_out(files, moved) == {"a": Absent(), "b": Text("x\n")}


def test_patch_plan_keeps_the_mode_origin_of_updated_and_moved_files() -> None:
    files: dict[str, FileState] = {"a": Text("x\n"), "b": Absent(), "c": Text("z\n")}
    patch = parse(
        "*** Begin Patch\n*** Update File: a\n*** Move to: b\n@@\n-x\n+y\n"
        "*** Update File: c\n@@\n-z\n+w\n*** Add File: a\n+new\n*** End Patch"
    )
    result = plan(patch, files)
    assert isinstance(result, Plan)
    assert [(c.action, c.path, c.destination) for c in result.changes] == [
        (Action.MOVED, "a", "b"),
        (Action.UPDATED, "c", None),
        (Action.ADDED, "a", None),
    ]
    assert {(w.path, w.content, w.mode_from) for w in result.writes} == {
        ("a", "new\n", None),
        ("b", "y\n", "a"),
        ("c", "w\n", "c"),
    }
    assert result.removes == ()


# --- header paths are exactly what the parser reports, so the path map can map them ------------------------------


def expected_paths(patch: Patch) -> list[str]:
    found: list[str] = []
    for section in patch.sections:
        for path in (section.path, getattr(section, "move_to", None)):
            if path is not None and path not in found:
                found.append(path)
    return found


@given(patches_st)
def test_patch_header_paths_are_what_the_parser_reports(patch: Patch) -> None:
    parsed = parse(render(patch))
    assert list(parsed.paths()) == expected_paths(patch)
    headers = [line for line in render(patch).splitlines() if line.startswith((ADD, DELETE, UPDATE, MOVE))]
    reported = [line.split(": ", 1)[1] for line in headers]
    assert set(reported) == set(parsed.paths())


@given(patches_st)
def test_patch_map_paths_maps_every_header_path_and_nothing_else(patch: Patch) -> None:
    def to(path: str) -> str:
        return "/host/" + path

    mapped = patch.map_paths(to)
    assert mapped.paths() == tuple(to(path) for path in patch.paths())
    before, after = render(patch).splitlines(), render(mapped).splitlines()
    assert len(before) == len(after)
    for old, new in zip(before, after, strict=True):
        marker = next((m for m in (ADD, DELETE, UPDATE, MOVE) if old.startswith(m)), None)
        assert new == (old if marker is None else marker + to(old[len(marker) :]))


@given(paths_st)
def test_patch_header_path_is_taken_as_written(path: str) -> None:
    text = f"*** Begin Patch\n*** Delete File: {path}\n*** Update File: {path}\n*** Move to: {path}\n*** End Patch"
    assert parse(text).sections == (DeleteFile(path), UpdateFile(path, (), path))
