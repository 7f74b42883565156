"""The journal: one line per commit of typed records, fdatasynced; a torn last line is skipped with a diagnostic,
never fatal; a journal of another format is refused; the header is read from the first line alone."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from eukhe.records.journal import (
    JOURNAL_FORMAT,
    DocPut,
    DocRetire,
    EntryRecord,
    JournalRecord,
    LeafRecord,
    SessionHeader,
)
from eukhe.records.settings import SessionSettings
from eukhe.store.journal import (
    PREALLOCATE_MIN,
    Journal,
    JournalError,
    JournalFormatError,
    encode_commit,
    parse_journal,
    read_header,
    read_journal,
)
from eukhe.store.tree import Trees, UnknownEntryError, fold, state_after

HEADER = SessionHeader(format=JOURNAL_FORMAT, id="s", cwd="/w", settings=SessionSettings())


def entry(entry_id: str, parent: str | None = None, content: object = "x") -> EntryRecord:
    return EntryRecord(id=entry_id, parent=parent, kind="user", content=content)


records: st.SearchStrategy[list[JournalRecord]] = st.lists(
    st.one_of(
        st.builds(entry, st.text("abc", min_size=1, max_size=3), st.none(), st.text(max_size=5)),
        st.builds(LeafRecord, id=st.one_of(st.none(), st.text("ab", max_size=2))),
        st.builds(DocPut, type=st.just("t"), key=st.text(max_size=3), value=st.integers()),
        st.builds(DocRetire, type=st.just("t"), key=st.text(max_size=3)),
    ),
    max_size=4,
)


@given(st.lists(records, max_size=6), st.integers(min_value=0, max_value=200))
def test_a_torn_last_line_is_skipped_and_every_whole_commit_reads(batches: list[list[JournalRecord]], cut: int) -> None:
    data = b"".join(encode_commit(seq, batch) for seq, batch in enumerate(batches, start=1))
    whole = parse_journal(data)
    assert [list(c.records) for c in whole.commits] == batches
    assert whole.diagnostics == ()
    torn = data[: max(0, len(data) - cut)]
    read = parse_journal(torn)
    complete = torn.count(b"\n")
    assert [list(c.records) for c in read.commits] == batches[:complete]
    assert len(read.diagnostics) == (0 if torn.endswith(b"\n") or not torn else 1)


def test_reader_survives_a_torn_last_line_on_disk_and_the_next_commit_reads_whole(tmp_path: Path) -> None:
    path = tmp_path / "main.jsonl"
    journal = Journal(path)
    journal.commit([entry("a")])
    journal.commit([entry("b")])
    journal.close()
    with open(path, "ab") as handle:
        handle.write(b'{"seq":3,"records":[{"t":"ent')  # a crash mid-write
    read = read_journal(path)
    assert [c.seq for c in read.commits] == [1, 2]
    assert len(read.diagnostics) == 1
    assert "torn last line" in read.diagnostics[0].reason
    again = Journal(path, next_seq=3)
    again.commit([entry("c")])
    again.close()
    read = read_journal(path)
    assert [c.seq for c in read.commits] == [1, 2, 3]
    ids = [r.id for c in read.commits for r in c.records if isinstance(r, EntryRecord)]
    assert ids == ["a", "b", "c"]
    assert len(read.diagnostics) == 1
    assert "unreadable" in read.diagnostics[0].reason


def test_a_commit_is_one_line_of_snake_case_records_and_the_file_is_private(tmp_path: Path) -> None:
    path = tmp_path / "main.jsonl"
    journal = Journal(path)
    seen = []
    journal.observers.append(seen.append)
    journal.commit([HEADER, entry("a")])
    journal.close()
    data = path.read_bytes()
    assert data.count(b"\n") == 1
    assert json.loads(data)["records"][0]["settings"]["tool_blocking_budget_ms"] == 30_000
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert [c.seq for c in seen] == [1]


def test_a_record_that_cannot_be_encoded_commits_nothing(tmp_path: Path) -> None:
    journal = Journal(tmp_path / "main.jsonl")
    with pytest.raises(JournalError):
        journal.commit([DocPut(type="t", key="k", value="\udcff")])  # a lone surrogate is not UTF-8
    with pytest.raises(JournalError):
        journal.commit([DocPut(type="t", key="k", value=float("nan"))])
    journal.commit([LeafRecord(id=None)])
    journal.close()
    assert [c.seq for c in read_journal(tmp_path / "main.jsonl").commits] == [1]


def test_the_header_is_read_from_the_first_line_alone(tmp_path: Path) -> None:
    path = tmp_path / "main.jsonl"
    journal = Journal(path)
    journal.commit([HEADER])
    journal.close()
    with open(path, "ab") as handle:
        handle.write(b"not a commit at all\n" * 3)
    assert read_header(path) == HEADER
    assert len(read_journal(path).diagnostics) == 3


def test_a_journal_of_an_older_format_is_refused_with_a_clear_message(tmp_path: Path) -> None:
    path = tmp_path / "main.jsonl"
    old = {"seq": 1, "records": [{"t": "session", "id": "s", "cwd": "/w", "settings": {"toolBlockingBudgetMs": 5}}]}
    path.write_text(json.dumps(old) + "\n")
    with pytest.raises(JournalFormatError) as refused:
        read_journal(path)
    assert "format None" in str(refused.value) or "format" in str(refused.value)
    newer = {"seq": 1, "records": [{"t": "session", "format": 3, "id": "s", "cwd": "/w", "settings": {}, "new": 1}]}
    path.write_text(json.dumps(newer) + "\n")
    with pytest.raises(JournalFormatError, match="format 3"):
        read_header(path)
    with pytest.raises(JournalFormatError, match="format 3"):
        read_journal(path)
    # A header of another format that decodes as this one's (the same fields) is refused all the same.
    for other in (1, 3):
        same_shape = msgspec.structs.replace(HEADER, format=other)
        path.write_bytes(encode_commit(1, [same_shape]))
        with pytest.raises(JournalFormatError, match=f"format {other}"):
            read_header(path)
        with pytest.raises(JournalFormatError, match=f"format {other}"):
            read_journal(path)


def test_the_state_just_after_any_entry_is_the_fold_up_to_its_commit() -> None:
    commits: list[tuple[int, list[JournalRecord]]] = [
        (1, [HEADER]),
        (2, [entry("e1", None, "hi")]),
        (3, [DocPut(type="eukhe.job", key="j1", value={})]),
        (4, [EntryRecord(id="e2", parent="e1", kind="assistant", content="ok")]),
        (5, [DocRetire(type="eukhe.job", key="j1")]),
        (6, [DocRetire(type="eukhe.job", key="absent")]),
        (7, [LeafRecord(id="e1")]),
    ]
    assert dict(state_after(commits, "e1").documents) == {}
    assert dict(state_after(commits, "e2").documents) == {("eukhe.job", "j1"): {}}
    assert dict(state_after(commits, None).documents) == {}
    with pytest.raises(UnknownEntryError):
        state_after(commits, "nope")
    trees: Trees = fold(commits)
    assert trees.leaf == "e1"
    assert dict(trees.documents) == {}
    assert [e.id for e in trees.path_to("e2")] == ["e1", "e2"]


# ---- zeros written ahead (preallocated space) ----------------------------------------------------------------------


def test_commits_overwrite_zeros_written_ahead_and_a_clean_close_cuts_them_off(tmp_path: Path) -> None:
    path = tmp_path / "main.jsonl"
    journal = Journal(path)
    journal.commit([HEADER])
    size = os.path.getsize(path)
    assert size == PREALLOCATE_MIN > journal.end  # zeros past the commits, on disk
    assert path.read_bytes()[journal.end :] == bytes(size - journal.end)
    journal.commit([entry("a")])
    assert os.path.getsize(path) == size  # a commit that fits changes no size: its fdatasync flushes data alone
    expected = encode_commit(1, [HEADER]) + encode_commit(2, [entry("a")])
    assert path.read_bytes()[: journal.end] == expected
    assert read_journal(path).diagnostics == ()  # a reader of the open journal ignores the zeros
    journal.close()
    assert path.read_bytes() == expected


def test_the_zeros_grow_ahead_of_long_commits_and_every_commit_reads_back(tmp_path: Path) -> None:
    path = tmp_path / "main.jsonl"
    journal = Journal(path)
    sizes = set()
    for index in range(40):
        journal.commit([entry(f"e{index}", content="x" * (index * 500))])
        sizes.add(os.path.getsize(path))
        assert os.path.getsize(path) >= journal.end
    assert len(sizes) > 2  # it grew several times, each time ahead of the commit
    read = read_journal(path)
    assert [c.seq for c in read.commits] == list(range(1, 41))
    assert read.diagnostics == ()
    journal.close()
    assert [c.seq for c in read_journal(path).commits] == list(range(1, 41))


def test_a_journal_left_with_its_zeros_reopens_past_its_last_commit(tmp_path: Path) -> None:
    path = tmp_path / "main.jsonl"
    first = encode_commit(1, [entry("a")])
    path.write_bytes(first + bytes(100_000))  # as a crash leaves it: the commits, then the zeros written ahead
    journal = Journal(path, next_seq=2)
    assert journal.end == len(first)
    journal.commit([entry("b")])
    journal.close()
    assert path.read_bytes() == first + encode_commit(2, [entry("b")])


def test_a_torn_commit_followed_by_zeros_is_the_torn_last_line_and_the_next_commit_reads_whole(tmp_path: Path) -> None:
    path = tmp_path / "main.jsonl"
    first = encode_commit(1, [entry("a")])
    path.write_bytes(first + b'{"seq":2,"records":[{"t":"en' + bytes(5000))
    read = read_journal(path)
    assert [c.seq for c in read.commits] == [1]
    assert [d.reason for d in read.diagnostics] == ["torn last line (no newline): ignored"]
    journal = Journal(path, next_seq=2)
    journal.commit([entry("b")])
    read = read_journal(path)  # open: the zeros are still there, after the new commit
    assert [c.seq for c in read.commits] == [1, 2]
    assert len(read.diagnostics) == 1
    assert "unreadable" in read.diagnostics[0].reason
    journal.close()


@given(st.lists(records, max_size=6), st.integers(min_value=0, max_value=200), st.integers(0, 3000))
def test_zeros_after_any_cut_change_nothing_the_reader_says(
    batches: list[list[JournalRecord]], cut: int, zeros: int
) -> None:
    data = b"".join(encode_commit(seq, batch) for seq, batch in enumerate(batches, start=1))
    torn = data[: max(0, len(data) - cut)]
    assert parse_journal(torn + bytes(zeros)) == parse_journal(torn)
