"""The one reply reader (`eukhe.daemon.replies`) that every client of the daemon uses: what a reply line is for a
caller waiting on one request, its answer read as the op's record, and every way a reply can break the protocol."""

from __future__ import annotations

import json

import pytest

from eukhe.daemon.protocol import encode_error, encode_event, encode_result
from eukhe.daemon.replies import (
    EVENT,
    RESULT,
    SKIP,
    DaemonError,
    DaemonProtocolError,
    answer_as,
    decode_reply,
    reply_outcome,
)
from eukhe.records.daemon import CullAnswer, Pong


def outcome(line: bytes, request_id: int | str = 7, skip: str | None = None, answer: type | None = None) -> object:
    return reply_outcome(decode_reply(line), request_id, skip, answer)


def test_the_reply_reader_tells_an_event_an_answer_and_the_reply_to_skip() -> None:
    assert outcome(encode_event(7, {"type": "started", "job": "job-1", "kind": "bash"})) == (
        EVENT,
        {"type": "started", "job": "job-1", "kind": "bash"},
    )
    assert outcome(encode_result(7, {"pong": True})) == (RESULT, {"pong": True})
    assert outcome(encode_result("cancel-7", {"cancelling": True}), skip="cancel-7") == (SKIP, None)
    pong = Pong(pong=True, pid=3, version=1)
    assert outcome(encode_result(7, pong), answer=Pong) == (RESULT, pong)


def test_the_reply_reader_raises_the_daemons_refusal_with_its_code_field_and_details() -> None:
    with pytest.raises(DaemonError) as refused:
        outcome(encode_error(7, "session_has_jobs", "busy", "args.force", {"jobs": ["job-1"]}))
    error = refused.value
    assert (error.code, str(error), error.field, error.details()) == (
        "session_has_jobs",
        "busy",
        "args.force",
        {"jobs": ["job-1"]},
    )
    with pytest.raises(DaemonError) as unknown:
        outcome(encode_error(7, "no_such_code_anywhere", "odd"))
    assert unknown.value.code == "internal"


@pytest.mark.parametrize(
    "line",
    [
        b"",  # the connection closed
        b"{not json\n",
        b"[1, 2]\n",
        b"\xff\xfe\n",
    ],
)
def test_a_reply_that_is_not_a_json_object_breaks_the_protocol(line: bytes) -> None:
    with pytest.raises(DaemonProtocolError):
        decode_reply(line)


def test_a_reply_for_another_request_or_an_answer_of_the_wrong_shape_breaks_the_protocol() -> None:
    with pytest.raises(DaemonProtocolError, match="expected 7"):
        outcome(encode_result(8, {}))
    with pytest.raises(DaemonProtocolError, match="expected 7"):
        outcome(encode_result("cancel-7", {}))  # the cancel's answer, when the caller sent no cancel
    with pytest.raises(DaemonProtocolError, match="CullAnswer"):
        outcome(encode_result(7, {"idle": "yes"}), answer=CullAnswer)
    with pytest.raises(DaemonProtocolError):
        answer_as(json.loads('{"pong": true}'), Pong)
