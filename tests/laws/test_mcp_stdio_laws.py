"""Laws of what `eukhe mcp` answers on stdio to a line that is no message (`eukhe.core.mcp_stdio`).

The references are written from the rules in the module's docstring, not from its code: every kind of unreadable
line, and every JSON value Hypothesis makes as the value of one that is no message.
"""

from __future__ import annotations

from hypothesis import example, given
from hypothesis import strategies as st

from eukhe.core.mcp_stdio import INVALID_REQUEST, PARSE_ERROR, Unreadable, blank, refusal

JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda inner: st.lists(inner) | st.dictionaries(st.text(), inner),
)


def test_refusal_a_line_not_json_is_a_parse_error_with_id_null() -> None:
    refused = refusal(Unreadable.NOT_JSON, detail="expected value at line 1 column 1")
    assert (refused.code, refused.request_id) == (PARSE_ERROR, None)
    assert refused.message.startswith("Parse error") and "expected value" in refused.message


def test_refusal_a_line_too_long_is_an_invalid_request_with_id_null() -> None:
    refused = refusal(Unreadable.TOO_LONG, {"id": 3}, detail="over 8 bytes")
    assert (refused.code, refused.request_id) == (INVALID_REQUEST, None), "a line dropped unread has no id"
    assert refused.message.startswith("Invalid Request") and "over 8 bytes" in refused.message


@given(JSON_VALUES | st.dictionaries(st.just("id"), JSON_VALUES))
@example({"jsonrpc": "2.0", "id": 7})
@example({"jsonrpc": "2.0", "id": "a"})
@example({"jsonrpc": "2.0", "id": True})
@example([{"jsonrpc": "2.0", "id": 8, "method": "ping"}])
def test_refusal_json_that_is_no_message_is_an_invalid_request_with_the_id_it_may_have(value: object) -> None:
    refused = refusal(Unreadable.NOT_A_MESSAGE, value)
    given_id = value.get("id") if isinstance(value, dict) else None
    kept = isinstance(given_id, str) or (isinstance(given_id, int) and not isinstance(given_id, bool))
    assert refused.code == INVALID_REQUEST
    assert refused.request_id == (given_id if kept else None)
    assert refused.message.startswith("Invalid Request")


@given(st.binary())
@example(b"\n")
@example(b" \t\r\n")
@example(b"{}\n")
def test_blank_is_a_line_of_whitespace_only(line: bytes) -> None:
    assert blank(line) is (line.strip() == b"")
