"""The daemon protocol's sans-I/O parts: the line splitter under any chunking, request parsing, reply encoding."""

from __future__ import annotations

import json

from hypothesis import given
from hypothesis import strategies as st

from eukhe.daemon.protocol import (
    LineSplitter,
    Oversized,
    ProtocolFault,
    Request,
    encode_error,
    encode_event,
    encode_request,
    encode_result,
    parse_request,
)

LIMIT = 16
lines = st.lists(st.binary(max_size=40).map(lambda b: b.replace(b"\n", b"")), max_size=8)


def expected(items: list[bytes]) -> list[bytes | str]:
    """Each line whole if it fits the limit, else one oversized marker."""
    return [line if len(line) <= LIMIT else "oversized" for line in items]


def split(chunks: list[bytes]) -> list[bytes | str]:
    splitter = LineSplitter(LIMIT)
    out: list[bytes | str] = []
    for chunk in chunks:
        out.extend("oversized" if isinstance(item, Oversized) else item for item in splitter.feed(chunk))
    return out


@given(lines, st.data())
def test_the_splitter_gives_the_same_lines_under_any_chunking(items: list[bytes], data: st.DataObject) -> None:
    stream = b"".join(line + b"\n" for line in items)
    cuts = sorted(data.draw(st.lists(st.integers(0, len(stream)), max_size=6)))
    chunks = [stream[a:b] for a, b in zip([0, *cuts], [*cuts, len(stream)], strict=True)]
    assert split(chunks) == expected(items)
    assert split([stream]) == expected(items)
    assert split([bytes([b]) for b in stream]) == expected(items)


def test_a_line_exactly_at_the_limit_is_kept_and_one_past_it_is_oversized() -> None:
    assert split([b"a" * LIMIT + b"\n" + b"b" * (LIMIT + 1) + b"\nok\n"]) == [b"a" * LIMIT, "oversized", b"ok"]


def test_parse_request_accepts_the_wire_form_and_refuses_the_rest() -> None:
    assert parse_request(encode_request(3, "ping", {"a": 1}).rstrip(b"\n")) == Request(3, "ping", {"a": 1})
    assert parse_request(b'{"v":1,"id":"x","op":"status"}') == Request("x", "status", {})
    for line, code, request_id in (
        (b"", "malformed", None),
        (b"{", "malformed", None),
        (b"3", "malformed", None),
        (b'{"v":1,"op":"ping"}', "malformed", None),
        (b'{"v":1,"id":true,"op":"ping"}', "malformed", None),
        (b'{"v":1,"id":1}', "malformed", 1),
        (b'{"v":1,"id":1,"op":"ping","args":[]}', "malformed", 1),
        (b'{"v":1,"id":1,"op":"ping","extra":0}', "malformed", 1),
        (b'{"id":1,"op":"ping"}', "unsupported_version", 1),
    ):
        fault = parse_request(line)
        assert isinstance(fault, ProtocolFault), line
        assert (fault.code, fault.id) == (code, request_id)


def test_replies_are_one_json_line_each() -> None:
    for line in (encode_result(1, {"a": "é"}), encode_error(None, "x", "y"), encode_event(2, {"type": "snapshot"})):
        assert line.endswith(b"\n")
        assert line.count(b"\n") == 1
        assert json.loads(line)["v"] == 1
