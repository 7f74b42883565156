"""The file tools' records and their one entry for host requests: strict params, snake_case answers, typed refusals."""

from __future__ import annotations

import errno
import json
from pathlib import Path
from typing import Any

import msgspec
import pytest

from eukhe.errors import EukheError, error_code
from eukhe.fs import (
    REQUESTS,
    VERSION,
    EditAnswer,
    EditChange,
    FsContext,
    FsError,
    FsRefusal,
    ReadArgs,
    Reason,
    refusal,
    serve,
)
from eukhe.fs.errors import os_error
from eukhe.fs.serve import decode_args


def test_the_five_requests_are_served() -> None:
    assert sorted(REQUESTS) == ["fs.edit", "fs.glob", "fs.grep", "fs.read", "fs.write"]


@pytest.mark.parametrize(
    ("kind", "params"),
    [
        ("fs.read", {"path": "x", "bogus": 1}),  # an unknown key
        ("fs.read", {}),  # a missing key
        ("fs.read", {"path": 3}),  # a wrong type
        ("fs.read", {"path": "x", "offset": "2"}),  # strict: no string for a number
        ("fs.read", {"path": "x", "offset": 1.0}),
        ("fs.write", {"path": "x"}),
        ("fs.edit", {"patch": None}),
        ("fs.grep", {"pattern": "x", "glob": ["*.py"]}),
        ("fs.glob", {"pattern": "*", "path": None}),
        ("fs.delete", {"path": "x"}),  # no such tool
        ("fs.read", ["x"]),  # not an object
    ],
)
def test_params_of_the_wrong_shape_are_bad_requests(kind: str, params: Any) -> None:
    with pytest.raises(FsError) as caught:
        decode_args(kind, params)
    assert caught.value.reason is Reason.BAD_REQUEST and caught.value.version == VERSION


def test_defaults_of_the_optional_params() -> None:
    assert decode_args("fs.read", {"path": "x"}) == ReadArgs(path="x", offset=None, limit=None)
    grep = msgspec.to_builtins(decode_args("fs.grep", {"pattern": "x"}))
    assert grep == {"pattern": "x", "path": ".", "glob": None}
    assert msgspec.to_builtins(decode_args("fs.glob", {"pattern": "*"})) == {"pattern": "*", "path": "."}


def test_records_are_frozen_strict_and_keyword_only() -> None:
    args = ReadArgs(path="x")
    with pytest.raises(AttributeError):
        args.path = "y"  # type: ignore[misc]
    with pytest.raises(TypeError):
        ReadArgs("x")  # type: ignore[misc]
    with pytest.raises(msgspec.ValidationError):
        msgspec.json.decode(b'{"changes": [], "extra": 1}', type=EditAnswer)


def test_answers_are_plain_json_with_snake_case_keys(tmp_path: Path) -> None:
    (tmp_path / "f").write_text("a\n")
    answer = serve(FsContext(tmp_path), "fs.read", {"path": "f"})
    assert answer == {
        "output": {
            "text": "a\n",
            "bytes_kept": 2,
            "bytes_dropped": 0,
            "lines_kept": 1,
            "lines_dropped": 0,
            "notice": None,
            "artifact": None,
            "artifact_error": None,
            "text_base64": None,
            "artifact_bytes_dropped": 0,
        },
        "absolute": str(tmp_path.resolve() / "f"),
        "offset": 1,
        "lines": 1,
        "total_lines": 1,
    }
    edited = serve(FsContext(tmp_path), "fs.edit", {"patch": "*** Begin Patch\n*** Delete File: f\n*** End Patch"})
    deleted = {"action": "deleted", "path": str(tmp_path.resolve() / "f"), "destination": None}
    assert json.loads(json.dumps(edited)) == {"changes": [deleted]}  # builtins the json module writes as they are
    assert msgspec.json.encode(EditChange(action="moved", path="/a", destination="/b")) == (
        b'{"action":"moved","path":"/a","destination":"/b"}'
    )


def test_a_refusal_is_an_eukhe_error_and_a_record() -> None:
    error = FsError(Reason.OUTSIDE, "/etc/x", "/etc/x is outside every mount")
    assert isinstance(error, EukheError) and error_code(error) == "fs_error"
    assert (error.reason, error.path, error.version, str(error)) == (
        "outside",
        "/etc/x",
        "transport@1",
        "/etc/x is outside every mount",
    )
    assert refusal(error) == FsRefusal(
        reason="outside", path="/etc/x", message="/etc/x is outside every mount", version="transport@1"
    )


@pytest.mark.parametrize(
    ("number", "reason"),
    [
        (errno.ENOENT, Reason.NOT_FOUND),
        (errno.ENOTDIR, Reason.NOT_A_DIRECTORY),
        (errno.EISDIR, Reason.IS_A_DIRECTORY),
        (errno.EACCES, Reason.PERMISSION_DENIED),
        (errno.EPERM, Reason.PERMISSION_DENIED),
        (errno.ENAMETOOLONG, Reason.NAME_TOO_LONG),
        (errno.ELOOP, Reason.SYMLINK_LOOP),
        (errno.ENOSPC, Reason.IO_ERROR),
        (errno.EROFS, Reason.IO_ERROR),
    ],
)
def test_os_errors_map_to_reasons_naming_the_path(number: int, reason: Reason) -> None:
    error = os_error(OSError(number, "said"), "the/path", "write")
    assert (error.reason, error.path) == (reason, "the/path")
    assert error.message.startswith("cannot write the/path: said")
    if reason is Reason.IO_ERROR:
        assert errno.errorcode[number] in error.message
