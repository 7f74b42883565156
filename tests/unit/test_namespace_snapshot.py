"""The stub's namespace snapshot (eukhe_kernel/snapshot.py): what it keeps, skips and names, and that a snapshot
that does not load costs nothing but itself."""

from __future__ import annotations

import os
import pickle
import stat
import threading
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from eukhe_kernel import snapshot

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=5), inner, max_size=4),
    max_leaves=12,
)
names = st.from_regex(r"[a-z][a-z0-9_]{0,8}", fullmatch=True).filter(lambda name: name not in snapshot.STUB_NAMES)


@settings(max_examples=50, deadline=None)
@given(values=st.dictionaries(names, json_values, max_size=8))
def test_what_pickles_comes_back_as_it_was(values: dict[str, Any], tmp_path_factory: pytest.TempPathFactory) -> None:
    path = str(tmp_path_factory.mktemp("snap") / "namespace.pickle")
    saved, skipped = snapshot.save({**values, "_private": 1, "rlm": object()}, path)
    assert saved == sorted(values) and skipped == []
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    fresh: dict[str, Any] = {}
    assert snapshot.restore(fresh, path) == (sorted(values), [])
    assert fresh == values
    assert not os.path.exists(path), "a snapshot is read once"
    assert snapshot.restore(fresh, path) is None


class Local:
    """A class as a cell defines it: pickled by reference to a module the next kernel does not have."""


def test_functions_classes_and_what_does_not_pickle_are_named_and_modules_come_back_by_name(tmp_path: Path) -> None:
    path = str(tmp_path / "namespace.pickle")
    namespace: dict[str, Any] = {
        "x": 41,
        "os_alias": os,
        "lock": threading.Lock(),
        "helper": lambda: 1,
        "Kind": Local,
        "thing": Local(),
    }
    saved, skipped = snapshot.save(namespace, path)
    assert saved == ["os_alias", "thing", "x"]
    assert skipped == ["Kind", "helper", "lock"]
    payload = pickle.loads(Path(path).read_bytes())
    payload["modules"]["gone"] = "no_such_module_anywhere"
    payload["values"]["thing"] = payload["values"]["thing"].replace(b"Local", b"Lost_")  # its class is not there
    Path(path).write_bytes(pickle.dumps(payload))
    fresh: dict[str, Any] = {}
    restored, failed = snapshot.restore(fresh, path) or ([], [])
    assert sorted(restored) == ["os_alias", "x"] and sorted(failed) == ["gone", "thing"]
    assert fresh == {"os_alias": os, "x": 41}


def test_a_snapshot_over_the_bound_skips_what_would_pass_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(snapshot, "MAX_SNAPSHOT_BYTES", 1000)
    saved, skipped = snapshot.save({"a": b"x" * 600, "b": b"y" * 600, "c": 1}, str(tmp_path / "n"))
    assert saved == ["a", "c"] and skipped == ["b"]


@pytest.mark.parametrize("content", [b"not a pickle", pickle.dumps({"format": "other", "values": {}}), b""])
def test_a_file_that_is_not_a_snapshot_restores_nothing_and_is_removed(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "namespace.pickle"
    path.write_bytes(content)
    fresh: dict[str, Any] = {}
    restored, failed = snapshot.restore(fresh, str(path)) or (None, None)
    assert restored == [] and failed and fresh == {}
    assert not path.exists()
