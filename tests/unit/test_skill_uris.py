"""A skill file's URI names it back exactly: `skill://<name>/<relative path>` survives the SDK's URL type (the form
a client sends in `resources/read`), whatever characters the path holds."""

from __future__ import annotations

import mcp_types as types
from hypothesis import given
from hypothesis import strategies as st

from eukhe.mcp.resources import parse_skill_uri, skill_uri

NAMES = st.from_regex(r"[a-z0-9]+(-[a-z0-9]+)*", fullmatch=True).filter(lambda name: len(name) <= 64)
SEGMENT = st.text(
    alphabet=st.characters(blacklist_categories=("Cs", "Cc"), blacklist_characters="/"), min_size=1, max_size=12
).filter(lambda part: part not in (".", ".."))
PATHS = st.lists(SEGMENT, min_size=1, max_size=4).map("/".join)


@given(NAMES, PATHS)
def test_skill_uri_round_trips_through_the_sdks_url(name: str, relative: str) -> None:
    uri = skill_uri(name, relative)
    assert parse_skill_uri(uri) == (name, relative)
    sent = str(types.ReadResourceRequestParams(uri=uri).uri)
    assert parse_skill_uri(sent) == (name, relative)


def test_skill_uri_refuses_other_uris() -> None:
    for uri in ("eukhe://session/calls", "skill://", "skill://name", "skill://name/", "file:///etc/passwd"):
        assert parse_skill_uri(uri) is None
