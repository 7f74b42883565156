"""The journal: one line per commit, fsynced; a torn last line is skipped with a diagnostic, never fatal."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from eukhe.session.journal import Journal, JournalError, encode_commit, parse_journal, read_journal
from eukhe.session.tree import Trees, UnknownEntryError, fold, state_after

records = st.lists(
    st.dictionaries(st.sampled_from(["t", "a", "b"]), st.one_of(st.integers(), st.text(max_size=5)), max_size=3),
    max_size=4,
)


@given(st.lists(records, max_size=6), st.integers(min_value=0, max_value=200))
def test_a_torn_last_line_is_skipped_and_every_whole_commit_reads(batches: list[list[dict]], cut: int) -> None:
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
    journal.commit([{"t": "entry", "id": "a"}])
    journal.commit([{"t": "entry", "id": "b"}])
    journal.close()
    with open(path, "ab") as handle:
        handle.write(b'{"seq":3,"records":[{"t":"ent')  # a crash mid-write
    read = read_journal(path)
    assert [c.seq for c in read.commits] == [1, 2]
    assert len(read.diagnostics) == 1
    assert "torn last line" in read.diagnostics[0].reason
    again = Journal(path, next_seq=3)
    again.commit([{"t": "entry", "id": "c"}])
    again.close()
    read = read_journal(path)
    assert [c.seq for c in read.commits] == [1, 2, 3]
    assert [c.records[0]["id"] for c in read.commits] == ["a", "b", "c"]
    assert len(read.diagnostics) == 1
    assert "unreadable" in read.diagnostics[0].reason


def test_a_commit_is_one_line_and_the_file_is_private(tmp_path: Path) -> None:
    path = tmp_path / "main.jsonl"
    journal = Journal(path)
    seen = []
    journal.observers.append(seen.append)
    journal.commit([{"t": "a"}, {"t": "b"}])
    journal.close()
    assert path.read_bytes().count(b"\n") == 1
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert [c.seq for c in seen] == [1]


def test_a_record_that_cannot_be_encoded_commits_nothing(tmp_path: Path) -> None:
    journal = Journal(tmp_path / "main.jsonl")
    with pytest.raises(JournalError):
        journal.commit([{"t": "doc", "value": "\udcff"}])  # a lone surrogate is not UTF-8
    with pytest.raises(JournalError):
        journal.commit([{"t": "doc", "value": float("nan")}])
    journal.commit([{"t": "ok"}])
    journal.close()
    assert [c.seq for c in read_journal(tmp_path / "main.jsonl").commits] == [1]


def test_the_state_just_after_any_entry_is_the_fold_up_to_its_commit() -> None:
    commits = [
        (1, [{"t": "session", "id": "s"}]),
        (2, [{"t": "entry", "id": "e1", "parent": None, "kind": "user", "content": "hi"}]),
        (3, [{"t": "doc", "op": "put", "type": "eukhe.job", "key": "j1", "value": {}}]),
        (4, [{"t": "entry", "id": "e2", "parent": "e1", "kind": "assistant", "content": "ok"}]),
        (5, [{"t": "doc", "op": "retire", "type": "eukhe.job", "key": "j1"}]),
        (6, [{"t": "doc", "op": "retire", "type": "eukhe.job", "key": "absent"}]),
        (7, [{"t": "leaf", "id": "e1"}]),
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
