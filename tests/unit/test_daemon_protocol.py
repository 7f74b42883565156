"""The daemon protocol's sans-I/O parts: strict request parsing that names the field at fault, reply encoding."""

from __future__ import annotations

import json

from hypothesis import given
from hypothesis import strategies as st

from eukhe.core.lines import Line
from eukhe.daemon.protocol import (
    HEAD_BYTES,
    MAX_LINE_READ_BYTES,
    ProtocolFault,
    Request,
    encode_error,
    encode_event,
    encode_request,
    encode_result,
    head_id,
    parse_request,
    request_splitter,
)
from eukhe.records.daemon import BashArgs, NoArgs


def test_parse_request_accepts_the_wire_form_and_refuses_the_rest() -> None:
    assert parse_request(encode_request(3, "ping").rstrip(b"\n")) == Request(3, "ping", NoArgs())
    assert parse_request(b'{"v":1,"id":"x","op":"status"}') == Request("x", "status", NoArgs())
    bash = b'{"v":1,"id":2,"op":"bash","args":{"session":"s","command":"true","budget_ms":5}}'
    assert parse_request(Line(bash)) == Request(2, "bash", BashArgs(session="s", command="true", budget_ms=5))
    for line, code, request_id, field in (
        (b"", "malformed", None, None),
        (b"{", "malformed", None, None),
        (b"3", "malformed", None, None),
        (b'{"v":1,"op":"ping"}', "malformed", None, "id"),
        (b'{"v":1,"id":true,"op":"ping"}', "malformed", None, "id"),
        (b'{"v":1,"id":1}', "malformed", 1, "op"),
        (b'{"v":1,"id":1,"op":"ping","args":[]}', "bad_args", 1, "args"),
        (b'{"v":1,"id":1,"op":"ping","extra":0}', "malformed", 1, "extra"),
        (b'{"id":1,"op":"ping"}', "malformed", 1, "v"),
        (b'{"v":2,"id":1,"op":"ping","new":0}', "unsupported_version", 1, "v"),
        (b'{"v":1,"id":1,"op":"nope"}', "unknown_op", 1, "op"),
        (b'{"v":1,"id":1,"op":"ping","args":{"x":1}}', "bad_args", 1, "args.x"),
        (
            b'{"v":1,"id":1,"op":"bash","args":{"session":"s","command":"c","budgetMs":1}}',
            "bad_args",
            1,
            "args.budgetMs",
        ),
        (b'{"v":1,"id":1,"op":"bash","args":{"session":"s"}}', "bad_args", 1, "args.command"),
        (
            b'{"v":1,"id":1,"op":"bash","args":{"session":"s","command":"c","budget_ms":"5"}}',
            "bad_args",
            1,
            "args.budget_ms",
        ),
    ):
        fault = parse_request(line)
        assert isinstance(fault, ProtocolFault), line
        assert (fault.code, fault.id, fault.field) == (code, request_id, field), (line, fault)


def test_a_known_camel_case_spelling_gets_a_hint() -> None:
    fault = parse_request(b'{"v":1,"id":1,"op":"bash","args":{"session":"s","command":"c","budgetMs":1}}')
    assert isinstance(fault, ProtocolFault)
    assert "unknown field args.budgetMs (did you mean budget_ms?)" in fault.message


def test_an_oversized_line_is_refused_under_the_id_its_head_shows_else_none() -> None:
    padding = b"x" * (MAX_LINE_READ_BYTES + 1)
    for line, request_id in (
        (padding, None),
        (encode_request(41, "fs.write", {"content": padding.decode()}), 41),
        (encode_request("call-7", "bash", {"command": padding.decode()}), "call-7"),
        (b'{"id":5,"v":1,"args":{"pad":"' + padding, 5),
        (b'{"args":{"id":5,"pad":"' + padding, None),  # an id inside args is not the request's
        (b'{"v":1,"id":true,"pad":"' + padding, None),
        (b'{"v":1,"id":"' + b"i" * 129 + b'","pad":"' + padding, None),  # longer than an id may be
    ):
        (piece,) = request_splitter().feed(line.rstrip(b"\n") + b"\n")
        fault = parse_request(piece)
        assert isinstance(fault, ProtocolFault)
        assert (fault.code, fault.id) == ("oversized", request_id), line[:60]


@given(st.binary(max_size=HEAD_BYTES))
def test_an_oversized_lines_head_is_read_without_error(head: bytes) -> None:
    found = head_id(head)
    assert found is None or isinstance(found, int | str)


def test_a_line_at_the_read_limit_is_parsed_and_one_past_it_is_oversized() -> None:
    at_limit = b"x" * MAX_LINE_READ_BYTES
    codes = []
    for line in (at_limit, at_limit + b"x"):
        (piece,) = request_splitter().feed(line + b"\n")
        fault = parse_request(piece)
        assert isinstance(fault, ProtocolFault)
        codes.append(fault.code)
    assert codes == ["malformed", "oversized"]


def test_replies_are_one_json_line_each() -> None:
    for line in (encode_result(1, {"a": "é"}), encode_error(None, "internal", "y"), encode_event(2, {"type": "x"})):
        assert line.endswith(b"\n")
        assert line.count(b"\n") == 1
        assert json.loads(line)["v"] == 1
    assert json.loads(encode_error(3, "bad_args", "m", "args.x"))["error"] == {
        "code": "bad_args",
        "message": "m",
        "field": "args.x",
        "details": None,
    }
