"""eukhe's own secrets are left out of an environment, and nothing else is."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from eukhe.core.own_secrets import MCP_TOKEN, OWN_SECRETS, without_own_secrets

NAMES = st.sampled_from([MCP_TOKEN, "PATH", "HOME", "EUKHE_MCP_TOKEN_FILE", "eukhe_mcp_token"]) | st.text(max_size=8)


@given(st.dictionaries(NAMES, st.text(max_size=8)))
def test_without_own_secrets_drops_exactly_the_secrets(environment: dict[str, str]) -> None:
    kept = without_own_secrets(environment)
    assert kept == {name: value for name, value in environment.items() if name not in OWN_SECRETS}
    assert MCP_TOKEN not in kept
